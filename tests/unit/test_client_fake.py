"""The client library against an in-process fake KeyValue service (``client_fake_server.py``).

Covers what the protocol makes the client responsible for: routing each key to its partition's
server and never to another DC, carrying and merging the causal session, pipelining concurrent
operations into batches matched by id, retrying while a server is down, ``Unavailable`` after
``timeout_s``, and ``InvalidArgument`` with the server's message. These are the drivers' I/O; the
decisions and their timing (how long a retry waits, when an operation gives up, at-most-once) are
the policy's, tested with a fake clock in ``test_client_policy.py``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest
from client_fake_server import FakeCluster

import okapikv
from okapikv.client import AsyncClient, Client
from okapikv.client.aio import MAX_MESSAGES_PER_TURN
from okapikv.client.native import GRPC_CHUNK
from okapikv.client.topology import Topology
from okapikv.core.backoff import Backoff
from okapikv.core.partitioning import partition_of
from okapikv.errors import InvalidArgument, OkapiError, OutcomeUnknown, ProtocolMismatch, Unavailable
from okapikv.wire import okapikv_pb2 as pb

T = TypeVar("T")
FAST = Backoff(base_s=0.01, cap_s=0.1)


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


@pytest.fixture
def fake() -> Iterator[FakeCluster]:
    cluster = FakeCluster(num_partitions=2)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def stopped_fake() -> Iterator[FakeCluster]:
    cluster = FakeCluster(num_partitions=2)
    try:
        yield cluster
    finally:
        cluster.close()


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    """Poll ``condition`` (state the test waits for, not a length of time) until it holds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def keys_on(partition: int, count: int, num_partitions: int = 2) -> list[str]:
    keys: list[str] = []
    index = 0
    while len(keys) < count:
        key = f"key{index}"
        if partition_of(key.encode(), num_partitions) == partition:
            keys.append(key)
        index += 1
    return keys


# ------------------------------------------------------------------ the blocking client


def test_lazy_import_from_the_package() -> None:
    assert okapikv.Client is Client
    assert okapikv.AsyncClient is AsyncClient


def test_sync_every_operation(fake: FakeCluster) -> None:
    with Client(fake.addresses[1], timeout_s=5) as client:
        assert client.topology.dc_name == "oregon"
        assert client.topology.addresses == tuple(fake.addresses)
        assert client.get("a") is None
        assert client.put("a", "1") is False
        assert client.put(b"a", b"2") is True
        assert client.get("a") == b"2"
        assert client.swap("a", "3") == b"2"
        assert client.swap("b", bytearray(b"4")) is None
        assert client.scan("a", "z") == [(b"a", b"3"), (b"b", b"4")]
        assert client.scan("a", "z", limit=1) == [(b"a", b"3")]
        assert client.scan("z", "a") == []
        assert client.read_tx(["b", "missing", "a", "b"]) == [b"4", None, b"3", b"4"]
        assert client.read_tx([]) == []
        assert client.delete("a") is True
        assert client.delete("a") is False
        assert client.get("a") is None
        assert client.stats(1) == {"partition": 1}


def test_sync_operations_travel_over_the_stream_unless_pipeline_is_off(fake: FakeCluster) -> None:
    with Client(fake.addresses[0], timeout_s=5) as client:
        for number in range(20):
            client.put(f"s{number}", "v")
            assert client.get(f"s{number}") == b"v"
    servicers = fake.servicers
    assert sum(s.received.pipelined_operations for s in servicers) == 40
    assert sum(s.received.unary_calls for s in servicers) == 0
    assert all(size == 1 for s in servicers for size in s.received.batch_sizes)
    with Client(fake.addresses[0], timeout_s=5, pipeline=False) as client:
        assert client.get("s0") == b"v"
    assert sum(s.received.unary_calls for s in servicers) == 1
    assert sum(s.received.pipelined_operations for s in servicers) == 40


