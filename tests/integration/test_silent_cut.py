"""A silent network cut between two DCs heals to flowing replication within a bound, and no link
is declared dead under load.

Two DCs, one server each, in network namespaces (``netns_support``), plaintext so that the peer
links run over the native port. For 40 s nftables drops every packet between the two hosts (no RST,
no ICMP: what a failed switch does), while writes go on in DC a. Once the rules are gone, a write
made in DC a during the cut and one made right after the heal must both be readable in DC b within
``HEAL_BOUND_S``: the link noticed the dead connection (``okapikv.server.liveness``), reconnected
with backoff and resent its unacknowledged tail. Without the liveness check the link waits on its
old TCP connection for the kernel's next retransmission, which exponential backoff puts up to the
cut's own length after the heal.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from integration_support import ClusterFactory
from netns_support import Hosts, namespace_hosts, server_logs, start_agent

from okapikv.client import AsyncClient
from okapikv.cluster.config import ClusterConfig, ServerConfig, uniform_wan_ms
from okapikv.wire import okapikv_pb2 as pb

DCS = ("east", "west")
PORT = 7200
CUT_S = 40.0
HEAL_BOUND_S = 5.0
LOAD_S = 12.0


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    with namespace_hosts("cut", len(DCS), need_nft=True) as made:
        yield made


@pytest.mark.slow
def test_replication_flows_within_seconds_of_healing_a_silent_cut(hosts: Hosts, tmp_path: Path) -> None:
    servers = tuple(ServerConfig(dc, 0, f"{address}:{PORT}") for dc, address in zip(DCS, hosts.addresses, strict=True))
    config = ClusterConfig(dcs=DCS, partitions=1, servers=servers, wan_ms=uniform_wan_ms(DCS, 5.0),
                           cluster_id="silent-cut-test")
    assert config.native and config.tls is None  # peer links over the native port
    path = config.dump(tmp_path / "cluster.toml")
    with server_logs(tmp_path, DCS, tail_chars=4000) as logs:
        for index, dc in enumerate(DCS):
            hosts.exec(index, [sys.executable, "-m", "okapikv.cli", "server", "--config", str(path), "--dc", dc,
                               "--partition", "0", "--in-memory", "--log-format", "json"], stdin=subprocess.DEVNULL,
                       stdout=logs[dc], stderr=subprocess.STDOUT)
        east, west = (start_agent(hosts, index, server.address, len(DCS)) for index, server in enumerate(servers))
        for client in (east, west):
            client("ready", addresses=[server.address for server in servers])
        east("put", key="before", value="1")
        assert west("wait", key="before", value="1") == "1"

        cut_at = time.time()
        hosts.cut(0, 1)
        cut_end = time.monotonic() + CUT_S
        written = 0
        while time.monotonic() < cut_end:  # writes go on in DC east during the cut
            written += 1
            east("put", key="during", value=str(written))
            time.sleep(1.0)
        hosts.heal(0, 1)
        healed, healed_at = time.monotonic(), time.time()
        east("put", key="after", value="1")
        assert west("wait", key="during", value=str(written)) == str(written)
        assert west("wait", key="after", value="1") == "1"
        elapsed = time.monotonic() - healed
        print(f"replication flowed {elapsed:.2f} s after the heal of a {CUT_S:.0f} s silent cut")
        assert elapsed < HEAL_BOUND_S, f"replication resumed {elapsed:.1f} s after the heal"
        for client in (east, west):
            client.stop()
    events = [json.loads(line) for dc in DCS for line in (tmp_path / f"{dc}.log").read_text().splitlines()
              if line.startswith("{")]
    dead_at = [datetime.fromisoformat(event["time"]).timestamp() for event in events
               if event.get("event") == "link_dead"]
    assert dead_at, "no link was found dead during the cut"
    assert all(cut_at < when < healed_at for when in dead_at), "a link was found dead outside the cut"


def test_no_link_is_found_dead_under_load(cluster_factory: ClusterFactory) -> None:
    """The other side of the liveness check: 3 DCs x 2 partitions with the longest emulated WAN
    delay (65 ms one way) on this small machine, writes of 4 KiB values as fast as 48 sessions go
    for ``LOAD_S``: no link is declared dead (a false positive costs a reconnect and a resend)."""
    cluster = cluster_factory(dcs=("oregon", "virginia", "ireland"), partitions=2, wan_ms=65.0)
    value = b"v" * 4096

    async def load() -> int:
        clients = [AsyncClient(cluster.address(dc, 0), timeout_s=30) for dc in range(3)]
        done = 0
        stop = time.monotonic() + LOAD_S

        async def session(client: AsyncClient, number: int) -> None:
            nonlocal done
            while time.monotonic() < stop:
                await client.put(f"load-{number}-{done % 50}", value)
                done += 1

        try:
            await asyncio.gather(*(session(client.fork(), number) for number in range(16)
                                   for client in clients))
        finally:
            for client in clients:
                await client.close()
        return done

    writes = asyncio.run(load())
    links = [link for dc in range(3) for partition in range(2)
             for link in json.loads(cluster.stub(dc, partition).Stats(pb.StatsRequest(), timeout=10).json)
             ["links"].values()]
    print(f"{writes} writes in {LOAD_S:.0f} s; links: {sum(link['probes'] for link in links)} probes, "
          f"{sum(link['dead'] for link in links)} found dead")
    assert writes > 1000
    assert all(link["dead"] == 0 and link["connects"] == 1 for link in links), links
