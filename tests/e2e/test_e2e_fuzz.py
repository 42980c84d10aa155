"""`okapi fuzz` end to end: the course fuzzer's four runs against one real cluster,
and proof that the fuzzer catches a broken store.

The four runs of the course (1 client; 3 clients on disjoint keys; 3 clients on shared keys) plus
ours (3 clients on shared keys spread over 3 DCs) share one `okapi up --wan-ms 2` cluster (3 DCs x
2 partitions) through ``--connect``: each run draws a fresh key prefix, so runs never read each
other's keys, and starting one cluster instead of four keeps the whole file near a minute on two
cores. Each run is the `okapi fuzz` command (``okapikv.cli.main``, in this process to spare a
Python start-up per run) driving real `okapi client` processes, at 150 operations per client
instead of the course's thousands.

A fuzzer that always passes proves nothing, so the same driver is also pointed at a fake
`okapi client` (a few lines of Python speaking the protocol over a dict) with a planted bug, and
must fail.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from okapi_processes import Cluster

from okapikv.check.history import load_history
from okapikv.cli import main
from okapikv.cluster.ports import free_port_block
from okapikv.fuzz.cluster import Target
from okapikv.fuzz.plan import ALPHANUMERIC, KEY_LENGTH, KEYS_PER_CLIENT, VALUE_LENGTH, Command, Plan
from okapikv.fuzz.replies import parse_reply
from okapikv.fuzz.run import run_plan

pytestmark = pytest.mark.timeout(180)

DCS = ("oregon", "virginia", "ireland")
OPS = 150


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    home: Path = tmp_path_factory.mktemp("okapi-home")
    running = Cluster(home, DCS, partitions=2, extra=["--wan-ms", "2"])
    try:
        running.start()
        yield running
    finally:
        running.stop()


RUNS = {
    "one-client": ["--clients", "1", "--seed", "11"],
    "three-disjoint": ["--clients", "3", "--seed", "12"],
    "three-shared": ["--clients", "3", "--conflict", "--seed", "13"],
    "three-shared-three-dcs": ["--clients", "3", "--conflict", "--dcs", ",".join(DCS), "--seed", "14"],
}


@pytest.mark.parametrize("name", list(RUNS))
def test_fuzz_against_a_real_cluster(cluster: Cluster, tmp_path: Path, name: str,
                                     capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    flags = RUNS[name]
    history_path = tmp_path / f"{name}.jsonl"
    monkeypatch.setenv("OKAPI_HOME", cluster.env["OKAPI_HOME"])
    status = main(["fuzz", "--connect", cluster.address(DCS[0]), "--ops", str(OPS),
                   "--history", str(history_path), *flags])
    captured = capsys.readouterr()
    output = captured.out + captured.err
    print(output)  # shown with -s, and on failure
    assert status == 0, output
    assert output.rstrip().endswith("PASS"), output

    history = load_history(history_path)
    clients = int(flags[flags.index("--clients") + 1])
    runs = [op for op in history.operations if not op.final]
    assert len(runs) == clients * OPS
    # An operation may time out on a badly overloaded machine (it is then recorded as unknown and
    # the checkers allow for it); on a healthy one every operation succeeds.
    assert sum(op.status == "ok" for op in history.operations) >= 0.95 * len(history.operations), output
    assert Counter(op.process for op in runs) == {f"c{number}": OPS for number in range(clients)}
    # the course's mix, roughly: GET 30%, PUT 20%, SWAP 20%, SCAN 20%, DELETE 10%
    share = Counter(op.f for op in runs)
    assert set(share) == {"get", "put", "swap", "scan", "delete"}
    assert share["get"] > share["delete"]
    # `okapi client --timestamps`: every successful write carries the store's timestamp, so the causal
    # checker ranks them and checks reads against their causal past
    writes = [op for op in history.operations if op.is_write and op.ok]
    assert writes and all(op.timestamp is not None and op.timestamp > 0 for op in writes)
    assert " 0 reads against their causal past" not in output, output
    keys = {op.key for op in runs if op.key is not None}
    assert len(keys) == (KEYS_PER_CLIENT if "--conflict" in flags else KEYS_PER_CLIENT * clients)
    if "--dcs" in flags:
        assert {op.dc for op in runs} == {0, 1, 2}
        # convergence: every DC read every key at the end, and they agreed
        finals = [op for op in history.operations if op.final]
        assert {(op.dc, op.key) for op in finals} >= {(dc, key) for dc in range(3) for key in keys}
        assert "every DC agreed" in output, output
    else:
        assert {op.dc for op in runs} == {0}
        assert "linearizability: " in output, output


def _run_local(capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    status = main(["fuzz", "--clients", "1", "--ops", "30", "--partitions", "1", "--dcs", "oregon", *flags])
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert status == 0, output
    assert output.rstrip().endswith("PASS"), output
    return output


def _ports_of(output: str) -> list[int]:
    line = next(line for line in output.splitlines() if line.startswith("okapi fuzz: local cluster on "))
    return [int(address.rpartition(":")[2]) for address in line.split()[-3::2]]


def test_fuzz_local_cluster_stays_in_the_port_range_and_keeps_its_history(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`OKAPI_PORT_RANGE` confines the ports the fuzzer draws, and without
    --history the history goes to $OKAPI_HOME/fuzz/seed<S>.jsonl, where `okapi check` reads it."""
    low = 27_000 + 200 * (os.getpid() % 20)  # apart from tests/unit/test_ports.py's ranges
    monkeypatch.setenv("OKAPI_PORT_RANGE", f"{low}-{low + 199}")
    monkeypatch.setenv("OKAPI_HOME", str(tmp_path))
    output = _run_local(capsys, "--seed", "21")
    assert all(low <= port <= low + 199 for port in _ports_of(output)), output
    history = tmp_path / "fuzz" / "seed21.jsonl"
    assert f"history: {history}" in output
    assert main(["check", str(history)]) == 0


