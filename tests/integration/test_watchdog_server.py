"""The event-loop watchdog in a running server (``okapikv.server.watchdog``, ``serve(loop_stall_s=)``):
a deliberately slow callback on the server's loop shows up as one log line naming its site and in
the Prometheus counters ``okapi_event_loop_stalls_total`` and ``okapi_event_loop_stall_seconds_total``,
while the server goes on serving. The server runs in this process, on this thread's loop, so the
test can hold that loop itself."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import time

import pytest
from integration_support import free_port_range

from okapikv.cluster.config import local_cluster
from okapikv.serve.app import serve


def hold_the_loop(seconds: float) -> None:
    """Computes for ``seconds`` of this thread's CPU time: a callback that never yields."""
    deadline = time.thread_time() + seconds
    while time.thread_time() < deadline:
        sum(range(100))


async def _scrape(port: int) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    body = await asyncio.wait_for(reader.read(), timeout=10)
    writer.close()
    return body.decode()


def _sample(text: str, name: str) -> float:
    found = re.search(rf"^{name}\{{[^}}]*\}} (\S+)$", text, re.MULTILINE)
    assert found, f"{name} not exported"
    return float(found.group(1))


def test_a_slow_callback_is_logged_with_its_site_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    base = free_port_range(2)
    config = local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=base)
    config = dataclasses.replace(config, servers=(dataclasses.replace(config.servers[0], metrics_port=base + 1),))

    async def main() -> None:
        stop = asyncio.Event()
        server = asyncio.create_task(serve(config, 0, 0, stop=stop, loop_stall_s=0.05))
        try:
            for _ in range(300):  # until the metrics endpoint answers
                try:
                    before = await _scrape(base + 1)
                    break
                except OSError:
                    await asyncio.sleep(0.05)
            assert _sample(before, "okapi_event_loop_stalls_total") == 0
            hold_the_loop(0.3)
            await asyncio.sleep(0.2)
            after = await _scrape(base + 1)
            assert _sample(after, "okapi_event_loop_stalls_total") == 1
            assert _sample(after, "okapi_event_loop_stall_seconds_total") > 0.3 / 2  # from the first sample
        finally:
            stop.set()
            await asyncio.wait_for(server, timeout=30)

    with caplog.at_level(logging.WARNING, logger="okapikv.server"):
        asyncio.run(main())
    stalls = [record for record in caplog.records if getattr(record, "event", None) == "loop_stall"]
    assert len(stalls) == 1, [record.getMessage() for record in stalls]
    message = stalls[0].getMessage()
    assert re.fullmatch(r"event loop held for \d\.\d{3} s \(\d\.\d{3} s computing; threshold 0\.050 s\) by "
                        r"integration/test_watchdog_server\.py:\d+ in hold_the_loop", message), message
