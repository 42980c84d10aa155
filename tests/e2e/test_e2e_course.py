"""The course service's tests 1-5, end to end: real `okapi client` processes against a real
`okapi up --wan-ms 2 --partitions 2` cluster (three DCs), outputs compared byte for byte.

Clients run without flags, so they talk to the first DC of the cluster `okapi up` started (found
through ``$OKAPI_HOME``), exactly as the course's scripts run them. Each test uses its own key
prefix, so tests share one cluster without seeing each other's keys.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from okapi_processes import ClientProcess, Cluster

from okapikv.client import AsyncClient, Client
from okapikv.client.commands import execute, parse
from okapikv.core.partitioning import partition_of

pytestmark = pytest.mark.timeout(120)

DCS = ("oregon", "virginia", "ireland")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    home: Path = tmp_path_factory.mktemp("okapi-home")
    running = Cluster(home, DCS, partitions=2, extra=["--wan-ms", "2"])
    try:
        running.start()
        yield running
    finally:
        running.stop()


def client(cluster: Cluster, *flags: str) -> ClientProcess:
    return ClientProcess(cluster.env, *flags)


def run_concurrently(scripts: dict[ClientProcess, Sequence[str]]) -> dict[ClientProcess, list[str]]:
    """Drive several clients at once, each from its own thread, one command at a time."""
    outputs: dict[ClientProcess, list[str]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(len(scripts))

    def drive(process: ClientProcess, script: Sequence[str]) -> None:
        try:
            start.wait(timeout=30)
            outputs[process] = process.run(script)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=drive, args=item) for item in scripts.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    if errors:
        raise errors[0]
    return outputs


# ------------------------------------------------------------------ test 1: every RPC, one client


def test_1_every_rpc_with_one_client(cluster: Cluster) -> None:
    process = client(cluster)
    try:
        script = ["PUT t1a 1", "PUT t1a 2", "GET t1a", "SWAP t1a 3", "GET t1a", "PUT t1b 4", "PUT t1c 5",
                  "SCAN t1a t1b", "SCAN t1 t1z", "TX t1c t1a t1x", "DELETE t1b", "GET t1b", "SCAN t1 t1z"]
        assert process.run(script) == [
            "PUT t1a not_found",
            "PUT t1a found",
            "GET t1a 2",
            "SWAP t1a 2",
            "GET t1a 3",
            "PUT t1b not_found",
            "PUT t1c not_found",
            "SCAN t1a t1b BEGIN", "  t1a 3", "  t1b 4", "SCAN END",
            "SCAN t1 t1z BEGIN", "  t1a 3", "  t1b 4", "  t1c 5", "SCAN END",
            "TX t1c t1a t1x BEGIN", "  t1c 5", "  t1a 3", "  t1x null", "TX END",
            "DELETE t1b found",
            "GET t1b null",
            "SCAN t1 t1z BEGIN", "  t1a 3", "  t1c 5", "SCAN END",
        ]
        assert process.stop() == 0
    finally:
        process.close()


# ------------------------------------------------------------------ test 2: keys that do not exist


def test_2_every_rpc_on_missing_keys(cluster: Cluster) -> None:
    process = client(cluster)
    try:
        script = ["GET t2a", "DELETE t2b", "SCAN t2 t2z", "TX t2a t2b", "SWAP t2c 1", "PUT t2d 2", "GET t2a"]
        assert process.run(script) == [
            "GET t2a null",
            "DELETE t2b not_found",
            "SCAN t2 t2z BEGIN", "SCAN END",
            "TX t2a t2b BEGIN", "  t2a null", "  t2b null", "TX END",
            "SWAP t2c null",
            "PUT t2d not_found",
            "GET t2a null",
        ]
        assert process.stop() == 0
    finally:
        process.close()


# ------------------------------------------------------------------ test 3: two clients, disjoint keys


def test_3_two_concurrent_clients_on_disjoint_keys(cluster: Cluster) -> None:
    first, second = client(cluster), client(cluster)
    try:
        outputs = run_concurrently({
            first: ["PUT t3a1 x1", "PUT t3a2 x2", "PUT t3a3 x3", "GET t3a2", "SCAN t3a t3az"],
            second: ["PUT t3b1 y1", "PUT t3b2 y2", "PUT t3b3 y3", "GET t3b3", "SCAN t3b t3bz"],
        })
        assert outputs[first] == ["PUT t3a1 not_found", "PUT t3a2 not_found", "PUT t3a3 not_found", "GET t3a2 x2",
                                  "SCAN t3a t3az BEGIN", "  t3a1 x1", "  t3a2 x2", "  t3a3 x3", "SCAN END"]
        assert outputs[second] == ["PUT t3b1 not_found", "PUT t3b2 not_found", "PUT t3b3 not_found", "GET t3b3 y3",
                                   "SCAN t3b t3bz BEGIN", "  t3b1 y1", "  t3b2 y2", "  t3b3 y3", "SCAN END"]
        assert first.stop() == 0 and second.stop() == 0
    finally:
        first.close()
        second.close()


# ------------------------------------------------------------------ test 4: overwrite, both read


def test_4_second_client_overwrites_and_both_read_it(cluster: Cluster) -> None:
    first, second = client(cluster), client(cluster)
    try:
        assert first.send("PUT t4k one") == ["PUT t4k not_found"]
        assert second.send("PUT t4k two") == ["PUT t4k found"]
        # One DC, one partition server per key: single-key operations are linearizable.
        assert first.send("GET t4k") == ["GET t4k two"]
        assert second.send("GET t4k") == ["GET t4k two"]
        assert first.stop() == 0 and second.stop() == 0
    finally:
        first.close()
        second.close()


# ------------------------------------------------------------------ test 5: one shared key


class _Model:
    """A sequential dict with the client's result types, to replay an interleaving."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def put(self, key: str, value: str) -> bool:
        found = key in self.data
        self.data[key] = value.encode()
        return found

    def swap(self, key: str, value: str) -> bytes | None:
        old = self.data.get(key)
        self.data[key] = value.encode()
        return old

    def get(self, key: str) -> bytes | None:
        return self.data.get(key)

    def delete(self, key: str) -> bool:
        return self.data.pop(key, None) is not None

    def scan(self, start: str, end: str) -> list[tuple[bytes, bytes]]:
        return sorted((k.encode(), v) for k, v in self.data.items() if start <= k <= end)

    def read_tx(self, keys: list[str]) -> list[bytes | None]:
        return [self.data.get(key) for key in keys]