def test_fuzz_base_port_places_the_local_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = free_port_block(3)  # oregon, virginia, ireland x 1 partition
    output = _run_local(capsys, "--dcs", ",".join(DCS), "--base-port", str(base),
                        "--history", str(tmp_path / "h.jsonl"))
    assert _ports_of(output) == [base, base + 2], output


# ---------------------------------------------------------------------------------------- the plan


def test_plan_follows_the_course_fuzzer() -> None:
    plan = Plan(clients=3, operations_per_client=2000, conflict=False, seed=7, key_prefix="abc",
                client_dcs=("x",) * 3)
    key_sets = plan.key_sets()
    assert all(len(keys) == KEYS_PER_CLIENT for keys in key_sets)
    assert len({key for keys in key_sets for key in keys}) == 3 * KEYS_PER_CLIENT  # disjoint
    commands = [command for client in range(3) for command in plan.commands(client)]
    assert commands == [command for client in range(3) for command in plan.commands(client)]  # seeded
    share = Counter(command.f for command in commands)
    for f, percent in (("put", 20), ("swap", 20), ("get", 30), ("scan", 20), ("delete", 10)):
        assert abs(share[f] / len(commands) - percent / 100) < 0.03, share
    values = [command.value for command in commands if command.value is not None]
    assert len(values) == len(set(values))  # differentiated history
    for command in commands:
        for token in command.line.split()[1:]:
            assert set(token) <= set(ALPHANUMERIC)
        if command.key is not None:
            assert len(command.key) == KEY_LENGTH and command.key.startswith("abc")
        if command.value is not None:
            assert len(command.value) == VALUE_LENGTH
        if command.f == "scan":
            assert command.start is not None and command.end is not None and command.start <= command.end
    shared = Plan(3, 10, True, 7, "abc", ("x",) * 3).key_sets()
    assert shared[0] == shared[1] == shared[2]


def test_replies_are_parsed_strictly() -> None:
    put = Command("put", "PUT k v", key="k", value="v")
    assert parse_reply(put, ["PUT k found"]) == {"found": True}
    assert parse_reply(put, ["PUT k not_found"]) == {"found": False}
    swap = Command("swap", "SWAP k v", key="k", value="v")
    assert parse_reply(swap, ["SWAP k null"]) == {"old": None}
    assert parse_reply(Command("get", "GET k", key="k"), ["GET k v1"]) == {"read": "v1"}
    scan = Command("scan", "SCAN a b", start="a", end="b")
    assert parse_reply(scan, ["SCAN a b BEGIN", "  a 1", "  b 2", "SCAN END"]) == {"items": (("a", "1"), ("b", "2"))}
    # `okapi client --timestamps`: the write's timestamp goes into the history
    assert parse_reply(put, ["PUT k found ts=123"]) == {"found": True, "timestamp": 123}
    assert parse_reply(swap, ["SWAP k old ts=5"]) == {"old": "old", "timestamp": 5}
    delete = Command("delete", "DELETE k", key="k")
    assert parse_reply(delete, ["DELETE k not_found ts=9"]) == {"found": False, "timestamp": 9}
    for wrong in (["PUT j found"], ["PUT k maybe"], ["GET k v"], ["PUT k found ts=x"], ["PUT k found 12"],
                  ["PUT k found ts=1 ts=2"]):
        with pytest.raises(ValueError):
            parse_reply(put, wrong)
    with pytest.raises(ValueError):
        parse_reply(Command("get", "GET k", key="k"), ["GET k v ts=1"])


