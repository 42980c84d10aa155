"""The RESP port (``okapikv.resp``) against real server processes (2 DCs x 2 partitions): redis-py
over RESP2 and RESP3, redis-cli and redis-benchmark unchanged, keys of both partitions through one
server's port, every refused command refused with its reason, and whatever breaks the protocol or a
bound answered with one error, without harm to the server, its other clients or any write."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
import redis
from integration_support import RunningCluster, get_value, keys_for_each_partition

from okapikv.core.partitioning import partition_of
from okapikv.wire import okapikv_pb2 as pb

pytestmark = pytest.mark.timeout(240)
HOST = "127.0.0.1"


def resp_port(cluster: RunningCluster, dc: int, partition: int) -> int:
    stats = json.loads(cluster.stub(dc, partition).Stats(pb.StatsRequest(), timeout=5).json)
    port: int = stats["driver"]["resp_port"]
    assert port, "the server serves no RESP port"
    return port


def driver_stats(cluster: RunningCluster, dc: int, partition: int) -> dict[str, int]:
    driver: dict[str, int] = json.loads(cluster.stub(dc, partition).Stats(pb.StatsRequest(), timeout=5).json)["driver"]
    return driver


@pytest.fixture
def client(cluster: RunningCluster, request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    protocol = getattr(request, "param", 2)
    connection = redis.Redis(host=HOST, port=resp_port(cluster, 0, 0), protocol=protocol, socket_timeout=30)
    try:
        yield connection
    finally:
        connection.close()


def _exchange(port: int, data: bytes, *, wait_s: float = 10.0) -> bytes:
    """Send raw bytes; everything received until the server closes (or ``wait_s`` of silence)."""
    received = b""
    with socket.create_connection((HOST, port), timeout=wait_s) as connection:
        connection.sendall(data)
        while True:
            try:
                chunk = connection.recv(65536)
            except TimeoutError:
                return received
            if not chunk:
                return received
            received += chunk


# ---------------------------------------------------------------- real clients


@pytest.mark.parametrize("client", [2, 3], indirect=True, ids=["resp2", "resp3"])
def test_redis_py_reads_and_writes_keys_of_every_partition(cluster: RunningCluster, client: redis.Redis) -> None:
    protocol = client.connection_pool.connection_kwargs["protocol"]
    prefix = f"py{protocol}"
    keys = [key.decode() for key in keys_for_each_partition(2, prefix)]
    assert {partition_of(key.encode(), 2) for key in keys} == {0, 1}
    for key in keys:
        assert client.set(key, "one") is True
        assert client.get(key) == b"one"
        assert client.getset(key, "two") == b"one"
        assert client.set(key, "three", get=True) == b"two"
    assert client.mget([*keys, f"{prefix}-absent"]) == [b"three", b"three", None]
    assert client.exists(*keys, keys[0], f"{prefix}-absent") == 3
    assert client.exists(keys[1]) == 1
    with client.pipeline(transaction=True) as block:
        block.get(keys[0]).mget(keys[1], f"{prefix}-absent").exists(*keys)
        assert block.execute() == [b"three", [b"three", None], 2]
    with client.pipeline(transaction=False) as pipeline:
        for index in range(50):
            pipeline.set(f"{prefix}-p{index:02d}", str(index))
        pipeline.get(f"{prefix}-p49")
        assert pipeline.execute()[-1] == b"49"
    assert sorted(client.scan_iter(match=f"{prefix}-p*", count=7)) == [f"{prefix}-p{i:02d}".encode() for i in range(50)]
    assert sorted(client.keys(f"{prefix}-p4?")) == [f"{prefix}-p4{i}".encode() for i in range(10)]
    assert client.execute_command("OKAPI.RANGE", f"{prefix}-p00", f"{prefix}-p02") == [
        f"{prefix}-p00".encode(), b"0", f"{prefix}-p01".encode(), b"1", f"{prefix}-p02".encode(), b"2"]
    assert client.execute_command("OKAPI.RANGE", f"{prefix}-p", f"{prefix}-q", "LIMIT", "1") == [
        f"{prefix}-p00".encode(), b"0"]
    assert client.delete(*keys, f"{prefix}-absent") == 2
    assert client.get(keys[1]) is None
    assert client.dbsize() >= 50
    # what every server of the DC sees, and what the gRPC clients see
    other = redis.Redis(host=HOST, port=resp_port(cluster, 0, 1), protocol=protocol)
    assert other.get(f"{prefix}-p07") == b"7"
    other.close()
    assert get_value(cluster, 0, f"{prefix}-p08".encode()) == b"8"


def test_counters_and_expiry_on_keys_of_every_partition(cluster: RunningCluster, client: redis.Redis) -> None:
    """INCR and the expiry commands on the connection's own partition and forwarded to the other."""
    keys = [key.decode() for key in keys_for_each_partition(2, "ttl-incr")]
    for key in keys:
        assert client.incr(key) == 1 and client.incrby(key, 9) == 10 and client.decr(key) == 9
        assert client.get(key) == b"9" and client.ttl(key) == -1
        assert client.expire(key, 100) is True and client.ttl(key) in (99, 100)
        assert client.incr(key) == 10 and client.ttl(key) in (99, 100)  # INCR keeps the expiry
        assert client.persist(key) is True and client.ttl(key) == -1 and client.get(key) == b"10"
        assert client.set(key, "v", ex=100) is True and client.ttl(key) in (99, 100)
        assert client.persist(key) is True and client.ttl(key) == -1
        assert client.expire(key, 100) is True and client.getex(key, persist=True) == b"v"
        assert client.set(key, "w", exat=int(time.time()) + 100) is True and 98 <= client.ttl(key) <= 100
        assert client.pexpireat(key, 1_000) is True and client.get(key) is None and client.ttl(key) == -2
        assert client.incr(key) == 1  # an expired key counts from 0


