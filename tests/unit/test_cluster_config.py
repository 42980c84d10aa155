"""The cluster config file: the default local cluster, TOML round trips, precise validation errors."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

import pytest

from okapikv.cluster.config import (
    ClusterConfig,
    ServerConfig,
    default_config_path,
    load_default_cluster,
    local_cluster,
    split_address,
)


def test_local_cluster_orders_ports_dc_major_and_spreads_skew() -> None:
    config = local_cluster(dcs=("a", "b"), partitions=3, wan="off", clock_skew_ms=10, base_port=7000)
    assert [(s.dc, s.partition, s.address) for s in config.servers] == [
        ("a", 0, "127.0.0.1:7000"), ("a", 1, "127.0.0.1:7001"), ("a", 2, "127.0.0.1:7002"),
        ("b", 0, "127.0.0.1:7003"), ("b", 1, "127.0.0.1:7004"), ("b", 2, "127.0.0.1:7005"),
    ]
    assert [s.clock_skew_ms for s in config.servers] == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert config.wan_ms == ((0.0, 0.0), (0.0, 0.0))


def test_realistic_wan_uses_the_paper_regions_and_50_ms_otherwise() -> None:
    config = local_cluster(dcs=("oregon", "virginia", "ireland", "tokyo"), partitions=1)
    assert config.delay_ms(0, 1) == config.delay_ms(1, 0) == 35.0
    assert config.delay_ms(0, 2) == 65.0
    assert config.delay_ms(1, 2) == 38.0
    assert config.delay_ms(3, 0) == config.delay_ms(2, 3) == 50.0
    assert all(config.delay_ms(i, i) == 0 for i in range(4))


def test_uniform_wan_and_ipv6_hosts() -> None:
    config = local_cluster(dcs=("a", "b"), partitions=1, wan=7.5, host="::1", base_port=9000)
    assert config.delay_ms(0, 1) == 7.5
    assert [s.address for s in config.servers] == ["[::1]:9000", "[::1]:9001"]
    assert split_address("[::1]:9000") == ("::1", 9000)


def test_core_config_carries_the_cluster_settings() -> None:
    config = ClusterConfig.from_dict(local_cluster(dcs=("a", "b"), partitions=2).to_dict()
                                     | {"protocol": "cure", "heartbeat_interval_ms": 2.5, "piggyback_usv": True})
    core = config.core_config("b", 1)
    assert (core.dc, core.partition, core.num_dcs, core.num_partitions) == (1, 1, 2, 2)
    assert core.protocol == "cure" and core.heartbeat_interval_us == 2500 and core.piggyback_usv


@pytest.mark.parametrize("names", [("oregon", "virginia"), ('we"ird', "sp ace", "é", "tab\there")])
def test_toml_round_trip(names: tuple[str, ...]) -> None:
    config = local_cluster(dcs=names, partitions=2, clock_skew_ms=3.3, wan=12.25)
    assert ClusterConfig.from_toml(config.to_toml()) == config


def test_dump_and_load(tmp_path: Path) -> None:
    config = local_cluster(partitions=1)
    path = config.dump(tmp_path / "deep" / "cluster.toml")
    assert ClusterConfig.load(path) == config


def test_native_settings_round_trip_and_defaults() -> None:
    default = local_cluster(dcs=("a", "b"), partitions=1)
    assert default.native is True
    assert all(server.native_port == 0 for server in default.servers)
    assert "native = true" in default.to_toml().splitlines()
    assert "native_port" not in default.to_toml()  # 0 (any free port) is not written
    assert all("native_port" not in entry for entry in default.to_dict()["servers"])
    first, second = default.servers
    config = dataclasses.replace(default, native=False,
                                 servers=(dataclasses.replace(first, native_port=7999), second))
    assert "native = false" in config.to_toml().splitlines()
    assert "native_port = 7999" in config.to_toml().splitlines()
    for loaded in (ClusterConfig.from_toml(config.to_toml()), ClusterConfig.from_dict(config.to_dict())):
        assert loaded == config
        assert loaded.native is False
        assert [s.native_port for s in loaded.servers] == [7999, 0]


def test_bounded_visibility_is_off_by_default_and_round_trips() -> None:
    default = local_cluster(dcs=("a", "b"), partitions=1)
    assert default.bounded_visibility is False
    assert "bounded_visibility = false" in default.to_toml().splitlines()
    config = dataclasses.replace(default, bounded_visibility=True)
    for loaded in (ClusterConfig.from_toml(config.to_toml()), ClusterConfig.from_dict(config.to_dict())):
        assert loaded == config and loaded.bounded_visibility is True
    with pytest.raises(ValueError, match="bounded_visibility must be true or false"):
        ClusterConfig.from_dict(default.to_dict() | {"bounded_visibility": "yes"})


def test_max_clock_offset_defaults_to_500_ms_reaches_the_core_and_round_trips() -> None:
    default = local_cluster(dcs=("a", "b"), partitions=1)
    assert default.max_clock_offset_ms == 500.0
    assert "max_clock_offset_ms = 500.0" in default.to_toml().splitlines()
    assert default.core_config("a", 0).max_clock_offset_us == 500_000
    config = dataclasses.replace(default, max_clock_offset_ms=250.5)
    for loaded in (ClusterConfig.from_toml(config.to_toml()), ClusterConfig.from_dict(config.to_dict())):
        assert loaded == config and loaded.core_config("b", 0).max_clock_offset_us == 250_500
    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="max_clock_offset_ms must be a positive number of ms"):
            dataclasses.replace(default, max_clock_offset_ms=bad)
    with pytest.raises(ValueError, match="max_clock_offset_ms must be a finite number"):
        ClusterConfig.from_dict(default.to_dict() | {"max_clock_offset_ms": "half a second"})


def _base() -> dict[str, object]:
    return local_cluster(dcs=("a", "b"), partitions=1, wan=5).to_dict()


def test_a_native_port_may_repeat_a_port_of_another_host() -> None:
    config = ClusterConfig.from_dict(_base() | {"servers": [
        {"dc": "a", "partition": 0, "address": "10.0.0.1:7000", "native_port": 7001},
        {"dc": "b", "partition": 0, "address": "10.0.0.2:7001", "native_port": 7000},
    ]})
    assert [s.native_port for s in config.servers] == [7001, 7000]


def test_a_bind_address_is_where_every_listener_binds_and_round_trips() -> None:
    """Peers and clients dial ``address`` (advertised); the server listens on ``bind``'s host."""
    config = ClusterConfig.from_dict(_base() | {"servers": [
        {"dc": "a", "partition": 0, "address": "a-0.okapi:7100", "bind": "0.0.0.0:7100",
         "peer_address": "a-0.okapi:7200"},
        {"dc": "b", "partition": 0, "address": "b-0.okapi:7100", "bind": "[::]:7101"},
    ]})
    a, b = config.servers
    assert (a.listen_address, a.listen_host, a.peer_listen_address) == ("0.0.0.0:7100", "0.0.0.0", "0.0.0.0:7200")
    assert (a.local_address, b.local_address, b.listen_host) == ("127.0.0.1:7100", "[::1]:7101", "::")
    assert ClusterConfig.from_toml(config.to_toml()) == config
    plain = local_cluster(dcs=("a",), partitions=1, base_port=7000).servers[0]
    assert (plain.listen_address, plain.local_address, plain.peer_listen_address) == (
        "127.0.0.1:7000", "127.0.0.1:7000", None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"servers": [{"dc": "a", "partition": 0, "address": "127.0.0.1:1"},
                      {"dc": "c", "partition": 0, "address": "127.0.0.1:2"}]}, "unknown DC 'c'"),
        ({"servers": [{"dc": "a", "partition": 0, "address": "127.0.0.1:1"},
                      {"dc": "b", "partition": 0, "address": "127.0.0.1:1"}]}, "share the address 127.0.0.1:1"),
        ({"servers": [{"dc": "a", "partition": 0, "address": "127.0.0.1:1"}]}, "DC 'b' has no server for partition"),
        ({"partitions": 0}, "partitions must be at least 1"),
        ({"partitions": "2"}, "partitions must be an integer"),
        ({"partitions": True}, "partitions must be an integer"),
        ({"heartbeat_interval_ms": -1.0}, "heartbeat_interval_ms must be a positive number"),
        ({"stabilization_interval_ms": "fast"}, "stabilization_interval_ms must be a finite number"),
        ({"wan_ms": {"a": [0.0, -5.0], "b": [5.0, 0.0]}}, "must be a non-negative number"),
        ({"wan_ms": {"a": [0.0], "b": [5.0, 0.0]}}, "wan_ms.a must be an array of 2 delays"),
        ({"wan_ms": {"a": [1.0, 5.0], "b": [5.0, 0.0]}}, "from a DC to itself must be 0"),
        ({"wan_ms": {"z": [0.0, 5.0]}}, "wan_ms names unknown DC(s) z"),
        ({"protocol": "paxos"}, "unknown protocol 'paxos'"),
        ({"dcs": ["a", "a"], "wan_ms": {}}, "duplicate names: a"),
        ({"max_message_bytes": 1000}, "max_message_bytes (1000) must be at least"),
        ({"colour": "blue"}, "unknown setting(s) colour"),
        ({"servers": [{"dc": "a", "partition": 0, "address": "localhost"}]}, "must be HOST:PORT"),
        ({"servers": [{"dc": "a", "partition": 0, "address": "h:70000"}]}, "port must be in 1..65535"),
        ({"servers": [{"dc": "a", "partition": 5, "address": "h:1"}]}, "partition 5 out of range 0..0"),
        ({"servers": [{"dc": "a", "partition": 0, "address": "h:1", "port": 3}]}, "unknown setting(s) port"),
        ({"servers": [{"dc": "a", "address": "h:1"}]}, "missing partition"),
        ({"native": "yes"}, "native must be true or false"),
        ({"servers": [{"dc": "a", "partition": 0, "address": "127.0.0.1:1", "native_port": 70000},
                      {"dc": "b", "partition": 0, "address": "127.0.0.1:2"}]}, "native_port must be in 0..65535"),
        ({"servers": [{"dc": "a", "partition": 0, "address": "127.0.0.1:1", "native_port": -1},
                      {"dc": "b", "partition": 0, "address": "127.0.0.1:2"}]}, "native_port must be in 0..65535"),
        ({"servers": [{"dc": "a", "partition": 0, "address": "127.0.0.1:1", "native_port": "2"},
                      {"dc": "b", "partition": 0, "address": "127.0.0.1:2"}]}, "native_port must be an integer"),
        ({"servers": [{"dc": "a", "partition": 0, "address": "127.0.0.1:1"},
                      {"dc": "b", "partition": 0, "address": "127.0.0.1:2", "native_port": 1}]},
         "native port 1 is already used by a/0"),
        ({"servers": [{"dc": "a", "partition": 0, "address": "127.0.0.1:1", "native_port": 1},
                      {"dc": "b", "partition": 0, "address": "127.0.0.1:2"}]}, "native port 1 is already used by a/0"),
        ({"servers": [{"dc": "a", "partition": 0, "address": "127.0.0.1:1", "metrics_port": 9, "native_port": 9},
                      {"dc": "b", "partition": 0, "address": "127.0.0.1:2"}]}, "native port 9 is already used by a/0"),
        ({"servers": [{"dc": "a", "partition": 0, "address": "a-0:1", "bind": "0.0.0.0"},
                      {"dc": "b", "partition": 0, "address": "b-0:1"}]}, "server a/0: bind: address '0.0.0.0' must"),
        ({"servers": [{"dc": "a", "partition": 0, "address": "a-0:1", "bind": 7100},
                      {"dc": "b", "partition": 0, "address": "b-0:1"}]}, "bind must be a string"),
    ],
)
def test_validation_names_the_problem(change: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        ClusterConfig.from_dict(_base() | change)
    assert message in str(raised.value)


def test_invalid_toml_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not valid TOML"):
        ClusterConfig.from_toml("dcs = [", source="x.toml")
    with pytest.raises(ValueError, match="cannot read cluster config"):
        ClusterConfig.load(tmp_path / "missing.toml")


def test_lookups() -> None:
    config = local_cluster(dcs=("a", "b"), partitions=2, base_port=7000)
    assert config.server("b", 1) == ServerConfig("b", 1, "127.0.0.1:7003", 0.0)
    assert config.server(1, 0).address == "127.0.0.1:7002"
    with pytest.raises(ValueError, match="unknown DC 'c'"):
        config.dc_index("c")
    with pytest.raises(ValueError, match="no partition 2"):
        config.server("a", 2)


def test_default_config_path_follows_okapi_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OKAPI_HOME", str(tmp_path))
    assert default_config_path() == tmp_path / "cluster.toml"
    with pytest.raises(ValueError, match="okapi up"):
        load_default_cluster()
    config = local_cluster(partitions=1)
    config.dump(default_config_path())
    assert load_default_cluster() == config
    monkeypatch.delenv("OKAPI_HOME")
    assert default_config_path() == Path.home() / ".okapi" / "cluster.toml"


def test_connection_settings_default_round_trip_and_are_validated() -> None:
    from okapikv.cluster.connections import ConnectionSettings

    config = local_cluster(dcs=("a", "b"), partitions=1, wan="off")
    assert config.connections == ConnectionSettings()
    assert "[connections]" not in config.to_toml()  # all defaults: nothing to say
    tuned = dataclasses.replace(config, connections=ConnectionSettings(link_ack_timeout_ms=6000, idle_timeout_ms=0))
    text = tuned.to_toml()
    assert "[connections]" in text and "link_ack_timeout_ms = 6000" in text
    assert ClusterConfig.from_toml(text) == tuned and ClusterConfig.from_dict(tuned.to_dict()) == tuned
    base = config.to_dict()
    for change, message in (
        ({"tcp_keepalive": 5}, "connections: unknown setting(s) tcp_keepalive"),
        ({"frame_timeout_ms": "20s"}, "connections.frame_timeout_ms must be a finite number of ms"),
        ({"frame_timeout_ms": 0}, "connections.frame_timeout_ms must be a positive number of ms"),
        ({"input_budget_bytes": 1 << 20}, "input_budget_bytes (1048576) must be at least max_message_bytes"),
        ({"link_probe_ms": 4000}, "link_ack_timeout_ms (4000.0) must exceed connections.link_probe_ms"),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            ClusterConfig.from_dict(base | {"connections": change})
    with pytest.raises(ValueError, match=r"connections must be a table"):
        ClusterConfig.from_dict(base | {"connections": 5})


def test_read_limits_default_round_trip_reach_the_core_and_are_validated() -> None:
    from okapikv.cluster.reads import DEFAULT_SCAN_BYTES, ReadLimits

    config = local_cluster(dcs=("a",), partitions=2)
    assert config.reads == ReadLimits()
    assert "[reads]" not in config.to_toml()  # all defaults: nothing to say
    core = config.core_config("a", 1)
    assert (core.max_scan_items, core.max_scan_bytes, core.max_read_keys, core.read_timeout_us) == (
        4096, DEFAULT_SCAN_BYTES, 10_000, 5_000_000)
    tuned = dataclasses.replace(config, reads=ReadLimits(max_scan_items=100, snapshot_lease_ms=2500,
                                                         max_snapshot_retries=0))
    text = tuned.to_toml()
    assert "[reads]" in text and "max_scan_items = 100" in text
    assert ClusterConfig.from_toml(text) == tuned
    core = tuned.core_config("a", 0)
    assert (core.max_scan_items, core.snapshot_lease_us, core.max_snapshot_retries) == (100, 2_500_000, 0)
    # unset, a page's byte budget shrinks to what a smaller message limit leaves beside one pair
    small = ClusterConfig.from_dict(config.to_dict() | {"max_message_bytes": 2 << 20})
    assert small.core_config("a", 0).max_scan_bytes == (2 << 20) - 1024 - (1 << 20) - (64 << 10)
    base = config.to_dict()
    for change, message in [
        ({"max_scan": 5}, "reads: unknown setting(s) max_scan"),
        ({"max_scan_items": 0}, "reads: max_scan_items must be positive"),
        ({"max_scan_items": "many"}, "reads.max_scan_items must be an integer"),
        ({"read_timeout_ms": "5s"}, "reads.read_timeout_ms must be a finite number of ms"),
        ({"max_read_items": 100}, "max_read_items must be at least max_read_keys and max_scan_items"),
        ({"max_scan_bytes": 1 << 30}, "reads.max_scan_bytes (1073741824) leaves no room in max_message_bytes"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            ClusterConfig.from_dict(base | {"reads": change})
    with pytest.raises(ValueError, match=r"reads must be a table"):
        ClusterConfig.from_dict(base | {"reads": 5})


def test_a_partition_count_far_beyond_the_servers_listed_fails_at_once() -> None:
    """The missing partitions were listed by counting to ``partitions``: one line of TOML
    (``partitions = 100000000``) held ``okapi server`` for 107 s and built a message of 900 MB. They are
    found in steps bounded by the servers listed, and the message names ten and counts the rest."""
    with pytest.raises(ValueError, match=re.escape("for partition(s) 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, "
                                                   "... (999,999,999,999 in all)")) as raised:
        ClusterConfig.from_dict(_base() | {"partitions": 10**12})
    assert len(str(raised.value)) < 1000
    with pytest.raises(ValueError, match=re.escape("DC 'b' has no server for partition(s) 0, 2")):
        ClusterConfig.from_dict(_base() | {"partitions": 3, "servers": [
            {"dc": "a", "partition": p, "address": f"127.0.0.1:{p + 1}"} for p in range(3)] + [
            {"dc": "b", "partition": 1, "address": "127.0.0.1:9"}]})


def test_more_dcs_than_a_cluster_may_have_are_refused_before_the_delay_matrix_is_built() -> None:
    names = [f"dc{index}" for index in range(100_000)]  # a matrix of 10^10 delays if built
    with pytest.raises(ValueError, match="dcs names 100000 DCs; a cluster has at most 255"):
        ClusterConfig.from_dict(_base() | {"dcs": names})


@pytest.mark.parametrize("text", ["a = " + "[" * 100_000, "a = " + "{b = " * 5_000, "partitions = " + "9" * 5_000])
def test_toml_that_tomllib_cannot_take_is_a_config_error(text: str) -> None:
    with pytest.raises(ValueError, match="^x.toml: not valid TOML: "):
        ClusterConfig.from_toml(text, source="x.toml")


# ------------------------------------------------------------------ the settings' table and the writer


ROOT = Path(__file__).resolve().parents[2]


def test_the_reference_is_generated_from_the_settings_table() -> None:
    """docs/config.md is what ``okapikv.cluster.config.reference`` writes (regenerate it with
    ``python -m okapikv.cluster.config.reference > docs/config.md``)."""
    from okapikv.cluster.config import reference

    assert (ROOT / "docs" / "config.md").read_text(encoding="utf-8") == reference.markdown()


def test_the_reference_types_each_optional_section_field_by_what_it_holds() -> None:
    """A ``[connections]`` or ``[reads]`` row is a time in ms only when its name ends in ``_ms``, and
    a field unset by default says what the server then uses, never ``None``."""
    from okapikv.cluster.config import reference

    rows = [line.split(" | ") for line in reference.markdown().splitlines() if line.startswith("| `")]
    optional = [row for row in rows if len(row) == 3]
    assert any(row[0] == "| `max_scan_bytes`" for row in optional)
    for name, kind, default in optional:
        assert (kind == "number (ms)") == name.endswith("_ms`"), name
        assert default.strip(" |") not in ("None", ""), name


def test_the_settings_table_names_every_key_with_the_models_default() -> None:
    """Every key the parser takes has a row, and each row's default is the model's, written as TOML."""
    import tomlkit

    from okapikv.cluster.config import fields, parse
    from okapikv.tls import TlsConfig

    assert {item.name for item in dataclasses.fields(ClusterConfig) if item.init} == parse.TOP_LEVEL_KEYS
    defaults = {item.name: item.default for item in dataclasses.fields(ClusterConfig)}
    for setting in fields.CLUSTER:
        if setting.default != "required":
            assert tomlkit.item(defaults[setting.name]).as_string() == setting.default, setting.name
    server_defaults = {item.name: item.default for item in dataclasses.fields(ServerConfig)}
    assert [s.name for s in fields.SERVER] == list(server_defaults)
    for setting in fields.SERVER:
        expected = {"required": dataclasses.MISSING, "none": None}.get(setting.default, setting.default)
        found = server_defaults[setting.name]
        assert (found if found in (dataclasses.MISSING, None) else tomlkit.item(found).as_string()) == expected
    assert [s.name for s in fields.TLS] == [item.name for item in dataclasses.fields(TlsConfig)]


def test_a_written_config_carries_the_settings_comments_and_reads_back_exactly() -> None:
    from okapikv.cluster.config import fields
    from okapikv.cluster.connections import ConnectionSettings

    config = dataclasses.replace(local_cluster(dcs=("a", 'b "quoted"'), partitions=2),
                                 connections=ConnectionSettings(idle_timeout_ms=0))
    text = config.to_toml()
    lines = text.splitlines()
    assert lines[:2] == [f"# {line}" for line in fields.HEADER]
    for setting in fields.CLUSTER:
        at = next(index for index, line in enumerate(lines) if line.startswith(f"{setting.name} = "))
        assert lines[at - len(setting.comment):at] == [f"# {line}" for line in setting.comment]
    assert f"[wan_ms] # {fields.WAN_COMMENT}" in lines and f"[connections] # {fields.CONNECTIONS_COMMENT}" in lines
    assert tomllib.loads(text) == config.to_dict()
    assert ClusterConfig.from_toml(text) == config