def test_sync_threads_sharing_a_client_all_get_their_own_answers(fake: FakeCluster) -> None:
    """One stream per server carries one operation at a time; a thread that finds it busy makes a
    unary call, so sharing threads neither wait for each other's stream nor read each other's replies."""
    errors: list[BaseException] = []
    with Client(fake.addresses[0], timeout_s=5) as client:

        def worker(number: int) -> None:
            try:
                for index in range(30):
                    key = f"t{number}-{index}"
                    client.put(key, key)
                    assert client.get(key) == key.encode()
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=worker, args=(number,)) for number in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert not errors
    servicers = fake.servicers
    assert sum(s.received.pipelined_operations + s.received.unary_calls for s in servicers) == 4 * 30 * 2


def test_sync_routes_every_key_to_its_partition(fake: FakeCluster) -> None:
    keys = [f"k{i}" for i in range(40)]
    with Client(fake.addresses[0], timeout_s=5) as client:
        for key in keys:
            client.put(key, "v")
            client.get(key)
    for partition, servicer in enumerate(fake.servicers):
        received = {key for method, key in servicer.received.keys if method in ("get", "put")}
        assert received == {k.encode() for k in keys if partition_of(k.encode(), 2) == partition}
        assert received, "both partitions should get some keys"


def test_sync_session_is_sent_and_merged(fake: FakeCluster) -> None:
    key = keys_on(0, 1)[0]
    with Client(fake.addresses[0], timeout_s=5) as client:
        assert client.session.stable == (0, 0) and client.session.dt == 0
        client.put(key, "v")
        assert client.session.dt == fake.state.clock
        fake.state.stable = (5, 7)
        client.get(key)
        assert client.session.stable == (5, 7)
        fake.state.stable = (1, 1)  # an older stable vector must not move the session back
        client.get(key)
        assert client.session.stable == (5, 7)
        client.get(key)
        assert fake.servicers[0].received.sessions[-1] == ((5, 7), 1)


def test_sync_fork_has_a_fresh_session(fake: FakeCluster) -> None:
    with Client(fake.addresses[0], timeout_s=5) as client:
        client.put("a", "1")
        fork = client.fork()
        assert fork.session.dt == 0
        assert fork.get("a") == b"1"
        fork.close()
        assert client.get("a") == b"1"  # closing a fork leaves the shared channels open


def test_sync_invalid_argument_carries_the_server_message(fake: FakeCluster) -> None:
    client = Client(fake.addresses[0], timeout_s=5)
    with client, pytest.raises(InvalidArgument, match="key must not be empty"):
        client.get("")


def test_sync_retries_until_the_server_is_back(fake: FakeCluster) -> None:
    key = keys_on(1, 1)[0]
    with Client(fake.addresses[0], timeout_s=10, backoff=FAST) as client:
        client.put(key, "before")
        fake.stop(1)
        fake.start_later(1, 0.5)
        assert client.swap(key, "after") == b"before"


def test_sync_streams_lost_to_server_restarts_leave_no_threads_behind(fake: FakeCluster) -> None:
    key = keys_on(1, 1)[0]
    with Client(fake.addresses[0], timeout_s=10, backoff=FAST) as client:
        client.put(key, "0")
        baseline = threading.active_count()
        for number in range(1, 6):
            fake.stop(1)  # ends the open stream to partition 1
            fake.start(1)
            client.put(key, str(number))  # on a new stream
        deadline = time.monotonic() + 5
        while threading.active_count() > baseline + 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threading.active_count() <= baseline + 1
        assert client.get(key) == b"5"


def test_sync_bootstrap_waits_for_the_cluster(stopped_fake: FakeCluster) -> None:
    stopped_fake.start_later(0, 0.4)
    stopped_fake.start_later(1, 0.4)
    with Client(stopped_fake.addresses[0], timeout_s=10, backoff=FAST) as client:
        assert client.put("a", "1") is False


def test_sync_unavailable_after_the_timeout(fake: FakeCluster) -> None:
    key = keys_on(0, 1)[0]
    with Client(fake.addresses[0], timeout_s=0.6, backoff=FAST) as client:
        fake.stop(0)
        with pytest.raises(Unavailable, match="no answer within 0.6 s"):
            client.get(key)


