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
