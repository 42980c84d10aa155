"""CoreConfig validation: a bad configuration fails at start-up with every problem named."""

from __future__ import annotations

import dataclasses

import pytest

from okapikv.core.config import CoreConfig


def test_defaults_follow_the_paper() -> None:
    config = CoreConfig(dc=0, partition=0, num_dcs=3, num_partitions=32)
    assert config.protocol == "okapi"
    assert config.heartbeat_interval_us == 1_000
    assert config.stabilization_interval_us == 5_000
    assert config.max_key_bytes == 1024
    assert config.max_value_bytes == 1 << 20
    assert not config.piggyback_usv
    assert config.max_clock_offset_us == 500_000


@pytest.mark.parametrize("protocol", ["okapi", "cure", "gentlerain", "eventual"])
def test_every_registered_protocol_is_accepted(protocol: str) -> None:
    assert CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=1, protocol=protocol).protocol == protocol


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_dcs": 0}, "num_dcs must be at least 1"),
        ({"num_partitions": 0}, "num_partitions must be at least 1"),
        ({"dc": 3}, "dc 3 out of range 0..2"),
        ({"dc": -1}, "dc -1 out of range"),
        ({"partition": 4}, "partition 4 out of range 0..3"),
        ({"num_dcs": 256}, "num_dcs must be at most 255"),
        ({"protocol": "raft"}, "unknown protocol 'raft'"),
        ({"heartbeat_interval_us": 0}, "heartbeat_interval_us must be positive"),
        ({"stabilization_interval_us": -5}, "stabilization_interval_us must be positive"),
        ({"gc_interval_us": 0}, "gc_interval_us must be positive"),
        ({"gc_budget": 0}, "gc_budget must be positive"),
        ({"max_key_bytes": 0}, "max_key_bytes must be positive"),
        ({"max_value_bytes": 0}, "max_value_bytes must be positive"),
        ({"max_read_keys": 0}, "max_read_keys must be positive"),
        ({"max_clock_offset_us": 0}, "max_clock_offset_us must be positive"),
    ],
)
def test_invalid_values_are_refused(overrides: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"dc": 0, "partition": 0, "num_dcs": 3, "num_partitions": 4}
    arguments.update(overrides)
    with pytest.raises(ValueError, match="invalid server configuration") as info:
        CoreConfig(**arguments)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_all_problems_are_reported_at_once() -> None:
    with pytest.raises(ValueError) as info:
        CoreConfig(dc=5, partition=5, num_dcs=1, num_partitions=1, protocol="nope", gc_budget=0)
    text = str(info.value)
    for fragment in ("dc 5", "partition 5", "unknown protocol", "gc_budget"):
        assert fragment in text


def test_frozen() -> None:
    config = CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.dc = 1  # type: ignore[misc]