def _outputs_of(script: Sequence[str], output: list[str]) -> list[list[str]]:
    """Split a client's output into one group of lines per command."""
    groups: list[list[str]] = []
    lines = iter(output)
    for _ in script:
        group = [next(lines)]
        if group[0].endswith(" BEGIN"):
            end = group[0].split()[0] + " END"
            while group[-1] != end:
                group.append(next(lines))
        groups.append(group)
    return groups


def interleavings(lengths: Sequence[int]) -> Iterator[list[int]]:
    """Every order of running scripts of these lengths one operation at a time, each script in its
    own order, as the list of which script goes next (C(10, 5) = 252 orders for two of five)."""
    if not any(lengths):
        yield []
        return
    for owner, length in enumerate(lengths):
        if length:
            rest = list(lengths)
            rest[owner] -= 1
            for tail in interleavings(rest):
                yield [owner, *tail]


def serial_order_exists(scripts: Sequence[Sequence[str]], observed: list[list[list[str]]]) -> bool:
    """Whether some interleaving of the scripts (each in its own order) run one operation at a
    time on a plain dict yields exactly the observed outputs."""
    for owners in interleavings([len(script) for script in scripts]):
        model = _Model()
        positions = [0] * len(scripts)
        for owner in owners:
            position = positions[owner]
            command = parse(scripts[owner][position])
            assert command is not None
            if execute(model, command) != observed[owner][position]:
                break
            positions[owner] += 1
        else:
            return True
    return False


def test_5_two_clients_on_one_key(cluster: Cluster) -> None:
    first, second = client(cluster), client(cluster)
    try:
        for round_number in range(3):  # fresh key each round, same two client processes
            key = f"t5r{round_number}"
            scripts = [
                [f"SWAP {key} a1", f"SCAN {key} {key}", f"DELETE {key}", f"SWAP {key} a2", f"GET {key}"],
                [f"SWAP {key} b1", f"SCAN {key} {key}", f"SWAP {key} b2", f"DELETE {key}", f"GET {key}"],
            ]
            outputs = run_concurrently({first: scripts[0], second: scripts[1]})
            observed = [_outputs_of(scripts[0], outputs[first]), _outputs_of(scripts[1], outputs[second])]
            assert serial_order_exists(scripts, observed), f"round {round_number}: no serial order explains {observed}"
        assert first.stop() == 0 and second.stop() == 0
    finally:
        first.close()
        second.close()


def test_serial_order_checker_rejects_impossible_outputs() -> None:
    scripts: list[Sequence[str]] = [["SWAP k a"], ["SWAP k b"]]
    assert serial_order_exists(scripts, [[["SWAP k null"]], [["SWAP k a"]]])
    assert not serial_order_exists(scripts, [[["SWAP k null"]], [["SWAP k null"]]])
    assert len(list(interleavings([5, 5]))) == 252


