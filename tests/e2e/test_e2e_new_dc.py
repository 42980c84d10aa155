"""A brand-new DC joins a running cluster, through real processes (docs/operations.md, "Adding a
region"), for the three protocols: a durable `okapi up` cluster of 3 DCs (a, b, c) x 1 partition
under a write load from real `okapi client` processes (`okapi fuzz`, recording the history), DC d's
server started from the grown config on an empty data directory with `--repair`, `okapi dc join d`
and `okapi dc add d`.

d catches up on what was written before it existed, serves reads and writes, its writes reach a, b
and c, `okapi status` shows it joining and then a member, a server's ClusterInfo names it (clients
learn it without a restart), and the checkers find no anomaly in the history of the whole load,
which ran across the join; no acknowledged write is lost (the convergence reads at the end read
every key in every DC).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from okapi_processes import ClientProcess, Cluster

from okapikv.check.history import load_history
from okapikv.cluster.config import ClusterConfig, ServerConfig
from okapikv.cluster.ports import free_port_block
from okapikv.cluster.processes import start_server

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

OKAPI = [sys.executable, "-m", "okapikv.cli"]
VISIBLE_WITHIN_S = 20.0
#: operations per fuzz client: the load runs across the join (a few seconds: a server's start) even
#: at about 1,000 operations a second
OPS = 1500


def okapi(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*OKAPI, *arguments], capture_output=True, text=True, timeout=120, env=env)


def status(env: dict[str, str], config: Path) -> list[dict[str, object]]:
    result = okapi(env, "status", "--json", "--config", str(config))
    assert result.returncode in (0, 1), result.stderr  # 1: some server does not answer yet
    servers: list[dict[str, object]] = json.loads(result.stdout)["servers"]
    return servers


def wait_for(probe: ClientProcess, line: str, expected: str, within_s: float) -> None:
    started = time.monotonic()
    while (answer := probe.send(line)) != [expected]:
        assert time.monotonic() - started < within_s, f"{line!r} still answers {answer} after {within_s} s"
        time.sleep(0.05)


def grown_config(config: ClusterConfig, name: str) -> ClusterConfig:
    """``config`` with DC ``name`` added last: one server on free ports, no emulated WAN delay."""
    port = free_port_block(2)
    server = ServerConfig(name, 0, f"127.0.0.1:{port}", resp_port=port + 1)
    wan = tuple((*row, 0.0) for row in config.wan_ms) + ((0.0,) * (len(config.dcs) + 1),)
    return dataclasses.replace(config, dcs=(*config.dcs, name), servers=(*config.servers, server), wan_ms=wan)


@pytest.mark.parametrize("protocol", ["okapi", "gentlerain", "cure"])
def test_a_new_dc_joins_under_a_write_load(tmp_path: Path, protocol: str) -> None:
    cluster = Cluster(tmp_path, ["a", "b", "c"], partitions=1, extra=["--wan", "off", "--protocol", protocol])
    cluster.start()
    env = cluster.env
    grown_path = tmp_path / "grown.toml"
    grown = grown_config(ClusterConfig.load(tmp_path / "cluster.toml"), "d")
    grown.dump(grown_path)
    writer = ClientProcess(env, "--connect", cluster.address("a"))
    clients = [writer]
    new_server: subprocess.Popen[bytes] | None = None
    history_path = tmp_path / "history.jsonl"
    load = subprocess.Popen([*OKAPI, "fuzz", "--connect", cluster.address("a"), "--clients", "3", "--conflict",
                             "--dcs", "a,b,c", "--ops", str(OPS), "--seed", "29", "--history", str(history_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        for index in range(5):
            assert writer.send(f"PUT before{index} {index}") == [f"PUT before{index} not_found"]

        deadline = time.monotonic() + 60
        while sum(int(record.get("operations_total") or 0) for record in status(env, tmp_path / "cluster.toml")) < 50:
            assert time.monotonic() < deadline and load.poll() is None, "the load does not start"
            time.sleep(0.2)  # until the load's clients run (each is a process to start)
        joining_at_us = time.monotonic_ns() // 1000  # the history's clock (``okapikv.fuzz.recorder``)
        refused = okapi(env, "dc", "join", "e", "--config", str(grown_path))
        assert refused.returncode == 2 and "last DC" in refused.stderr  # the new DC is the config's last
        joined = okapi(env, "dc", "join", "d", "--config", str(grown_path))
        print(joined.stdout, joined.stderr)
        assert joined.returncode == 0, joined.stderr
        assert "took the config of 4 DCs" in joined.stdout and "epoch 0 -> 1" in joined.stdout
        assert all(record["dc_states"] == {"a": "member", "b": "member", "c": "member", "d": "joining"}
                   for record in status(env, grown_path) if record["dc"] != "d")
        # ClusterInfo names d: a client that asks a running server learns it (okapi status --connect does)
        topology = json.loads(okapi(env, "status", "--json", "--connect", cluster.address("a")).stdout)
        assert [record["dc"] for record in topology["servers"]].count("d") == 1

        new_server = start_server(grown_path, grown.server("d", 0), data_dir=tmp_path / "okapi-data" / "d-p0",
                                  repair=True)
        deadline = time.monotonic() + 60
        while not all(record["reachable"] for record in status(env, grown_path)):
            assert time.monotonic() < deadline, "d's server does not answer"
            time.sleep(0.5)
        added = okapi(env, "dc", "add", "d", "--config", str(grown_path))
        print(added.stdout, added.stderr)
        assert added.returncode == 0, added.stderr
        assert "epoch 1 -> 2" in added.stdout and "d caught up" in added.stdout
        member_at_us = time.monotonic_ns() // 1000
        servers = status(env, grown_path)
        assert len(servers) == 4 and all(record["reachable"] for record in servers)
        assert all(record["dc_states"] == {"a": "member", "b": "member", "c": "member", "d": "member"}
                   for record in servers)

        reader = ClientProcess(env, "--connect", grown.server("d", 0).address)
        clients.append(reader)
        for index in range(5):
            assert reader.send(f"GET before{index}") == [f"GET before{index} {index}"]  # caught up
        assert reader.send("PUT from-d 1") == ["PUT from-d not_found"]
        for dc in ("a", "b", "c"):
            probe = ClientProcess(env, "--connect", cluster.address(dc))
            clients.append(probe)
            wait_for(probe, "GET from-d", "GET from-d 1", VISIBLE_WITHIN_S)

        output, _ = load.communicate(timeout=180)
        print(output)
        assert load.returncode == 0 and output.rstrip().endswith("PASS"), output
        history = load_history(history_path)
        # no operation refused for the growth (a session naming the new DC at a server that has not
        # grown: GentleRain's one-time sessions decoded to the config's DC count before the core's)
        refused_for_growth = [op for op in history.operations if "does not know yet" in str(op.error)]
        assert not refused_for_growth, refused_for_growth[:3]
        writes = [op for op in history.operations if op.is_write and op.ok and not op.final]
        # the load ran across the join: acknowledged writes before it began and while d was joining
        # (not necessarily after: on a fast machine the load may end first; d's own reads and writes
        # after it became a member are checked above)
        assert any(op.invoke_us < joining_at_us for op in writes), "the load began after the join"
        assert any(joining_at_us < op.invoke_us < member_at_us for op in writes), "no write while d joined"
        print(f"{len(writes)} acknowledged writes; the join took {(member_at_us - joining_at_us) / 1e6:.1f} s")
        checked = okapi(env, "check", str(history_path))
        print(checked.stdout)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        if load.poll() is None:
            load.kill()
            load.wait(timeout=15)
        for client in clients:
            client.close()
        if new_server is not None:
            new_server.terminate()
            new_server.wait(timeout=15)
        cluster.stop()
