"""Systems are parsed once from the names users give (``--protocols``), which stay as they are."""

from __future__ import annotations

import pytest

from benchmarks.harness.options import BenchOptions
from benchmarks.harness.systems import REDIS_SYSTEM, VARIANTS, System, parse_system, parse_systems
from okapikv.core.protocols import protocol_names


@pytest.mark.parametrize("name", protocol_names())
def test_a_protocol_is_a_system_with_default_settings(name: str) -> None:
    system = parse_system(name)
    assert system == System(name) and system.name == name and system.settings() == {} and system.is_okapikv


def test_the_variants_are_okapi_with_one_cluster_setting() -> None:
    assert parse_system("okapi-bounded") == System("okapi", bounded_visibility=True)
    assert parse_system("okapi-piggyback") == System("okapi", piggyback_usv=True)
    assert System("okapi", bounded_visibility=True).settings() == {"bounded_visibility": True}
    for name, system in VARIANTS.items():
        assert system.name == name and parse_system(system.name) == system


def test_a_list_of_names_is_parsed_in_order_and_every_unknown_name_is_reported() -> None:
    assert parse_systems(" okapi, cure ,okapi-bounded") == (
        System("okapi"), System("cure"), System("okapi", bounded_visibility=True))
    known = r"choose from cure, .*okapi, .*okapi-bounded, okapi-piggyback$"  # test plug-ins may add names
    with pytest.raises(ValueError, match=r"unknown protocol\(s\) paxos, raft; " + known):
        parse_systems("okapi,paxos,raft")
    with pytest.raises(ValueError, match=r"unknown protocol\(s\) \(none\)"):
        parse_systems(" , ")
    with pytest.raises(ValueError, match="unknown protocol"):
        parse_system("redis")  # the Redis reference is a suite's, not a --protocols name


def test_redis_is_not_an_okapikv_system() -> None:
    assert not REDIS_SYSTEM.is_okapikv and REDIS_SYSTEM.name == "redis"


def test_results_name_the_systems_as_users_gave_them() -> None:
    options = BenchOptions(systems=(System("okapi"), System("okapi", piggyback_usv=True)))
    config = options.to_config()
    assert config["protocols"] == ["okapi", "okapi-piggyback"] and "systems" not in config
    assert list(config)[:4] == ["suite", "workload", "protocols", "clients"]
