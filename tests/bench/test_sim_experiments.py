"""``okapi sim --experiment``: simulated experiments written through the bench's results, plots and
report (small plans: the paper's scale is a measurement, docs/simulated.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from okapikv.cli import main


def test_an_experiment_writes_results_plots_and_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fig3"
    assert main(["sim", "--experiment", "fig3", "--dcs", "2", "--partitions", "1", "--duration-s", "0.1",
                 "--warmup-s", "0.03", "--protocols", "okapi,gentlerain", "--sweep-steps", "4", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "okapi sim --experiment fig3:" in printed
    results = json.loads((out / "results.json").read_text())
    series = results["series"]["sim-scalability"]
    assert series["kind"] == "partitions"
    assert [(run["system"], run["partitions"]) for run in series["runs"]] == [("okapi", 1), ("gentlerain", 1)]
    gentlerain = series["runs"][1]
    assert gentlerain["waits"]["rotx"]["waits"] > 0 and gentlerain["traffic"]["updates_replicated"] > 0
    assert "checked by the causal" in " ".join(results["notes"]) and "okapi at 2 clients" in " ".join(results["notes"])
    assert "Scalability" in (out / "report.md").read_text() and list(out.glob("*.png"))
    # a fig3 sweep keeps only its peak; the notes count (and time) every step it simulated
    simulated = sum(1 for line in printed.splitlines() if line.startswith("  "))
    kept = len(series["runs"]) + 2  # the peaks and each system's checked run
    assert simulated > kept and f"{simulated} runs simulated, {kept} kept" in " ".join(results["notes"])


def test_the_visibility_experiment_has_a_cdf_per_pair(tmp_path: Path) -> None:
    out = tmp_path / "vis"
    assert main(["sim", "--experiment", "visibility", "--dcs", "2", "--partitions", "1", "--duration-s", "0.15",
                 "--warmup-s", "0.05", "--protocols", "okapi", "--out", str(out)]) == 0
    pairs = json.loads((out / "results.json").read_text())["visibility"]["okapi"]
    assert {(pair["source"], pair["destination"]) for pair in pairs} == {("dc0", "dc1"), ("dc1", "dc0")}
    assert all(pair["count"] == len(pair["samples_ms"]) > 0 for pair in pairs)
    assert main(["sim", "--experiment", "visibility", "--cost", "no-such", "--out", str(out)]) == 2


def test_okapi_piggyback_runs_as_its_own_system_and_is_checked(tmp_path: Path) -> None:
    out = tmp_path / "traffic"
    assert main(["sim", "--experiment", "traffic", "--dcs", "2", "--partitions", "2", "--duration-s", "0.1",
                 "--warmup-s", "0.03", "--protocols", "okapi,okapi-piggyback", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    runs = results["series"]["sim-traffic"]["runs"]
    assert [run["system"] for run in runs] == ["okapi", "okapi-piggyback"]
    notes = " ".join(results["notes"])
    assert "okapi at 32 clients" in notes and "okapi-piggyback at 32 clients" in notes and "(0 anomalies;" in notes
    assert "okapi-piggyback" in (out / "report.md").read_text()
    # the piggybacked USV changes what stabilization sends: the two systems' traffic differs
    assert runs[0]["traffic"] != runs[1]["traffic"]


def test_an_experiment_runs_at_five_dcs(tmp_path: Path) -> None:
    out = tmp_path / "vis5"
    assert main(["sim", "--experiment", "visibility", "--dcs", "5", "--partitions", "1", "--duration-s", "0.15",
                 "--warmup-s", "0.05", "--protocols", "okapi", "--out", str(out)]) == 0
    pairs = json.loads((out / "results.json").read_text())["visibility"]["okapi"]
    assert len({(pair["source"], pair["destination"]) for pair in pairs}) == 5 * 4


def test_a_system_the_simulator_lacks_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--experiment", "traffic", "--protocols", "okapi-bounded", "--out", str(tmp_path)]) == 2
    assert "okapi-bounded" in capsys.readouterr().err


def test_rotx_levels_must_be_partition_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("1,x", "0,2"):
        assert main(["sim", "--experiment", "fig4", "--rotx-levels", bad, "--out", str(tmp_path)]) == 2
        assert "--rotx-levels" in capsys.readouterr().err


def test_sweep_steps_bound_a_sweep_and_are_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fig4"
    assert main(["sim", "--experiment", "fig4", "--dcs", "2", "--partitions", "1", "--duration-s", "0.1",
                 "--warmup-s", "0.03", "--protocols", "gentlerain", "--sweep-steps", "2", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["sweep_steps"] == 2
    assert results["config"]["sweep_start"] == {"gentlerain": 16}  # clients per partition of each DC
    assert [run["clients"] for run in results["series"]["sim-fig4"]["runs"]] == [32, 64]
    assert main(["sim", "--experiment", "fig4", "--sweep-steps", "0", "--out", str(out)]) == 2
    assert "--sweep-steps" in capsys.readouterr().err


SMALL = ["sim", "--experiment", "fig4", "--dcs", "2", "--partitions", "2", "--duration-s", "0.1", "--warmup-s", "0.03",
         "--protocols", "okapi", "--sweep-steps", "2"]


def _results(out: Path) -> dict[str, object]:
    """results.json without what says how and when it ran (the command, wall and CPU times)."""
    data = json.loads((out / "results.json").read_text())
    for key in ("started_at", "elapsed_s", "timings_s"):
        data.pop(key)
    data["config"].pop("command")
    data["notes"] = [note for note in data["notes"] if not note.startswith("CPU time")]
    return data


def test_an_interrupted_experiment_resumes_from_its_finished_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from okapikv.sim import experiments

    whole = tmp_path / "whole"
    assert main([*SMALL, "--out", str(whole)]) == 0
    runs = sum(1 for line in capsys.readouterr().out.splitlines() if line.startswith("  "))
    cut = tmp_path / "cut"
    simulate = experiments._one
    calls = 0

    def stopping(*args: object, **kwargs: object) -> dict[str, object]:
        nonlocal calls
        calls += 1
        if calls > 3:
            raise KeyboardInterrupt  # the experiment is stopped during its fourth run
        return simulate(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(experiments, "_one", stopping)
    with pytest.raises(KeyboardInterrupt):
        main([*SMALL, "--out", str(cut)])
    monkeypatch.setattr(experiments, "_one", simulate)
    journal = cut / "runs.jsonl"
    assert len(journal.read_text().splitlines()) == 1 + 3  # the header and the finished runs
    with journal.open("a") as handle:
        handle.write('{"key": "torn')  # a run being written when the process stopped
    capsys.readouterr()
    assert main([*SMALL, "--out", str(cut)]) == 0
    printed = capsys.readouterr().out
    assert f"{runs} runs (3 from {cut}/runs.jsonl)" in printed
    assert _results(cut) == _results(whole)
    # a rerun of a finished experiment simulates nothing and writes the same results
    assert main([*SMALL, "--out", str(cut)]) == 0
    assert f"{runs} runs ({runs} from" in capsys.readouterr().out
    assert _results(cut) == _results(whole)


def test_another_plan_into_a_folder_with_runs_is_refused_unless_fresh(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main([*SMALL, "--out", str(out)]) == 0
    before = (out / "runs.jsonl").read_bytes()
    capsys.readouterr()
    assert main([*SMALL, "--sweep-steps", "1", "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1 and "plan.sweep_steps 2 there, 1 here" in error
    assert (out / "runs.jsonl").read_bytes() == before  # nothing changed
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert main([*SMALL, "--out", str(other)]) == 2
    assert "no runs.jsonl" in capsys.readouterr().err
    assert main([*SMALL, "--sweep-steps", "1", "--fresh", "--out", str(out)]) == 0
    assert json.loads((out / "results.json").read_text())["config"]["sweep_steps"] == 1


def test_jobs_give_the_runs_of_one_process_in_its_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    assert main([*SMALL, "--out", str(one)]) == 0
    lines = [line.split(" (")[0] for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    assert main([*SMALL, "--jobs", "2", "--out", str(two)]) == 0
    assert [line.split(" (")[0] for line in capsys.readouterr().out.splitlines() if line.startswith("  ")] == lines
    assert _results(two) == _results(one)
    # the workers journal their runs: a rerun takes every one from the journal
    assert main([*SMALL, "--out", str(two)]) == 0
    assert f"{len(lines)} runs ({len(lines)} from" in capsys.readouterr().out
    assert main([*SMALL, "--jobs", "0", "--out", str(tmp_path / "zero")]) == 2


def test_an_experiment_runs_under_the_thread_blocking_model(tmp_path: Path) -> None:
    out = tmp_path / "threads"
    assert main(["sim", "--experiment", "traffic", "--dcs", "2", "--partitions", "1", "--duration-s", "0.1",
                 "--warmup-s", "0.03", "--protocols", "gentlerain", "--cost", "this-vm", "--blocking", "thread",
                 "--threads", "3", "--out", str(out)]) == 0
    profile = json.loads((out / "results.json").read_text())["config"]["cost_profile"]
    assert (profile["name"], profile["blocking"], profile["threads"]) == ("this-vm", "thread", 3)
    assert profile["wake_us"] > 0 and profile["poll_ms"] > 0
    assert main(["sim", "--experiment", "traffic", "--blocking", "thread", "--threads", "0", "--out", str(out)]) == 2