def test_a_pipeline_runs_in_order_with_each_command_after_the_one_before(cluster: RunningCluster) -> None:
    """One write holding commands on both partitions (the remote ones forwarded) and snapshot reads:
    replies come back in order, and each command sees what the ones before it did."""
    local, remote = (key.decode() for key in keys_for_each_partition(2, "order"))
    script = [f"SET {remote} 1", f"GET {remote}", f"SET {local} 2", f"MGET {local} {remote}", f"SET {remote} 3 GET",
              f"DEL {local}", f"EXISTS {local} {remote}", f"GETSET {remote} 4", f"GET {remote}"]
    data = ("\r\n".join(script) + "\r\n").encode()
    with socket.create_connection((HOST, resp_port(cluster, 1, 0)), timeout=10) as connection:
        connection.sendall(data)
        expected = (b"+OK\r\n$1\r\n1\r\n+OK\r\n*2\r\n$1\r\n2\r\n$1\r\n1\r\n$1\r\n1\r\n:1\r\n:1\r\n"
                    b"$1\r\n3\r\n$1\r\n4\r\n")
        received = b""
        while len(received) < len(expected):
            chunk = connection.recv(65536)
            assert chunk, received
            received += chunk
    assert received == expected


@pytest.mark.parametrize("client", [2, 3], indirect=True, ids=["resp2", "resp3"])
def test_connection_and_server_commands(cluster: RunningCluster, client: redis.Redis) -> None:
    assert client.ping() is True
    assert client.echo("hi") == b"hi"
    assert client.execute_command("SELECT", 0) in (b"OK", "OK", True)
    assert client.client_setname("app-1") is True
    assert client.client_getname() in ("app-1", b"app-1")
    assert isinstance(client.client_id(), int)
    info = client.info()
    assert info["redis_mode"] == "standalone" and info["okapi_dc"] == cluster.config.dcs[0]
    assert info["okapi_protocol"] == "okapi" and info["okapi_partitions"] == 2
    assert "okapi_stable_lag_ms" in client.info("replication")
    assert client.config_get("appendonly") == {"appendonly": "no"}
    assert client.config_get("databases") == {"databases": "1"}
    assert client.command_count() == len(client.command())
    assert "get" in client.command()
    hello = client.execute_command("HELLO", 3)
    hello = dict(zip(hello[::2], hello[1::2], strict=True)) if isinstance(hello, list) else hello
    assert hello[b"proto"] == 3 and hello[b"server"] == b"okapikv"


