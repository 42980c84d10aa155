"""The idle pacing's settings in the cluster config and on `okapi up` (docs/operations.md, "Running a
cluster"): defaults, validation, the TOML round trip, and an explicit heartbeat period turning it off."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from okapikv.cli import build_parser
from okapikv.cluster.config import ClusterConfig, local_cluster
from okapikv.cluster.launcher import config_from_args


def test_the_default_cluster_backs_off_and_its_core_config_says_so() -> None:
    config = local_cluster(dcs=("a", "b"), partitions=1)
    assert (config.idle_after_ms, config.idle_interval_ms) == (1000.0, 1000.0)
    core = config.core_config(0, 0)
    assert (core.idle_after_us, core.idle_interval_us) == (1_000_000, 1_000_000)


def test_the_idle_settings_survive_the_toml_and_are_validated(tmp_path: Path) -> None:
    config = dataclasses.replace(local_cluster(dcs=("a",), partitions=1), idle_after_ms=0.0, idle_interval_ms=50.0)
    path = config.dump(tmp_path / "cluster.toml")
    loaded = ClusterConfig.load(path)
    assert (loaded.idle_after_ms, loaded.idle_interval_ms) == (0.0, 50.0)
    with pytest.raises(ValueError, match="idle_after_ms must be a non-negative"):
        dataclasses.replace(config, idle_after_ms=-1.0)
    with pytest.raises(ValueError, match="must not speed up"):
        dataclasses.replace(config, idle_after_ms=1000.0, idle_interval_ms=1.0)


def test_okapi_up_turns_the_pacing_off_with_an_explicit_heartbeat_unless_asked_for() -> None:
    parser = build_parser()

    def up(*flags: str) -> ClusterConfig:
        return config_from_args(parser.parse_args(["up", "--in-memory", *flags]))

    assert up().idle_after_ms == 1000.0 and up().heartbeat_interval_ms == 5.0
    assert up().idle_interval_ms == local_cluster(dcs=("a",), partitions=1).idle_interval_ms == 1000.0
    assert up("--heartbeat-ms", "1").idle_after_ms == 0.0  # the paper's setting
    paced = up("--heartbeat-ms", "1", "--idle-after-ms", "2000", "--idle-interval-ms", "50")
    assert (paced.heartbeat_interval_ms, paced.idle_after_ms, paced.idle_interval_ms) == (1.0, 2000.0, 50.0)