def test_sync_unavailable_when_the_server_hangs(fake: FakeCluster) -> None:
    with Client(fake.addresses[0], timeout_s=0.5) as client:
        fake.state.hang = True
        with pytest.raises(Unavailable):
            client.get("a")


def test_sync_at_most_once_still_retries_what_was_never_sent(fake: FakeCluster) -> None:
    key = keys_on(1, 1)[0]
    with Client(fake.addresses[0], timeout_s=10, backoff=FAST, at_most_once=True) as client:
        client.put(key, "before")
        stream = client._connections.links[1]._stream
        fake.stop(1)  # every call now fails before it is sent ("failed to connect to all addresses")
        fake.start_later(1, 0.5)
        # Let the client see the connection go (a write sent on a connection that is closing but not
        # yet known closed may have left, and is rightly reported as of unknown outcome).
        assert stream is not None
        wait_until(lambda: stream.failed, "the client seeing the stream end")
        assert client.swap(key, "after") == b"before"


@pytest.mark.parametrize("at_most_once", [False, True])
def test_sync_write_whose_call_breaks_midway(fake: FakeCluster, at_most_once: bool) -> None:
    """The server goes away while the write is in flight: by default the client retries it (at least
    once); with ``at_most_once`` it reports that the outcome is unknown, and reads still retry."""
    key = keys_on(1, 1)[0]
    with Client(fake.addresses[0], timeout_s=10, backoff=FAST, at_most_once=at_most_once) as client:
        client.put(key, "before")
        fake.state.hang = True
        outcome: list[object] = []

        def swap() -> None:
            try:
                outcome.append(client.swap(key, "after"))
            except OkapiError as error:
                outcome.append(error)

        received = fake.servicers[1].received.batch_sizes
        before = len(received)
        thread = threading.Thread(target=swap)
        thread.start()
        wait_until(lambda: len(received) > before, "the swap reaching its server")
        fake.stop(1)  # cancels the call in flight
        fake.state.hang = False
        fake.start_later(1, 0.3)
        thread.join(timeout=10)
        if at_most_once:
            assert len(outcome) == 1 and isinstance(outcome[0], OutcomeUnknown), outcome
            assert "may or may not have taken effect" in str(outcome[0])
        else:
            assert outcome == [b"before"]
        assert client.get(key) in (b"before", b"after")


def test_sync_at_most_once_write_past_its_deadline_is_unknown(fake: FakeCluster) -> None:
    with Client(fake.addresses[0], timeout_s=0.5, at_most_once=True) as client:
        fake.state.hang = True
        with pytest.raises(OutcomeUnknown):
            client.put("a", "1")
        with pytest.raises(Unavailable):
            client.get("a")


def test_sync_bootstrap_unavailable(stopped_fake: FakeCluster) -> None:
    with pytest.raises(Unavailable, match="ClusterInfo"):
        Client(stopped_fake.addresses[0], timeout_s=0.3, backoff=FAST)


def test_sync_closed_client_refuses(fake: FakeCluster) -> None:
    client = Client(fake.addresses[0], timeout_s=5)
    client.close()
    with pytest.raises(OkapiError, match="closed"):
        client.get("a")


def test_sync_scan_and_tx_move_to_another_coordinator(fake: FakeCluster) -> None:
    with Client(fake.addresses[0], timeout_s=5, backoff=FAST) as client:
        client.put(keys_on(0, 1)[0], "x")
        fake.stop(0)
        # Partition 0's server is down: any other server of the DC can coordinate.
        assert len(client.scan("a", "z")) == 1
        assert client.read_tx([keys_on(0, 1)[0]]) == [b"x"]


# ------------------------------------------------------------------ the async client


