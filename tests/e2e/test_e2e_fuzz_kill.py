"""`okapi fuzz --kill-partitions` end to end: five clients on shared keys while
partition servers are killed with SIGKILL and restarted midway must complete every operation, and
the history must check clean.

Each run is the `okapi fuzz` command (in this process, as in ``test_e2e_fuzz``) starting its own
durable local cluster, killing the named partitions after a third of the operations and restarting
them a second later on the same ports and data directories. Besides the verdict, the tests check
that the kill really happened (every named server exited on SIGKILL and came back as a new process)
and that operations really waited across it, so a run that silently killed nothing cannot pass.

The last test turns durability off (the same kill against an in-memory cluster, whose restarted
servers come back empty): the checkers must then catch the lost acknowledged writes, which shows the
clean verdicts above mean something.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from okapikv.check.history import History, load_history
from okapikv.cli import main
from okapikv.fuzz.cluster import local_cluster
from okapikv.fuzz.errors import FuzzError
from okapikv.fuzz.kill import PartitionKiller, parse_partitions
from okapikv.fuzz.plan import Plan
from okapikv.fuzz.run import run_plan

pytestmark = pytest.mark.timeout(180)

CLIENTS = 5
OPS = 120


def run_fuzz(capsys: pytest.CaptureFixture[str], history_path: Path, *flags: str) -> tuple[int, str]:
    status = main(["fuzz", "--clients", str(CLIENTS), "--conflict", "--ops", str(OPS),
                   "--history", str(history_path), *flags])
    captured = capsys.readouterr()
    output = captured.out + captured.err
    print(output)  # shown with -s, and on failure
    return status, output


def check_the_kill(history: History, output: str, partitions: list[int], dcs: list[str]) -> dict[str, Any]:
    """The kill happened as asked, every operation completed, and some waited across the kill."""
    kill: dict[str, Any] = history.meta["kill"]
    assert kill["partitions"] == partitions
    # every named server in every DC was killed by SIGKILL and came back as a new process
    servers = kill["servers"]
    assert sorted(server["server"] for server in servers) == sorted(f"{dc}/{p}" for dc in dcs for p in partitions)
    for server in servers:
        assert server["exit_status"] == -9, server
        assert server["new_pid"] is not None and server["new_pid"] != server["old_pid"], server
    assert kill["killed_us"] <= kill["dead_us"] < kill["restarted_us"] < kill["back_us"]
    runs = [op for op in history.operations if not op.final]
    assert len(runs) == CLIENTS * OPS
    assert OPS * CLIENTS // 3 <= kill["after_operations"] < CLIENTS * OPS
    # Every operation completed: ok, except writes whose call was in flight on a killed server when
    # it died (between the first SIGKILL and the reaping of the last killed process), which answer
    # "outcome unknown" (info) instead of being retried (at most once).
    for op in runs:
        assert op.status in ("ok", "info"), op.describe()
        if op.status == "info":
            assert op.is_write and "outcome unknown" in (op.error or ""), op.describe()
            assert op.invoke_us < kill["dead_us"] and (op.complete_us or 0) > kill["killed_us"], (op.describe(), kill)
    # Operations waited across the kill: issued before the restart, answered after it.
    waited = [op for op in runs if op.invoke_us < kill["restarted_us"] < (op.complete_us or 0) and op.ok]
    assert waited, "no operation waited for the killed servers"
    match = re.search(r"operations that waited across the kill \([^)]*\): (\d+) ", output)
    assert match is not None and int(match.group(1)) >= 1, output
    assert "killed partition(s) " in output and "restarted them at " in output, output
    return kill


@pytest.mark.slow
def test_kill_partition_1_of_3_in_every_dc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history_path = tmp_path / "kill-1.jsonl"
    status, output = run_fuzz(capsys, history_path, "--partitions", "3", "--kill-partitions", "1", "--seed", "7")
    assert status == 0, output
    assert output.rstrip().endswith("PASS"), output
    assert "no anomalies" in output and "linearizability: 5 keys searched" in output, output
    check_the_kill(load_history(history_path), output, [1], ["oregon", "virginia", "ireland"])


@pytest.mark.slow
def test_kill_partitions_1_and_2_of_5(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # One DC keeps five partitions within the time a CI test may take on two cores (3 DCs x 5
    # partitions is fifteen servers); the kill in every DC is the test above.
    history_path = tmp_path / "kill-1-2.jsonl"
    status, output = run_fuzz(capsys, history_path, "--partitions", "5", "--dcs", "oregon",
                              "--kill-partitions", "1,2", "--seed", "8")
    assert status == 0, output
    assert output.rstrip().endswith("PASS"), output
    assert "no anomalies" in output and "linearizability: 5 keys searched" in output, output
    check_the_kill(load_history(history_path), output, [1, 2], ["oregon"])


@pytest.mark.slow
def test_a_kill_that_loses_data_is_caught(tmp_path: Path) -> None:
    """The same kill against an in-memory cluster: the restarted server comes back empty, so the
    writes it had acknowledged are lost, and the checkers must say so. Deterministic by design: the
    kill comes once every operation completed (killed midway, a lost value may be overwritten before
    any read sees it), and each client has keys of its own (shared keys, the last write of a key on
    the killed partition may be a DELETE, whose loss no read can see; own keys, each key's last
    write is fixed by the seed, and client 0's final reads of its own keys see the loss)."""
    plan = Plan(clients=CLIENTS, operations_per_client=OPS, conflict=False, seed=7, key_prefix="abc",
                client_dcs=("oregon",) * CLIENTS)
    with local_cluster(["oregon"], 3, "okapi", tmp_path, durable=False) as cluster:
        killer = PartitionKiller(cluster, (1,), CLIENTS * OPS)
        outcome = run_plan(plan, cluster.target, tmp_path / "lossy.jsonl", killer=killer)
    assert outcome.kill is not None and outcome.kill.back_us is not None
    assert not outcome.problems, outcome.problems
    assert outcome.final_rounds >= 1
    assert not outcome.ok, outcome.report.summary_lines()
    names = {anomaly.name for anomaly in outcome.report.anomalies}
    assert {"NotLinearizable", "ReadYourWrites"} <= names, outcome.report.summary_lines()


def test_kill_partitions_is_checked() -> None:
    assert parse_partitions(None, 3) == ()
    assert parse_partitions("1", 3) == (1,)
    assert parse_partitions("2,1,2", 5) == (2, 1)
    for wrong in ("3", "-1", "a", ",", "1,5"):
        with pytest.raises(FuzzError):
            parse_partitions(wrong, 3)


def test_kill_partitions_needs_the_local_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fuzz", "--connect", "127.0.0.1:1", "--kill-partitions", "1"]) == 2
    assert "--kill-partitions needs the local cluster" in capsys.readouterr().err