# ------------------------------------------------------------------ the client process itself


def test_malformed_lines_and_end_of_input(cluster: Cluster) -> None:
    process = client(cluster)
    try:
        assert process.send("put t6 1")[0].startswith("ERROR ")
        assert process.send("PUT t6")[0].startswith("ERROR ")
        assert process.send("PUT t6 a\x01b")[0].startswith("ERROR invalid token")
        assert process.send("PUT t6 1") == ["PUT t6 not_found"]
        assert process.process.stdin is not None
        process.process.stdin.close()  # end of input without STOP: a clean exit
        assert process.wait() == 0
    finally:
        process.close()


def test_ycsb_driver_keys_and_values(cluster: Cluster) -> None:
    """The course's YCSB driver, unchanged: keys like ``usertable_user<19 digits>`` and values of any
    printable ASCII and DEL (0x7f), in every command; a token outside 0x21-0x7f is one ERROR line."""
    key = "usertable_user6284781860667377211"
    other = "usertable_user6284781860667377212"
    value = "a!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\x7f" + "".join(chr(c) for c in range(0x21, 0x80))
    newer = "~`,.\x7f\x7f" + "z" * 100
    process = client(cluster)
    try:
        assert process.send(f"PUT {key} {value}") == [f"PUT {key} not_found"]
        assert process.send(f"GET {key}") == [f"GET {key} {value}"]
        assert process.send(f"SWAP {key} {newer}") == [f"SWAP {key} {value}"]
        assert process.send(f"PUT {other} {value}") == [f"PUT {other} not_found"]
        assert process.send("SCAN usertable_user6284781860667377211 usertable_user6284781860667377219") == [
            "SCAN usertable_user6284781860667377211 usertable_user6284781860667377219 BEGIN",
            f"  {key} {newer}", f"  {other} {value}", "SCAN END"]
        assert process.send(f"TX {other} {key} usertable_none") == [
            f"TX {other} {key} usertable_none BEGIN", f"  {other} {value}", f"  {key} {newer}",
            "  usertable_none null", "TX END"]
        assert process.send(f"DELETE {key}") == [f"DELETE {key} found"]
        assert process.send(f"GET {key}") == [f"GET {key} null"]
        refused = process.send(f"PUT {key} caf\u00e9")
        assert len(refused) == 1 and refused[0].startswith("ERROR invalid token")
        assert process.send(f"GET {key}") == [f"GET {key} null"]  # the refused line changed nothing
        assert process.stop() == 0
    finally:
        process.close()


def test_dc_flag_and_connect(cluster: Cluster) -> None:
    ireland = client(cluster, "--dc", "ireland")
    direct = client(cluster, "--connect", cluster.address("virginia", 1))
    try:
        assert ireland.send("PUT t7i 1") == ["PUT t7i not_found"]
        assert ireland.send("GET t7i") == ["GET t7i 1"]
        assert direct.send("PUT t7v 2") == ["PUT t7v not_found"]
        assert direct.send("TX t7v") == ["TX t7v BEGIN", "  t7v 2", "TX END"]
        assert ireland.stop() == 0 and direct.stop() == 0
    finally:
        ireland.close()
        direct.close()


# ------------------------------------------------------------------ the library against the real server


def test_library_against_the_real_cluster(cluster: Cluster) -> None:
    keys = [f"t8k{i}" for i in range(300)]
    assert {partition_of(k.encode(), 2) for k in keys} == {0, 1}

    async def scenario() -> None:
        async with AsyncClient(cluster.address("oregon"), timeout_s=20) as root:
            assert root.topology.dc_name == "oregon"
            assert await asyncio.gather(*(root.fork().put(k, k) for k in keys)) == [False] * len(keys)
            assert await root.read_tx(keys) == [k.encode() for k in keys]
            scanned = await root.scan("t8k", "t8kz")
            assert scanned == sorted((k.encode(), k.encode()) for k in keys)
            assert await root.scan("t8k", "t8kz", limit=5) == scanned[:5]
            batches, operations = root.pipeline_counters()
            assert operations == len(keys) + 3 and batches < operations / 4

    asyncio.run(scenario())
    with Client(cluster.address("oregon", 1), timeout_s=20) as blocking:
        assert blocking.get("t8k7") == b"t8k7"
        assert blocking.swap("t8k7", "new") == b"t8k7"
        assert blocking.delete("t8k7") is True
        assert blocking.get("t8k7") is None
        assert blocking.session.dt > 0
