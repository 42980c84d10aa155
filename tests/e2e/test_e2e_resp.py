"""The RESP port end to end: redis-py connections to a real `okapi up --wan-ms 2` cluster (3 DCs x 2
partitions, durable), whose RESP ports `okapi up` prints next to each server.

- Causality across DCs through RESP connections: a connection in oregon writes x, then y (keys of
  different partitions, so they replicate over different links); a connection in ireland that sees
  y sees x, by GET, by MGET and by MULTI/EXEC, and a connection that only ever reads snapshots
  (MGET) never sees y without x.
- A session exported as a token (``OKAPI.SESSION``) and adopted by a connection in another DC reads
  its own writes there at once; a token whose dependencies that DC cannot have is refused after the
  bounded wait, and garbage is refused.
- The course fuzzer's mix through redis-py connections of one DC (spread over both servers, so
  half the single-key commands are forwarded between partitions) passes the linearizability
  checker.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from okapi_processes import Cluster

from okapikv.check.history import decode_bytes
from okapikv.check.report import check_history
from okapikv.core.messages import Session
from okapikv.core.partitioning import partition_of
from okapikv.fuzz.plan import Plan
from okapikv.fuzz.recorder import Recorder
from okapikv.resp.tokens import encode_token

pytestmark = pytest.mark.timeout(240)

DCS = ("oregon", "virginia", "ireland")
PARTITIONS = 2
POLL_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    home: Path = tmp_path_factory.mktemp("okapi-home")
    running = Cluster(home, DCS, partitions=PARTITIONS, extra=["--wan-ms", "2"])
    try:
        running.start()
        yield running
    finally:
        running.stop()


def resp_ports(cluster: Cluster) -> dict[tuple[str, int], int]:
    """(dc, partition) -> RESP port, as `okapi up` printed them."""
    ports = {}
    for line in cluster.output:
        found = re.match(r"okapi: (\S+)\s+partition (\d+)\s+\S+\s+resp 127\.0\.0\.1:(\d+)", line)
        if found:
            ports[(found[1], int(found[2]))] = int(found[3])
    return ports


def connect(cluster: Cluster, dc: str, partition: int = 0, protocol: int = 2) -> redis.Redis:
    return redis.Redis(port=resp_ports(cluster)[(dc, partition)], protocol=protocol, socket_timeout=60)


def test_okapi_up_prints_a_resp_port_for_every_server(cluster: Cluster) -> None:
    ports = resp_ports(cluster)
    assert sorted(ports) == [(dc, p) for dc in sorted(DCS) for p in range(PARTITIONS)]
    assert len(set(ports.values())) == len(ports)
    for (dc, partition), _ in ports.items():
        assert connect(cluster, dc, partition).info("replication")["okapi_dc"] == dc


def keys_on_two_partitions(prefix: str) -> tuple[str, str]:
    x = f"{prefix}x"
    y = next(f"{prefix}y{i}" for i in range(100) if partition_of(f"{prefix}y{i}".encode(), PARTITIONS)
             != partition_of(x.encode(), PARTITIONS))
    return x, y


def test_causality_across_dcs_through_resp_connections(cluster: Cluster) -> None:
    writer = connect(cluster, "oregon", 0)
    reader = connect(cluster, "ireland", 1)
    for round_number in range(8):
        prefix = f"rc{round_number}"
        x, y = keys_on_two_partitions(prefix)
        vx, vy = f"x{round_number}".encode(), f"y{round_number}".encode()
        snapshots = connect(cluster, "ireland", round_number % PARTITIONS)  # a fresh session: snapshots only
        assert reader.get(y) is None
        assert writer.set(x, vx) and writer.set(y, vy)
        deadline = time.monotonic() + POLL_TIMEOUT_S
        while True:
            seen_y, seen_x = snapshots.mget(y, x)
            assert not (seen_y == vy and seen_x != vx), f"round {round_number}: an MGET snapshot broke causality"
            if reader.get(y) == vy:
                break
            assert time.monotonic() < deadline, f"round {round_number}: {y} never reached ireland"
        assert reader.get(x) == vx, f"round {round_number}: GET broke causality"
        assert reader.mget(y, x) == [vy, vx], f"round {round_number}: MGET broke causality"
        with reader.pipeline(transaction=True) as block:
            block.get(y).get(x)
            assert block.execute() == [vy, vx], f"round {round_number}: MULTI/EXEC broke causality"
        snapshots.close()


def test_a_session_token_carries_read_your_writes_to_another_dc(cluster: Cluster) -> None:
    oregon = connect(cluster, "oregon", 0)
    virginia = connect(cluster, "virginia", 1, protocol=3)
    for round_number in range(5):
        key, other = keys_on_two_partitions(f"tok{round_number}")
        value = f"written in oregon {round_number}".encode()
        assert oregon.set(key, value) and oregon.set(other, value)
        token = oregon.execute_command("OKAPI.SESSION")
        assert re.fullmatch(rb"[A-Za-z0-9_-]+", token)
        assert virginia.execute_command("OKAPI.SESSION", token) in (b"OK", "OK", True)
        # at once, no polling: the adopted session makes virginia's reads include what it depends on
        assert virginia.get(key) == value and virginia.mget(key, other) == [value, value]
    # and back: a session of virginia continues in oregon
    virginia.set("tok-back", "from virginia")
    assert oregon.execute_command("OKAPI.SESSION", virginia.execute_command("OKAPI.SESSION")) in (b"OK", True)
    assert oregon.get("tok-back") == b"from virginia"


def test_a_session_that_cannot_be_adopted_is_refused(cluster: Cluster) -> None:
    virginia = connect(cluster, "virginia")
    never = (1 << 63) + 12345  # a dependency on oregon from the far future: virginia can never have it
    token = encode_token(Session((0, 0, 0), never), 0, "okapi-local")
    started = time.monotonic()
    with pytest.raises(redis.ResponseError, match="session not adopted: DC virginia still lacks updates of oregon"):
        virginia.execute_command("OKAPI.SESSION", token)
    assert 4.0 < time.monotonic() - started < 30.0  # the bounded wait (RespLimits.adopt_wait_s, 5 s)
    with pytest.raises(redis.ResponseError, match="session token of another cluster"):
        virginia.execute_command("OKAPI.SESSION", encode_token(Session((0, 0, 0), 1), 0, "another-cluster"))
    assert virginia.ping()


def test_the_course_fuzzer_mix_through_redis_py_is_linearizable(cluster: Cluster) -> None:
    plan = Plan(clients=3, operations_per_client=150, conflict=True, seed=22, key_prefix="rsp",
                client_dcs=("oregon",) * 3)
    recorder = Recorder({"source": "fuzz", "dcs": len(DCS), "dc_names": list(DCS), "protocol": "okapi",
                         "client": "redis-py"})
    failures: list[BaseException] = []

    def drive(number: int) -> None:
        client = connect(cluster, "oregon", number % PARTITIONS)
        try:
            for command in plan.commands(number):
                op = recorder.invoke(f"c{number}", 0, command, False)
                try:
                    result = _execute(client, command.f, command)
                except redis.RedisError as error:
                    recorder.complete(op, "info", error=str(error))
                else:
                    recorder.complete(op, "ok", **result)
        except BaseException as error:
            failures.append(error)
        finally:
            client.close()

    threads = [threading.Thread(target=drive, args=(number,)) for number in range(plan.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert not failures, failures
    history = recorder.history.history()
    assert sum(op.status == "ok" for op in history.operations) == 450
    report = check_history(history)
    assert report.linearizable_keys == 5, report.summary_lines()
    assert report.ok, report.summary_lines()


def _execute(client: redis.Redis, f: str, command: Any) -> dict[str, Any]:
    """One fuzzer operation as Redis commands: PUT is ``SET k v GET`` (a PUT whose reply says
    whether a value existed: plain SET answers OK), SWAP ``GETSET``, SCAN ``OKAPI.RANGE``."""
    if f == "get":
        value = client.get(command.key)
        return {"read": None if value is None else decode_bytes(value)}
    if f == "put":
        return {"found": client.set(command.key, command.value, get=True) is not None}
    if f == "swap":
        old = client.getset(command.key, command.value)
        return {"old": None if old is None else decode_bytes(old)}
    if f == "delete":
        return {"found": client.delete(command.key) == 1}
    flat = client.execute_command("OKAPI.RANGE", command.start, command.end)
    return {"items": tuple((decode_bytes(k), decode_bytes(v)) for k, v in zip(flat[::2], flat[1::2], strict=True))}