@pytest.mark.parametrize("pipeline", [True, False])
def test_async_every_operation(fake: FakeCluster, pipeline: bool) -> None:
    async def scenario() -> None:
        async with AsyncClient(fake.addresses[0], timeout_s=5, pipeline=pipeline) as client:
            assert await client.get("a") is None
            assert await client.put("a", "1") is False
            assert await client.put("a", "2") is True
            assert await client.swap("a", "3") == b"2"
            assert await client.swap("b", "4") is None
            assert await client.scan("a", "z") == [(b"a", b"3"), (b"b", b"4")]
            assert await client.scan("a", "z", limit=1) == [(b"a", b"3")]
            assert await client.read_tx(["b", "a", "b", "c"]) == [b"4", b"3", b"4", None]
            assert await client.delete("a") is True
            assert await client.get("a") is None
            assert await client.stats(0) == {"partition": 0}
            with pytest.raises(ValueError):
                await client.scan("a", "b", limit=0)

    run(scenario())
    pipelined = sum(s.received.pipelined_operations for s in fake.servicers)
    unary = sum(s.received.unary_calls for s in fake.servicers)
    if pipeline:
        assert pipelined == 10 and unary == 0
    else:
        assert pipelined == 0 and unary == 10


def test_async_connects_lazily(fake: FakeCluster) -> None:
    async def scenario() -> None:
        client = AsyncClient(fake.addresses[0], timeout_s=5)
        with pytest.raises(OkapiError, match="not connected"):
            _ = client.session
        assert await client.put("a", "1") is False
        assert client.topology.num_partitions == 2
        await client.close()

    run(scenario())


def test_async_concurrent_operations_share_batches(fake: FakeCluster) -> None:
    keys = [f"k{i}" for i in range(200)]

    async def scenario() -> None:
        async with AsyncClient(fake.addresses[0], timeout_s=5) as client:
            await asyncio.gather(*(client.fork().put(key, key + "v") for key in keys))
            values = await asyncio.gather(*(client.fork().get(key) for key in keys))
            # The fake answers each batch in reverse order: results are matched by id.
            assert values == [(key + "v").encode() for key in keys]
            batches, operations = client.pipeline_counters()
            assert operations == 400
            # 2 rounds (puts, gets) x 2 partitions, each round's operations for a partition split
            # into at most MAX_MESSAGES_PER_TURN messages of at least GRPC_CHUNK (the fake is gRPC only)
            assert batches <= 2 * 2 * MAX_MESSAGES_PER_TURN

    run(scenario())
    sizes = [size for s in fake.servicers for size in s.received.batch_sizes]
    assert sum(sizes) == 400
    assert max(sizes) >= GRPC_CHUNK


def test_async_batches_are_capped(fake: FakeCluster) -> None:
    async def scenario() -> None:
        async with AsyncClient(fake.addresses[0], timeout_s=5, max_batch=16) as client:
            await asyncio.gather(*(client.get(f"k{i}") for i in range(300)))

    run(scenario())
    sizes = [size for s in fake.servicers for size in s.received.batch_sizes]
    assert sum(sizes) == 300 and max(sizes) <= 16


def test_async_routes_and_merges_sessions(fake: FakeCluster) -> None:
    async def scenario() -> None:
        async with AsyncClient(fake.addresses[0], timeout_s=5) as client:
            for i in range(20):
                await client.put(f"r{i}", "v")
            assert client.session.dt == fake.state.clock
            fake.state.stable = (9, 3)
            await client.get("r0")
            assert client.session.stable == (9, 3)
            fork = client.fork()
            assert fork.session.stable == (0, 0) and fork.session.dt == 0
            await fork.get("r0")
            await client.get("r0")
            server = fake.partition_server(b"r0")
            assert server.received.sessions[-2] == ((0, 0), 0)  # the fork's own session
            assert server.received.sessions[-1] == ((9, 3), 20)

    run(scenario())
    for partition, servicer in enumerate(fake.servicers):
        assert all(partition_of(key, 2) == partition for method, key in servicer.received.keys if method == "put")


