"""The RESP port driven in-process (one asyncio loop), so its limits can be shortened: the server's
input guard (``okapikv.server.budgets``, the ``[connections]`` settings) closes, with one error
reply, a connection whose request stays half-sent past the frame deadline, one that sends no
command within the first-frame deadline and one whose half-sent request does not fit the server's
input budget, while other clients go on being served and lose no write; a request that keeps
arriving, a piece at a time, within the deadline is not cut off; a connection over the port's
connection limit is refused with an error. Commands the port hands straight to the core answer in
order and byte for byte as the Executor does (in memory and durable), and the commands of many
connections reach the core in shared calls."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import pathlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
import redis.asyncio as aioredis
from integration_support import free_port_range

from okapikv.cluster.config import MESSAGE_OVERHEAD_BYTES, local_cluster
from okapikv.cluster.connections import ConnectionSettings
from okapikv.core.messages import GetRequest, Message, PutRequest
from okapikv.resp import connection as connection_module
from okapikv.resp import limits as limits_module
from okapikv.resp.direct import Forward, Planned, plan
from okapikv.resp.limits import RespLimits
from okapikv.serve import app
from okapikv.serve.app import serve
from okapikv.server.node import PartitionNode
from okapikv.storage.group_commit import GroupCommitter
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc

FRAME_TIMEOUT_S = 0.5


def _run(check: Callable[[int], Awaitable[None]], monkeypatch: pytest.MonkeyPatch, *,
         connections: dict[str, Any] | None = None, settings: dict[str, Any] | None = None,
         data_dir: str | None = None, **limits: Any) -> None:
    """Serve 1 DC x 1 partition in this loop with ``connections`` ([connections] settings; the frame
    timeout FRAME_TIMEOUT_S unless given), other cluster ``settings``, RESP ``limits`` and, with
    ``data_dir``, durable, and run ``check(resp_port)``."""
    if limits:
        original = limits_module.RespLimits.from_config

        def changed(config: object, max_read_keys: int) -> RespLimits:
            return dataclasses.replace(original(config, max_read_keys), **limits)  # type: ignore[arg-type]

        monkeypatch.setattr(app.RespLimits, "from_config", staticmethod(changed))
    config = local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=free_port_range(1))
    config = dataclasses.replace(config, connections=ConnectionSettings(
        **{"frame_timeout_ms": FRAME_TIMEOUT_S * 1000, **(connections or {})}), **(settings or {}))
    address = config.servers[0].address

    async def main() -> None:
        import grpc.aio

        stop = asyncio.Event()
        server = asyncio.create_task(serve(config, 0, 0, stop=stop, data_dir=data_dir))
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                await asyncio.wait_for(channel.channel_ready(), timeout=30)
                stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
                stats = json.loads((await stub.Stats(pb.StatsRequest())).json)
                await asyncio.wait_for(check(stats["driver"]["resp_port"]), timeout=60)
        finally:
            stop.set()
            await asyncio.wait_for(server, timeout=30)

    asyncio.run(main())


async def _read_until_closed(reader: asyncio.StreamReader) -> bytes:
    received = b""
    while chunk := await reader.read(65536):
        received += chunk
    return received


def test_a_half_sent_request_times_out_and_others_are_served(monkeypatch: pytest.MonkeyPatch) -> None:
    async def check(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$5\r\nva")  # ... and waits
        started = time.monotonic()
        other = aioredis.Redis(port=port)
        for index in range(50):  # meanwhile another client is served
            assert await other.set(f"other-{index}", str(index))
        received = await asyncio.wait_for(_read_until_closed(reader), timeout=10)
        waited = time.monotonic() - started
        assert received.startswith(b"+PONG\r\n-ERR a frame of ")
        assert received.endswith(b" bytes was not complete %g s after its first byte\r\n" % FRAME_TIMEOUT_S)
        assert FRAME_TIMEOUT_S * 0.8 < waited < FRAME_TIMEOUT_S + 5
        writer.close()
        assert await other.get("half") is None
        assert await other.mget([f"other-{index}" for index in range(50)]) == [str(i).encode() for i in range(50)]
        await other.aclose()

    _run(check, monkeypatch)


def test_a_request_that_keeps_arriving_is_not_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each request completes within the deadline, though some read always ends inside one."""

    async def check(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        frames = b"".join(b"*3\r\n$3\r\nSET\r\n$3\r\nk%02d\r\n$2\r\nvv\r\n" % index for index in range(12))
        step = len(frames) // 12 + 3  # never on a frame boundary
        for start in range(0, len(frames), step):
            writer.write(frames[start:start + step])
            await writer.drain()
            await asyncio.sleep(FRAME_TIMEOUT_S / 3)
        received = b""
        while received.count(b"\r\n") < 12:
            received += await asyncio.wait_for(reader.read(65536), timeout=10)
        assert received == b"+OK\r\n" * 12
        writer.close()

    _run(check, monkeypatch)


def test_a_connection_that_sends_nothing_is_closed_after_the_first_frame_deadline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def check(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        received = await asyncio.wait_for(_read_until_closed(reader), timeout=10)
        assert received == b"-ERR no complete frame within 0.5 s of connecting\r\n"
        writer.close()

    _run(check, monkeypatch, connections={"first_frame_timeout_ms": 500})


def test_half_sent_requests_share_the_servers_input_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two connections announce 600 kB values and send a few bytes of them: the second does not fit
    a budget of about 1.1 MB and is refused; the first, and every other client, are served."""
    smallest = 1024 + (1 << 20) + MESSAGE_OVERHEAD_BYTES  # key + value limit + overhead: the least allowed

    async def check(port: int) -> None:
        header = b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$600000\r\n" + b"x" * 100
        first_reader, first = await asyncio.open_connection("127.0.0.1", port)
        first.write(header % (7, b"first-k"))
        await first.drain()
        await asyncio.sleep(0.2)
        second_reader, second = await asyncio.open_connection("127.0.0.1", port)
        second.write(header % (8, b"second-k"))
        refusal = await asyncio.wait_for(_read_until_closed(second_reader), timeout=10)
        assert refusal.startswith(b"-ERR server busy: a partial frame of ")
        assert b"does not fit in the input budget" in refusal
        first.write(b"x" * (600_000 - 100) + b"\r\n")  # the first one finishes its request
        assert await asyncio.wait_for(first_reader.readline(), timeout=10) == b"+OK\r\n"
        other = aioredis.Redis(port=port)
        assert len(await other.get("first-k") or b"") == 600_000 and await other.get("second-k") is None
        await other.aclose()
        first.close()
        second.close()

    _run(check, monkeypatch, connections={"input_budget_bytes": smallest}, settings={"max_message_bytes": smallest})


def test_a_connection_over_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    async def check(port: int) -> None:
        first, second = aioredis.Redis(port=port), aioredis.Redis(port=port)
        assert await first.ping() and await second.ping()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        refusal = await asyncio.wait_for(_read_until_closed(reader), timeout=10)
        assert refusal == b"-ERR max number of clients reached\r\n"
        writer.close()
        await second.aclose()
        for _ in range(100):  # a place is free again once the server has seen the close
            try:
                third = aioredis.Redis(port=port, single_connection_client=True)
                assert await third.ping()
                await third.aclose()
                break
            except Exception:
                await asyncio.sleep(0.05)
        else:
            raise AssertionError("no connection accepted after one closed")
        await first.aclose()

    _run(check, monkeypatch, max_connections=2)


def test_range_reads_page_through_the_cores_short_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The core answers a range in pages of at most ``max_scan_items`` pairs (and a page that examined
    only deleted keys may hold none): SCAN, OKAPI.RANGE, KEYS and DBSIZE read every page of one
    snapshot, so they see the whole range."""
    from okapikv.cluster.reads import ReadLimits

    async def check(port: int) -> None:
        client = aioredis.Redis(host="127.0.0.1", port=port)
        try:
            for index in range(40):
                await client.set(f"k{index:02d}", f"v{index}")
            for index in range(10, 30):  # a run of tombstones: pages that examine them return few pairs
                await client.delete(f"k{index:02d}")
            expected = [f"k{index:02d}".encode() for index in (*range(10), *range(30, 40))]
            assert await client.execute_command("OKAPI.RANGE", "k", "l") == [
                part for key in expected for part in (key, b"v" + key[1:].lstrip(b"0").rjust(1, b"0"))]
            assert sorted(await client.keys("k*")) == expected
            assert await client.dbsize() == len(expected)
            cursor, first = await client.scan(0, count=15)
            assert first == expected[:15] and cursor != 0
            cursor, rest = await client.scan(cursor, count=15)
            assert rest == expected[15:] and cursor == 0
        finally:
            await client.aclose()

    _run(check, monkeypatch, settings={"reads": ReadLimits(max_scan_items=3)})


def test_scan_cursors_of_long_keys_fit_64_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients parse SCAN cursors as 64-bit integers: a SCAN over keys longer than a cursor can
    spell gets table cursors below 2**63 and still visits every key once."""

    async def check(port: int) -> None:
        client = aioredis.Redis(host="127.0.0.1", port=port)
        try:
            keys = {f"user:session:{index:04d}".encode() for index in range(30)}
            for key in keys:
                await client.set(key, b"v")
            cursor, seen = 0, []
            while True:
                cursor, page = await client.scan(cursor, count=7)
                assert 0 <= cursor < 2**63
                seen += page
                if cursor == 0:
                    break
            assert sorted(seen) == sorted(keys)
        finally:
            await client.aclose()

    _run(check, monkeypatch)


def test_commands_do_not_look_the_event_loop_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each ``asyncio.get_running_loop()`` is a ``getpid`` system call: the connection and the node
    hold the loop, so 200 SETs on one connection make no lookup per command."""
    async def check(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        lookups = 0
        original = asyncio.get_running_loop

        def counting() -> asyncio.AbstractEventLoop:
            nonlocal lookups
            lookups += 1
            return original()

        monkeypatch.setattr(asyncio, "get_running_loop", counting)
        for index in range(200):
            writer.write(b"*3\r\n$3\r\nSET\r\n$4\r\nk%03d\r\n$1\r\nv\r\n" % index)
            assert await reader.readuntil(b"\r\n") == b"+OK\r\n"
        monkeypatch.setattr(asyncio, "get_running_loop", original)
        writer.close()
        assert lookups < 20, f"{lookups} event-loop lookups for 200 commands"

    _run(check, monkeypatch)


def _request(command: bytes) -> bytes:
    parts = command.split(b" ")
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(part), part) for part in parts)


#: commands the port hands straight to the core (``okapikv.resp.direct``) between ones the Executor
#: runs, errors of both included, and the replies; None: compared between the two runs only
MIXED: list[tuple[bytes, bytes | None]] = [
    (b"SET k 1", b"+OK\r\n"), (b"GET k", b"$1\r\n1\r\n"), (b"INCR k", b":2\r\n"), (b"INCRBY k 5", b":7\r\n"),
    (b"INCRBY k x", b"-ERR value is not an integer or out of range\r\n"),
    (b"DECRBY k -9223372036854775808", b"-ERR decrement would overflow\r\n"),
    (b"DECR k", b":6\r\n"), (b"GET k", b"$1\r\n6\r\n"), (b"EXISTS k", b":1\r\n"), (b"EXISTS k nope", b":1\r\n"),
    (b"PING", b"+PONG\r\n"), (b"DEL k", b":1\r\n"), (b"DEL k", b":0\r\n"), (b"GET k", b"$-1\r\n"),
    (b"EXISTS k", b":0\r\n"), (b"SET s v EX 100", b"+OK\r\n"),
    (b"INCR s", b"-ERR value is not an integer or out of range\r\n"),
    (b"MULTI", b"+OK\r\n"), (b"GET s", b"+QUEUED\r\n"), (b"EXISTS s", b"+QUEUED\r\n"),
    (b"EXEC", b"*2\r\n$1\r\nv\r\n:1\r\n"),
    (b"GET a b", b"-ERR wrong number of arguments for 'get' command\r\n"), (b"GET s", b"$1\r\nv\r\n"),
    (b"SET " + b"x" * 5000 + b" v", None),  # a key over the limit: the core's refusal
    (b"SET c \xffOKAPI#C1", None),  # a counter's marker: refused
    (b"GET c", b"$-1\r\n"), (b"HELLO 3", None), (b"GET nope", b"_\r\n"), (b"QUIT", b"+OK\r\n"),
]


@pytest.mark.parametrize("durable", [False, True], ids=["in-memory", "durable"])
def test_direct_commands_answer_in_order_as_the_executor_does(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: pathlib.Path, durable: bool) -> None:
    """One write holding every kind of command: the replies come back in order, each command after
    the one before, and byte for byte what the Executor alone answers (direct requests off)."""
    received: list[bytes] = []
    planned: list[Planned | Forward] = []  # requests the first run's connection made itself

    def planning(*args: Any) -> Planned | Forward | None:
        made = plan(*args)
        if made is not None:
            planned.append(made)
        return made

    async def check(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(_request(command) for command, _ in MIXED))
        received.append(await asyncio.wait_for(_read_until_closed(reader), timeout=30))
        writer.close()

    for run, direct in enumerate((True, False)):
        with monkeypatch.context() as patch:
            patch.setattr(connection_module, "plan", planning if direct else lambda *_: None)
            _run(check, patch, data_dir=str(tmp_path / str(run)) if durable else None)
    assert received[0] == received[1]
    assert len(planned) == 17  # MIXED's GET, SET, DEL, EXISTS and counters of one key outside MULTI
    expected_start = b"".join(reply for reply in itertools.takewhile(lambda reply: reply is not None,
                                                                     (reply for _, reply in MIXED)))
    assert received[0].startswith(expected_start)
    refusals = received[0][len(expected_start):].split(b"\r\n$-1\r\n%")[0].split(b"\r\n")
    assert refusals[0].startswith(b"-ERR ") and b"key" in refusals[0]
    assert refusals[1].startswith(b"-ERR ") and b"counter" in refusals[1]
    assert received[0].endswith(b"_\r\n+OK\r\n")


@pytest.mark.parametrize("durable", [False, True], ids=["in-memory", "durable"])
def test_commands_of_many_connections_share_core_calls(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path,
                                                       durable: bool) -> None:
    """32 connections each sending a SET, then a GET three times, at once: their requests reach the
    core in a few calls (``okapikv.resp.batch``), not one call per command; durable, the SETs of one
    call are one commit stage (``GroupCommitter.stage``), not one each."""
    sizes: list[int] = []
    stages: list[int] = []  # per core call that carried SETs: the commit stages it made
    original, original_stage = PartitionNode.run_core, GroupCommitter.stage
    staged = [0]

    def counting(self: PartitionNode, messages: Sequence[Message]) -> None:
        requests = sum(type(message) in (GetRequest, PutRequest) for message in messages)
        if requests:
            sizes.append(requests)
        before = staged[0]
        original(self, messages)
        if any(type(message) is PutRequest for message in messages):
            stages.append(staged[0] - before)

    def stage(self: GroupCommitter, *args: Any) -> int:
        staged[0] += 1
        return original_stage(self, *args)

    monkeypatch.setattr(PartitionNode, "run_core", counting)
    monkeypatch.setattr(GroupCommitter, "stage", stage)

    async def check(port: int) -> None:
        clients = [aioredis.Redis(port=port, single_connection_client=True) for _ in range(32)]
        try:
            await asyncio.gather(*(client.set(f"many-{index}", index) for index, client in enumerate(clients)))
            for _ in range(3):
                values = await asyncio.gather(*(client.get(f"many-{index}") for index, client in enumerate(clients)))
                assert values == [str(index).encode() for index in range(32)]
        finally:
            for client in clients:
                await client.aclose()

    _run(check, monkeypatch, data_dir=str(tmp_path) if durable else None)
    assert sum(sizes) == 4 * 32
    assert stages == ([1] * len(stages) if durable else [0] * len(stages))
    assert len(sizes) <= 4 * 32 // 4, f"{sum(sizes)} commands took {len(sizes)} core calls: {sizes}"
