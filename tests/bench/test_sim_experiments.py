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
                 "--warmup-s", "0.03", "--protocols", "okapi,gentlerain", "--out", str(out)]) == 0
    assert "okapi sim --experiment fig3:" in capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    series = results["series"]["sim-scalability"]
    assert series["kind"] == "partitions"
    assert [(run["system"], run["partitions"]) for run in series["runs"]] == [("okapi", 1), ("gentlerain", 1)]
    gentlerain = series["runs"][1]
    assert gentlerain["waits"]["rotx"]["waits"] > 0 and gentlerain["traffic"]["updates_replicated"] > 0
    assert "checked by the causal" in " ".join(results["notes"]) and "okapi at 2 clients" in " ".join(results["notes"])
    assert "Scalability" in (out / "report.md").read_text() and list(out.glob("*.png"))


def test_the_visibility_experiment_has_a_cdf_per_pair(tmp_path: Path) -> None:
    out = tmp_path / "vis"
    assert main(["sim", "--experiment", "visibility", "--dcs", "2", "--partitions", "1", "--duration-s", "0.15",
                 "--warmup-s", "0.05", "--protocols", "okapi", "--out", str(out)]) == 0
    pairs = json.loads((out / "results.json").read_text())["visibility"]["okapi"]
    assert {(pair["source"], pair["destination"]) for pair in pairs} == {("dc0", "dc1"), ("dc1", "dc0")}
    assert all(pair["count"] == len(pair["samples_ms"]) > 0 for pair in pairs)
    assert main(["sim", "--experiment", "visibility", "--cost", "no-such", "--out", str(out)]) == 2