@pytest.mark.parametrize("pipeline", [True, False])
def test_async_invalid_argument(fake: FakeCluster, pipeline: bool) -> None:
    async def scenario() -> None:
        async with AsyncClient(fake.addresses[0], timeout_s=5, pipeline=pipeline) as client:
            results = await asyncio.gather(client.get(""), client.get("a"), return_exceptions=True)
            assert isinstance(results[0], InvalidArgument)
            assert "key must not be empty" in str(results[0])
            assert results[1] is None  # the other operation of the batch is unaffected

    run(scenario())


def test_async_oversized_operation_is_refused_locally(fake: FakeCluster) -> None:
    async def scenario() -> None:
        async with AsyncClient(fake.addresses[0], timeout_s=5) as client:
            big = client.put("a", b"x" * (5 << 20))
            small = client.put("b", "1")
            results = await asyncio.gather(big, small, return_exceptions=True)
            assert isinstance(results[0], InvalidArgument)
            assert results[1] is False

    run(scenario())


@pytest.mark.parametrize("pipeline", [True, False])
def test_async_retries_until_the_server_is_back(fake: FakeCluster, pipeline: bool) -> None:
    key = keys_on(1, 1)[0]

    async def scenario() -> None:
        async with AsyncClient(fake.addresses[0], timeout_s=10, pipeline=pipeline, backoff=FAST) as client:
            await client.put(key, "before")
            fake.stop(1)
            fake.start_later(1, 0.5)
            assert await asyncio.gather(*(client.get(key) for _ in range(5))) == [b"before"] * 5

    run(scenario())


def test_async_survives_a_server_restart_between_operations(fake: FakeCluster) -> None:
    async def scenario() -> None:
        async with AsyncClient(fake.addresses[0], timeout_s=10, backoff=FAST) as client:
            await asyncio.gather(*(client.put(f"k{i}", "v") for i in range(10)))
            fake.stop()
            fake.start()
            assert await asyncio.gather(*(client.get(f"k{i}") for i in range(10))) == [b"v"] * 10

    run(scenario())


def test_async_bootstrap_waits_for_the_cluster(stopped_fake: FakeCluster) -> None:
    async def scenario() -> None:
        stopped_fake.start_later(0, 0.4)
        stopped_fake.start_later(1, 0.4)
        async with AsyncClient(stopped_fake.addresses[1], timeout_s=10, backoff=FAST) as client:
            assert await client.get("a") is None

    run(scenario())


@pytest.mark.parametrize("pipeline", [True, False])
def test_async_unavailable_after_the_timeout(fake: FakeCluster, pipeline: bool) -> None:
    key = keys_on(0, 1)[0]

    async def scenario() -> None:
        async with AsyncClient(fake.addresses[0], timeout_s=0.6, pipeline=pipeline, backoff=FAST) as client:
            fake.stop(0)
            with pytest.raises(Unavailable, match="no answer within 0.6 s"):
                await client.put(key, "v")

    run(scenario())


@pytest.mark.parametrize("pipeline", [True, False])
def test_async_unavailable_when_the_server_hangs(fake: FakeCluster, pipeline: bool) -> None:
    async def scenario() -> None:
        async with AsyncClient(fake.addresses[0], timeout_s=0.5, pipeline=pipeline) as client:
            fake.state.hang = True
            with pytest.raises(Unavailable):
                await client.get("a")
            fake.state.hang = False
            assert await client.get("a") is None  # the stream is still usable afterwards

    run(scenario())


def test_async_closed_client_refuses(fake: FakeCluster) -> None:
    async def scenario() -> None:
        client = AsyncClient(fake.addresses[0], timeout_s=5)
        await client.connect()
        fork = client.fork()
        await client.close()
        with pytest.raises(OkapiError, match="closed"):
            await client.get("a")
        with pytest.raises(OkapiError):
            await fork.get("a")

    run(scenario())


def test_async_constructor_validates() -> None:
    with pytest.raises(ValueError):
        AsyncClient("127.0.0.1:1", timeout_s=0)
    with pytest.raises(ValueError):
        AsyncClient("127.0.0.1:1", max_batch=0)


# ------------------------------------------------------------------ pieces


