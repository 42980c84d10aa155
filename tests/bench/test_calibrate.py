"""``okapi calibrate``: the core's handlers timed into a cost profile, and its validation against real
runs (here, hand-written ``okapi bench`` results: the real runs are a measurement, not a test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.calibrate import fit_line
from benchmarks.validate import load_points
from okapikv.cli import main
from okapikv.sim.cost import load_profile, packaged_profile


def test_a_least_squares_line_is_recovered_and_never_negative() -> None:
    assert fit_line([(1, 3_000), (2, 5_000), (3, 7_000)]) == pytest.approx((1.0, 2.0))
    assert fit_line([(2, 4_000), (2, 6_000)]) == pytest.approx((5.0, 0.0))
    assert fit_line([(1, 9_000), (3, 1_000)])[1] == 0.0


def test_calibrate_writes_a_profile_the_simulator_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "profile.json"
    assert main(["calibrate", "--out", str(path), "--duration-s", "0.04", "--name", "here"]) == 0
    assert "ReadTxRequest:" in capsys.readouterr().out
    profile = load_profile(path)
    assert profile.name == "here" and profile.source.startswith("okapi calibrate (")
    for cost in (profile.get_us, profile.put_us, profile.rotx_us, profile.tx_slice_us, profile.slice_reply_us,
                 profile.replicate_batch_us, profile.heartbeat_us, profile.timer_us, profile.send_us):
        assert 0 < cost < 10_000
    assert packaged_profile("this-vm").source.startswith("okapi calibrate (")


def bench_run(system: str, clients: int, throughput: float, latency_us: float) -> dict[str, object]:
    operations = int(throughput * 3)
    return {"system": system, "workload": "rotx", "clients": clients, "dcs": 3, "partitions": 2,
            "rotx_partitions": 2, "write_ratio": None, "operations": operations, "throughput_ops_s": throughput,
            "latency_us": {"all": {"mean_us": latency_us}},
            "cpu": {"client_s": operations * 200e-6, "server_cpu_us_per_op": 1_000.0}}


def test_validation_fits_one_run_and_reports_the_error_of_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"series": {"custom": {"runs": [
        bench_run("okapi", 6, 300.0, 20_000.0), bench_run("cure", 6, 280.0, 21_000.0)]}}}))
    points = load_points([str(path)])
    assert [point.label for point in points] == ["okapi P2 p=2 c=6", "cure P2 p=2 c=6"]
    markdown, fitted_path = tmp_path / "table.md", tmp_path / "fitted.json"
    assert main(["calibrate", "--validate", str(path), "--fit", "okapi P2 p=2 c=6", "--sim-duration-s", "0.2",
                 "--markdown", str(markdown), "--fitted-out", str(fitted_path)]) == 0
    assert "Mean absolute relative error over the held-out runs" in capsys.readouterr().out
    assert "| cure P2 p=2 c=6 | held out |" in markdown.read_text()
    fitted = load_profile(fitted_path)
    assert fitted.client_us > 0 and "fitted to the real run okapi P2 p=2 c=6" in fitted.source
    fit_row, held_row = json.loads(fitted_path.with_suffix(".rows.json").read_text())
    assert fit_row["fit"] and fit_row["predicted_ops_s"] == pytest.approx(300.0, rel=0.1)
    assert not held_row["fit"] and held_row["predicted_ops_s"] > 0
    assert main(["calibrate", "--validate", str(path), "--fit", "eventual p=9 c=1"]) == 2