REFUSALS = [
    (("MSET", "a", "1", "b", "2"), "MSET is not supported: okapikv has no atomic multi-key writes"),
    (("INCRBYFLOAT", "counter", "1.5"), "INCRBYFLOAT is not supported: a float counter's sum depends"),
    (("APPEND", "a", "x"), "APPEND is not supported: okapikv has no read-modify-write but SWAP and counters"),
    (("SETNX", "a", "1"), "SETNX is not supported: okapikv has no conditional writes"),
    (("SET", "a", "1", "NX"), "SET NX is not supported: okapikv has no conditional writes"),
    (("SET", "a", "1", "KEEPTTL"), "SET KEEPTTL is not supported: a SET writes the value and its expiry together"),
    (("SET", "a", "1", "EX", "0"), "invalid expire time in 'set' command"),
    (("SET", "a", "1", "EX", "1", "PX", "5"), "syntax error"),
    (("EXPIRE", "a", "10", "NX"), "EXPIRE NX is not supported: okapikv has no conditional writes"),
    (("EXPIRETIME", "a"), "EXPIRETIME is not supported"),
    (("WATCH", "a"), "WATCH is not supported"),
    (("SELECT", "1"), "DB index is out of range"),
    (("FLUSHALL",), "FLUSHALL is not supported"),
    (("HSET", "h", "f", "v"), "unknown command 'HSET', with args beginning with: 'h' 'f' 'v'"),
    (("GET",), "wrong number of arguments for 'get' command"),
    (("GET", "a", "b"), "wrong number of arguments for 'get' command"),
    (("SET", "a", "1", "BOGUS"), "syntax error"),
    (("OKAPI.SESSION", "garbage!"), "invalid session token"),
]


@pytest.mark.parametrize(("command", "message"), REFUSALS, ids=[" ".join(c) for c, _ in REFUSALS])
def test_what_cannot_be_honoured_is_refused_and_changes_nothing(client: redis.Redis, command: tuple[str, ...],
                                                                message: str) -> None:
    client.set("refusal-probe", "before")
    with pytest.raises(redis.ResponseError) as raised:
        client.execute_command(*command)
    assert message in str(raised.value)
    assert client.get("refusal-probe") == b"before" and client.get("a") is None and client.ping()


def test_multi_with_a_write_fails_at_exec_and_writes_nothing(client: redis.Redis) -> None:
    with client.pipeline(transaction=True) as block:
        block.get("multi-write").set("multi-write", "1")
        with pytest.raises(redis.ResponseError, match="SET inside MULTI is not supported: a MULTI ... EXEC block is "
                                                      "one read-only transaction"):
            block.execute()
    connection = client.connection_pool.get_connection()
    try:  # one connection, command by command: the queueing error, then EXECABORT at EXEC
        for command, reply in ((("MULTI",), b"+OK"), (("GET", "multi-write"), b"+QUEUED"),
                               (("SET", "multi-write", "1"), b"-ERR SET inside MULTI"),
                               (("EXEC",), b"-EXECABORT Transaction discarded because of previous errors.")):
            connection.send_command(*command)
            assert _raw_line(connection).startswith(reply)
    finally:
        client.connection_pool.release(connection)
    assert client.get("multi-write") is None
    assert client.execute_command("MULTI") in (b"OK", "OK", True)
    with pytest.raises(redis.ResponseError, match="MULTI calls can not be nested"):
        client.execute_command("MULTI")
    assert client.execute_command("DISCARD") in (b"OK", "OK", True)
    with pytest.raises(redis.ResponseError, match="EXEC without MULTI"):
        client.execute_command("EXEC")


def test_a_multi_block_reads_at_most_one_transactions_keys(client: redis.Redis) -> None:
    with client.pipeline(transaction=True) as block:
        block.mget([f"many-{index}" for index in range(10_000)]).get("one-more")
        with pytest.raises(redis.ResponseError, match="a MULTI ... EXEC block may read at most 10000 keys"):
            block.execute()
    with client.pipeline(transaction=True) as block:
        block.mget([f"many-{index}" for index in range(10_000)])
        assert block.execute() == [[None] * 10_000]


def test_quit_answers_and_closes_and_nothing_after_it_runs(cluster: RunningCluster) -> None:
    received = _exchange(resp_port(cluster, 0, 0), b"SET quit-before 1\r\nQUIT\r\nSET quit-after 1\r\n")
    assert received == b"+OK\r\n+OK\r\n"
    assert get_value(cluster, 0, b"quit-before") == b"1"
    assert get_value(cluster, 0, b"quit-after") is None