def test_topology_checks_and_fixes_addresses() -> None:
    info = pb.ClusterInfoResponse(
        cluster_id="c", dc_names=["a", "b"], num_partitions=2, protocol="okapi", dc=1,
        servers=[pb.ServerAddress(dc=1, partition=0, address="0.0.0.0:7002"),
                 pb.ServerAddress(dc=1, partition=1, address="10.0.0.2:7003"),
                 pb.ServerAddress(dc=0, partition=0, address="10.0.0.9:7000")])
    topology = Topology.from_cluster_info(info, "myhost:7002")
    assert topology.addresses == ("myhost:7002", "10.0.0.2:7003")
    assert topology.dc_name == "b" and topology.num_dcs == 2
    del info.servers[1]
    with pytest.raises(ProtocolMismatch, match=r"partition\(s\) \[1\]"):
        Topology.from_cluster_info(info, "myhost:7002")
    with pytest.raises(ProtocolMismatch):
        Topology.from_cluster_info(pb.ClusterInfoResponse(), "myhost:7002")


def test_keys_must_be_str_or_bytes(fake: FakeCluster) -> None:
    with Client(fake.addresses[0], timeout_s=5) as client, pytest.raises(TypeError):
        client.get(42)  # type: ignore[arg-type]


# ------------------------------------------------------------------ the okapi client process


def test_okapi_client_process_answers_line_by_line(fake: FakeCluster) -> None:
    """A driver writes one line and waits for its answer: the client must neither buffer its
    output nor wait for more input before answering."""
    process = subprocess.Popen(
        [sys.executable, "-m", "okapikv.cli", "client", "--connect", fake.addresses[0], "--timeout-s", "5"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "0"})
    assert process.stdin is not None and process.stdout is not None
    try:
        for line, expected in [("PUT a 1", "PUT a not_found"), ("GET a", "GET a 1"), ("bad", "ERROR ")]:
            process.stdin.write(line + "\n")
            process.stdin.flush()
            assert process.stdout.readline().startswith(expected)
        process.stdin.write("STOP\n")
        process.stdin.flush()
        assert process.stdout.readline() == "STOP\n"
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()



def _coordinators(fake: FakeCluster, method: str) -> list[int]:
    return [index for index, servicer in enumerate(fake.servicers)
            for seen, _ in servicer.received.keys if seen == method]


def test_sync_scan_and_tx_are_coordinated_by_the_sessions_server(fake: FakeCluster) -> None:
    """Both go to the server the client was given, whatever their keys; a fork's to the next
    server of the DC; ``coordinator="first-key"``: a RO-TX to its first key's server."""
    key = keys_on(0, 1)[0]
    with Client(fake.addresses[1], timeout_s=5) as client:
        client.read_tx([key])
        client.scan("a", "z")
        assert (_coordinators(fake, "read_tx"), _coordinators(fake, "scan")) == ([1], [1])
        fork = client.fork()
        fork.read_tx([key])
        fork.scan("a", "z")
        assert (_coordinators(fake, "read_tx"), _coordinators(fake, "scan")) == ([0, 1], [0, 1])
    with Client(fake.addresses[1], timeout_s=5, coordinator="first-key") as client:
        client.read_tx([key])
    assert _coordinators(fake, "read_tx") == [0, 0, 1]


def test_async_scan_and_tx_are_coordinated_by_the_sessions_server(fake: FakeCluster) -> None:
    key = keys_on(0, 1)[0]

    async def scenario() -> None:
        async with AsyncClient(fake.addresses[1], timeout_s=5) as client:
            await client.read_tx([key])
            await client.scan("a", "z")
            fork = client.fork()
            await fork.read_tx([key])
            await fork.scan("a", "z")
        async with AsyncClient(fake.addresses[1], timeout_s=5, coordinator="first-key") as client:
            await client.read_tx([key])

    run(scenario())
    assert (_coordinators(fake, "read_tx"), _coordinators(fake, "scan")) == ([0, 0, 1], [0, 1])
