"""Hostile RESP headers against a real server process, with each parser (``OKAPI_RESP_PARSER``).

A header announces a count or a length before any of what it announces has arrived; a parser that
works or allocates in proportion to the announcement lets a few bytes hold the server's event loop,
and with it every other connection of the partition (hiredis preallocates an array's elements: a
14-byte ``*2147483647`` held the loop for 11.6 s). Each case here sends one such header, however
shaped (top level, nested, after a valid command, in an inline stream, as a bulk length, split over
reads), and another connection's SET and GET must not wait more than 50 ms for it: the majority of
5 rounds decides, so that one scheduling hiccup of a loaded machine does not decide alone, while a
stall, which every round would show, does. The hostile connection gets Redis's protocol error and
is closed, and the server keeps serving."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest
from integration_support import ClusterFactory, RunningCluster, cluster_processes

from okapikv.resp.parser import PARSER_VARIABLE, hiredis_available
from okapikv.wire import okapikv_pb2 as pb

pytestmark = pytest.mark.timeout(300)
HOST = "127.0.0.1"
#: the longest another connection's SET or GET may wait on a hostile request
STALL_BOUND_S = 0.050
ROUNDS = 5
HUGE = 2**31 - 1

#: what a hostile connection sends, read by read, and the start of what it must be answered
HOSTILE: dict[str, tuple[list[bytes], bytes]] = {
    "array count": ([b"*%d\r\n" % HUGE], b"-ERR Protocol error: invalid multibulk length"),
    "array count after a valid command in the same read": (
        [b"*1\r\n$4\r\nPING\r\n*%d\r\n" % HUGE], b"+PONG\r\n-ERR Protocol error: invalid multibulk length"),
    "array count split over two reads": ([b"*21474", b"83647\r\n"], b"-ERR Protocol error: invalid multibulk length"),
    "array count after a half-sent request": (
        [b"*2\r\n$3\r\nGET\r\n", b"$1\r\nk\r\n*%d\r\n" % HUGE],
        b"$-1\r\n-ERR Protocol error: invalid multibulk length"),
    "nested array count": ([b"*1\r\n*%d\r\n" % HUGE], b"-ERR Protocol error: expected '$', got '*'"),
    "nested set count": ([b"*2\r\n$3\r\nGET\r\n~%d\r\n" % HUGE], b"-ERR Protocol error: expected '$', got '~'"),
    "nested push count": ([b"*1\r\n>%d\r\n" % HUGE], b"-ERR Protocol error: expected '$', got '>'"),
    "nested attribute count": ([b"*1\r\n|%d\r\n" % HUGE], b"-ERR Protocol error: expected '$', got '|'"),
    "nested map count": ([b"*1\r\n%%%d\r\n" % (HUGE // 2)], b"-ERR Protocol error: expected '$', got '%'"),
    "array count after an inline command": ([b"PING\r\n*%d\r\n" % HUGE],
                                            b"+PONG\r\n-ERR Protocol error: invalid multibulk length"),
    "bulk length": ([b"*2\r\n$3\r\nGET\r\n$%d\r\n" % HUGE], b"-ERR Protocol error: invalid bulk length"),
    "inline line without end": ([b"GET " + b"9" * 70_000], b"-ERR Protocol error: too big inline request"),
}

PARSERS = [pytest.param("python", id="python"),
           pytest.param("hiredis", id="hiredis",
                        marks=pytest.mark.skipif(not hiredis_available(), reason="hiredis is not installed"))]


@pytest.fixture(scope="module", params=PARSERS)
def server(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningCluster, int]]:
    """One in-memory server (1 DC x 1 partition) whose RESP port uses the parser named by the param."""
    with pytest.MonkeyPatch.context() as patch, cluster_processes(tmp_path_factory.mktemp("hostile")) as (make, _):
        patch.setenv(PARSER_VARIABLE, request.param)
        factory: ClusterFactory = make
        cluster = factory(dcs=("solo",), partitions=1)
        stats = cluster.stub(0, 0).Stats(pb.StatsRequest(), timeout=10)
        port: int = json.loads(stats.json)["driver"]["resp_port"]
        yield cluster, port


def _connect(port: int) -> socket.socket:
    connection = socket.create_connection((HOST, port), timeout=30)
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return connection


def _round_trip(connection: socket.socket, request: bytes, reply: bytes) -> float:
    """Seconds from sending ``request`` to having received ``reply`` (asserted)."""
    started = time.monotonic()
    connection.sendall(request)
    received = b""
    while len(received) < len(reply):
        chunk = connection.recv(65536)
        assert chunk, f"closed after {received!r}"
        received += chunk
    elapsed = time.monotonic() - started
    assert received == reply
    return elapsed


def _until_closed(connection: socket.socket) -> bytes:
    received = b""
    while chunk := connection.recv(65536):
        received += chunk
    return received


def _slow(waits: list[float]) -> int:
    return sum(wait > STALL_BOUND_S for wait in waits)


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_header_does_not_delay_another_connection(server: tuple[RunningCluster, int], case: str) -> None:
    cluster, port = server
    reads, answer = HOSTILE[case]
    key = case.replace(" ", "-").encode()
    value = b"v" * 16
    set_request = b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$16\r\n%s\r\n" % (len(key), key, value)
    get_request = b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(key), key)
    waits: list[float] = []
    with _connect(port) as victim:
        _round_trip(victim, set_request, b"+OK\r\n")  # connected and served before any hostile byte
        while max(_slow(waits), len(waits) - _slow(waits)) <= ROUNDS // 2:  # until a majority decides
            with _connect(port) as hostile:
                for read in reads:
                    hostile.sendall(read)
                    time.sleep(0.01)  # one read each, and the server has the last before the victim asks
                wait = _round_trip(victim, set_request, b"+OK\r\n")
                wait = max(wait, _round_trip(victim, get_request, b"$16\r\n%s\r\n" % value))
                waits.append(wait)
                received = _until_closed(hostile)
            assert received.startswith(answer), received[:200]
    assert _slow(waits) <= ROUNDS // 2, f"{case}: another connection waited {[f'{w:.3f}' for w in waits]} s"
    assert all(process.poll() is None for process in cluster.processes.values())