# ---------------------------------------------------------------------------------------- a broken store

# A fake `okapi client`: the protocol over one store shared by every fake client (a JSON file under
# an exclusive lock, so the store is linearizable), with the bug named by argv[1] planted in it.
FAKE_CLIENT = textwrap.dedent('''
    import fcntl, json, sys
    bug, path = sys.argv[1], sys.argv[2]
    gets = 0
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        op, args = words[0], words[1:]
        if op == "STOP":
            print("STOP", flush=True)
            break
        with open(path, "a+") as file:
            fcntl.flock(file, fcntl.LOCK_EX)
            file.seek(0)
            store = json.loads(file.read() or "{}")
            key = args[0]
            if op == "PUT":
                print(f"PUT {key} {'found' if key in store else 'not_found'}")
                store[key] = args[1]
            elif op == "SWAP":
                print(f"SWAP {key} {store.get(key, 'null')}")
                store[key] = args[1]
            elif op == "GET":
                gets += 1
                value = store.get(key, "null")
                if bug == "thin-air" and gets == 20:
                    value = "neverwritten"
                print(f"GET {key} {value}")
            elif op == "DELETE":
                print(f"DELETE {key} {'found' if key in store else 'not_found'}")
                if bug != "lost-delete":
                    store.pop(key, None)
            elif op == "SCAN":
                print(f"SCAN {key} {args[1]} BEGIN")
                for k in sorted(k for k in store if key <= k <= args[1]):
                    print(f"  {k} {store[k]}")
                print("SCAN END")
            file.seek(0)
            file.truncate()
            file.write(json.dumps(store))
        sys.stdout.flush()
''')


@pytest.mark.parametrize(("bug", "dcs", "anomaly"), [
    ("none", ("x", "y"), None),
    ("lost-delete", ("x",), "NotLinearizable"),
    ("thin-air", ("x", "y"), "ThinAirRead"),
])
def test_fuzz_catches_a_broken_store(tmp_path: Path, bug: str, dcs: tuple[str, ...], anomaly: str | None) -> None:
    fake = tmp_path / "fake_client.py"
    fake.write_text(FAKE_CLIENT)
    store = tmp_path / "store.json"
    plan = Plan(clients=3, operations_per_client=OPS, conflict=True, seed=3, key_prefix="zzz",
                client_dcs=tuple(dcs[number % len(dcs)] for number in range(3)))
    target = Target("a fake store", "fake", dcs, {dc: "nowhere:1" for dc in dcs})
    outcome = run_plan(plan, target, tmp_path / "history.jsonl",
                       command=lambda address, dc: [sys.executable, str(fake), bug, str(store)])
    assert not outcome.problems
    if anomaly is None:
        assert outcome.ok, outcome.report.summary_lines()
        assert outcome.converged is True
    else:
        assert not outcome.ok
        assert anomaly in {a.name for a in outcome.report.anomalies}, outcome.report.summary_lines()


def test_fuzz_with_counters_and_expiring_keys(cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``--counters-ttls``: INCRs of shared counters and expiring PUTs from every DC, checked apart
    (``okapikv.fuzz.side``); the history holds the course's operations only."""
    history_path = tmp_path / "side.jsonl"
    monkeypatch.setenv("OKAPI_HOME", cluster.env["OKAPI_HOME"])
    status = main(["fuzz", "--connect", cluster.address(DCS[0]), "--ops", str(OPS), "--history", str(history_path),
                   "--clients", "3", "--conflict", "--dcs", ",".join(DCS), "--seed", "15", "--counters-ttls"])
    captured = capsys.readouterr()
    output = captured.out + captured.err
    print(output)
    assert status == 0 and output.rstrip().endswith("PASS"), output
    line = next(line for line in output.splitlines() if line.startswith("counters and expiry"))
    assert int(line.split(": ")[1].split()[0]) > 10 and " 0 key(s) PUT expiring" not in line, output
    history = load_history(history_path)
    assert {op.f for op in history.operations} <= {"get", "put", "swap", "scan", "delete"}
    assert not any(op.key is not None and "~" in op.key for op in history.operations)