def test_a_client_that_half_closes_after_its_commands_gets_every_reply(cluster: RunningCluster) -> None:
    port = resp_port(cluster, 0, 0)
    with socket.create_connection((HOST, port), timeout=10) as connection:
        # the MGET is a read-only transaction over both partitions: its reply comes after the EOF
        local, other = keys_for_each_partition(2, "eof")
        connection.sendall(b"SET eof-key 1\r\nMGET eof-key %s %s\r\n" % (local, other) + b"*2\r\n$3\r\nGET\r\n")
        connection.shutdown(socket.SHUT_WR)  # ... and a request cut short
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    assert received == b"+OK\r\n*3\r\n$1\r\n1\r\n$-1\r\n$-1\r\n"
    assert get_value(cluster, 0, b"eof-key") == b"1"


def _raw_line(connection: redis.connection.Connection) -> bytes:
    """One reply line as the server sent it (status or error), read past redis-py's parsing."""
    try:
        reply = connection.read_response()
    except redis.ResponseError as error:
        return b"-" + (b"EXECABORT " if isinstance(error, redis.exceptions.ExecAbortError) else b"ERR ") + str(
            error).encode()
    return b"+" + (reply if isinstance(reply, bytes) else str(reply).encode())


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli is not installed (Debian: redis-tools)")
def test_redis_cli(cluster: RunningCluster) -> None:
    port = str(resp_port(cluster, 0, 1))

    def cli(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run(["redis-cli", "-h", HOST, "-p", port, *args], input=stdin, capture_output=True,
                              text=True, timeout=30, check=True)
        return done.stdout.strip()

    assert cli("SET", "cli-key", "cli value") == "OK"
    assert cli("GET", "cli-key") == "cli value"
    assert cli("-3", "GET", "cli-missing") == "(nil)" or cli("-3", "GET", "cli-missing") == ""
    assert cli("--scan", "--pattern", "cli-*") == "cli-key"
    assert "okapi_dc:dc0" in cli("INFO", "replication")
    assert "SWAP" in cli("COMMAND", "DOCS", "GETSET")
    assert cli("INCR", "cli-key") == "ERR value is not an integer or out of range"
    assert cli("INCRBY", "cli-counter", "5") == "5" and cli("DECR", "cli-counter") == "4"
    # a script of commands on one connection, as redis-cli reads them from a pipe
    assert cli(stdin="SET cli-2 two\nGET cli-2\nMGET cli-key cli-2\n").splitlines() == [
        "OK", "two", "cli value", "two"]


@pytest.mark.skipif(shutil.which("redis-benchmark") is None, reason="redis-benchmark is not installed")
def test_redis_benchmark_runs_against_okapikv(cluster: RunningCluster) -> None:
    port = str(resp_port(cluster, 1, 0))
    done = subprocess.run(["redis-benchmark", "-h", HOST, "-p", port, "-t", "set,get,ping_inline,ping_mbulk",
                           "-n", "2000", "-c", "4", "-P", "8", "-q"], capture_output=True, text=True, timeout=120,
                          check=True)
    lines = [line.strip() for line in done.stdout.replace("\r", "\n").splitlines() if "requests per second" in line]
    assert [line.split(":")[0] for line in lines] == ["PING_INLINE", "PING_MBULK", "SET", "GET"], done.stdout
    value = redis.Redis(host=HOST, port=int(port)).get("key:__rand_int__")  # redis-benchmark's key, 3-byte value
    assert value is not None and len(value) == 3


# ---------------------------------------------------------------- bad input


def _serving(cluster: RunningCluster, written: dict[str, bytes]) -> None:
    """The server answers other clients and every acknowledged write reads back."""
    check = redis.Redis(host=HOST, port=resp_port(cluster, 0, 0), socket_timeout=10)
    assert check.ping()
    assert check.mget(list(written)) == list(written.values())
    check.close()


@pytest.fixture
def written(cluster: RunningCluster) -> dict[str, bytes]:
    values = {f"bad-input-{index}": f"v{index}".encode() for index in range(20)}
    writer = redis.Redis(host=HOST, port=resp_port(cluster, 0, 0))
    for key, value in values.items():
        writer.set(key, value)
    writer.close()
    return values


GARBAGE = {
    "not RESP": (b"*x\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
    "an element that is not a bulk string": (b"*2\r\n:1\r\n", b"-ERR Protocol error: expected '$', got ':'\r\n"),
    "a bulk string over the value limit, before its bytes": (
        b"*3\r\n$3\r\nSET\r\n$9\r\nbad-big-1\r\n$1048577\r\n",
        b"-ERR Protocol error: invalid bulk length (1048577 bytes; the value limit is 1048576)\r\n"),
    "more arguments than any command takes": (b"*20000\r\n", b"-ERR Protocol error: invalid multibulk length (20000 "
                                                             b"arguments; a command takes at most 10001)\r\n"),
    "an inline line without end": (b"GET " + b"x" * 70_000, b"-ERR Protocol error: too big inline request\r\n"),
}


@pytest.mark.parametrize("case", list(GARBAGE))
def test_garbage_gets_one_error_and_a_closed_connection(cluster: RunningCluster, written: dict[str, bytes],
                                                        case: str) -> None:
    payload, reply = GARBAGE[case]
    before = driver_stats(cluster, 0, 0)["resp_refused"]
    # a valid command first: it runs, then the error, then the server closes
    assert _exchange(resp_port(cluster, 0, 0), b"PING\r\n" + payload) == b"+PONG\r\n" + reply
    assert driver_stats(cluster, 0, 0)["resp_refused"] == before + 1
    _serving(cluster, written)
    assert get_value(cluster, 0, b"bad-big-1") is None


def test_errors_that_are_not_garbage_keep_the_connection(cluster: RunningCluster, written: dict[str, bytes]) -> None:
    port = resp_port(cluster, 0, 0)
    big_key = b"k" * 2000  # over the 1 KiB key limit, within the bulk limit: the core refuses it
    data = (b"NOSUCH a\r\n" + b"*1\r\n$3\r\nGET\r\n" + b"*3\r\n$3\r\nSET\r\n$2000\r\n" + big_key + b"\r\n$1\r\nv\r\n"
            + b"PING\r\n")
    received = b""
    with socket.create_connection((HOST, port), timeout=10) as connection:
        connection.sendall(data)
        while received.count(b"\r\n") < 4:
            chunk = connection.recv(65536)
            assert chunk, f"closed after {received!r}"
            received += chunk
    lines = received.split(b"\r\n")
    assert lines[0] == b"-ERR unknown command 'NOSUCH', with args beginning with: 'a' "
    assert lines[1] == b"-ERR wrong number of arguments for 'get' command"
    assert lines[2].startswith(b"-ERR key of 2000 bytes exceeds the limit")
    assert lines[3] == b"+PONG"
    _serving(cluster, written)


def test_a_value_over_the_limit_sent_in_full_is_refused_and_not_written(cluster: RunningCluster,
                                                                        written: dict[str, bytes]) -> None:
    value = b"v" * ((1 << 20) + 1)
    data = b"*3\r\n$3\r\nSET\r\n$9\r\nbad-big-2\r\n$%d\r\n%s\r\n" % (len(value), value)
    received = _exchange(resp_port(cluster, 0, 0), data)
    assert received == b"-ERR Protocol error: invalid bulk length (1048577 bytes; the value limit is 1048576)\r\n"
    assert get_value(cluster, 0, b"bad-big-2") is None
    _serving(cluster, written)


def test_a_client_that_never_reads_is_pushed_back(cluster: RunningCluster, written: dict[str, bytes]) -> None:
    """Pipelined GETs of a 512 KiB value, never read: without flow control the server would buffer
    ~5 GiB of replies; it stops reading instead, and its memory stays flat."""
    port = resp_port(cluster, 0, 0)
    big = redis.Redis(host=HOST, port=port)
    big.set("big-value", b"b" * (512 << 10))
    big.close()
    pid = cluster.processes[(cluster.config.dcs[0], 0)].pid
    rss_before = _rss_bytes(pid)
    request = b"*2\r\n$3\r\nGET\r\n$9\r\nbig-value\r\n" * 10_000
    with socket.create_connection((HOST, port), timeout=10) as connection:
        connection.setblocking(False)
        sent, deadline = 0, time.monotonic() + 5
        while sent < len(request) and time.monotonic() < deadline:
            try:
                sent += connection.send(request[sent:sent + 65536])
            except BlockingIOError:
                time.sleep(0.05)
        time.sleep(1.0)
        growth = _rss_bytes(pid) - rss_before
        assert growth < 300 << 20, f"the server grew by {growth >> 20} MiB for a client that does not read"
        _serving(cluster, written)


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")
