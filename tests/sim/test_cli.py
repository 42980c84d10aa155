"""``okapi sim`` and ``okapi check`` end to end (small runs)."""

from __future__ import annotations

from pathlib import Path

import broken_protocols  # noqa: F401  (registers okapi-eager)
import pytest

from okapikv.check.history import load_history
from okapikv.cli import main
from okapikv.sim.cli import parse_seeds

SMALL = ["--partitions", "2", "--clients", "6", "--duration-s", "0.3"]


def test_one_run_prints_a_summary_and_writes_a_checkable_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.jsonl"
    assert main(["sim", *SMALL, "--clock-skew-ms", "5", "--protocol", "cure", "--history", str(path)]) == 0
    out = capsys.readouterr().out
    for expected in ("operations:", "waits:", "tx_clock", "remote visibility latency", "no anomalies"):
        assert expected in out
    history = load_history(path)
    assert history.meta["protocol"] == "cure" and history.meta["source"] == "sim"
    assert main(["check", str(path)]) == 0


def test_a_failing_sweep_exits_1_and_prints_the_reproduction(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sim", *SMALL, "--seeds", "1..4", "--faults", "--protocol", "okapi-eager", "--duration-s", "0.5"])
    out = capsys.readouterr().out
    assert code == 1
    assert "reproduce: okapi sim --seed" in out and "--protocol okapi-eager --faults" in out
    assert "4 seeds in" in out


def test_clock_jumps_and_the_liveness_phase_have_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", *SMALL, "--seed", "3", "--faults", "--clock-jumps", "--liveness-s", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "clock jumps, 0.2 s after the heal checked for liveness" in out and "liveness" in out
    assert "no anomalies" in out


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--protocol", "nope"]) == 2
    assert main(["sim", "--seeds", "5..2"]) == 2
    assert main(["sim", "--clock-skew-ms", "600"]) == 2  # beyond the maximum clock offset
    assert main(["sim", "--liveness-s", "-1"]) == 2
    assert "okapi sim:" in capsys.readouterr().err


def test_parse_seeds() -> None:
    assert parse_seeds("3..5") == [3, 4, 5]
    assert parse_seeds("7") == [7]


def test_a_sweep_and_a_single_run_count_the_same_operations(capsys: pytest.CaptureFixture[str]) -> None:
    """The sweep's line and the single run's summary say what they count: workload operations, plus
    the convergence reads made after the heal, whose sum the checkers checked."""
    import re

    assert main(["sim", *SMALL, "--seed", "3"]) == 0
    single = capsys.readouterr().out
    assert main(["sim", *SMALL, "--seeds", "3..4"]) == 0
    sweep = capsys.readouterr().out
    found = re.search(r"seed 3: (\d+) workload ops \+ (\d+) convergence reads checked", sweep)
    assert found is not None, sweep
    issued, final = int(found[1]), int(found[2])
    assert f"workload operations: {issued} issued" in single
    assert f"with the {final} convergence reads after the heal, {issued + final} completed" in single
    assert f"checked {issued + final} operations" in single


def test_every_run_prints_latency_and_throughput_and_the_paper_workload_alternates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.jsonl"
    assert main(["sim", *SMALL, "--workload", "paper", "--rotx-partitions", "2", "--history", str(path)]) == 0
    out = capsys.readouterr().out
    assert "latency ms mean / p99: put " in out and "; rotx " in out and "ops/s over 0.3 s" in out
    history = load_history(path)
    for process in {op.process for op in history.operations if not op.final}:
        kinds = [op.f for op in history.operations if op.process == process]
        assert kinds == ["rotx", "put"] * (len(kinds) // 2) + ["rotx"] * (len(kinds) % 2)
        assert all(len(op.keys or ()) == 2 for op in history.operations if op.process == process and op.f == "rotx")
    assert main(["sim", *SMALL, "--workload", "paper", "--write-ratio", "0.9", "--history", str(path)]) == 0
    operations = [op for op in load_history(path).operations if not op.final]
    puts = sum(op.f == "put" for op in operations)
    assert {op.f for op in operations} == {"put", "rotx"} and 0.8 < puts / len(operations) < 0.97


def test_bad_workload_and_cost_flags_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", *SMALL, "--write-ratio", "0.5"]) == 2
    assert main(["sim", *SMALL, "--workload", "write-ratio"]) == 2
    assert main(["sim", *SMALL, "--cores", "2"]) == 2
    assert main(["sim", *SMALL, "--cost", "no-such-profile"]) == 2
    assert "no cost profile" in capsys.readouterr().err
