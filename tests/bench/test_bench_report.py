"""The report writer on synthetic results: every file is produced, well formed, and consistent."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.suites.registry import write_outputs
from okapikv.bench.engine.report import flatten_run, render_markdown

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _latency(mean_us: float) -> dict[str, float]:
    return {"count": 100, "mean_us": mean_us, "p50_us": mean_us, "p99_us": 2 * mean_us, "p999_us": 3 * mean_us,
            "max_us": 4 * mean_us}


def _run(system: str, workload: str, clients: int, throughput: float, **extra: Any) -> dict[str, Any]:
    kinds = extra.pop("kinds", ("read", "update"))
    run: dict[str, Any] = {
        "system": system, "workload": workload, "clients": clients, "processes": 1, "dcs": 3, "partitions": 4,
        "clock_skew_ms": 10.0, "rotx_partitions": None, "write_ratio": None, "records": 1000, "duration_s": 1.0,
        "warmup_s": 0.2, "operations": int(throughput), "throughput_ops_s": throughput, "errors": {},
        "last_error": "", "latency_us": {"all": _latency(1000.0), **{kind: _latency(900.0) for kind in kinds}},
        "cpu": {"client_s": 0.5, "client_cores": 0.5, "server_s": 0.4, "server_cores": 0.4,
                "server_cpu_us_per_op": 40.0},
    }
    run.update(extra)
    return run


def _traffic(metadata: float) -> dict[str, Any]:
    return {"updates_replicated": 500, "metadata_bytes_per_update": metadata, "payload_bytes_per_update": 16.0,
            "replication_bytes_per_s": 14_000.0, "stabilization_bytes_per_s": 9_000.0,
            "heartbeat_bytes_per_s": 100.0, "stabilization_messages_per_s": 600.0}


def _waits(probability: float) -> dict[str, Any]:
    wait = {"operations": 100, "waits": int(probability * 100), "probability": probability, "mean_us": 5000.0,
            "total_us": 5000.0 * probability * 100, "reasons": {}}
    return {"write": wait, "rotx": wait}


def synthetic_results() -> dict[str, Any]:
    systems = ("okapi", "cure", "gentlerain")
    series: dict[str, Any] = {
        "course-single": {"name": "course-single", "kind": "single", "title": "YCSB A-F, one client",
                          "runs": [_run(system, f"ycsb-{w}", 1, 1500.0) for system in ("okapi", "redis")
                                   for w in "abcdef"]},
        "course-scaling-a": {"name": "course-scaling-a", "kind": "clients", "title": "YCSB A: client scaling",
                             "runs": [_run(system, "ycsb-a", c, 1000.0 * c ** 0.5) for system in ("okapi", "redis")
                                      for c in (1, 10, 40)]},
        "paper-rotx-partitions": {
            "name": "paper-rotx-partitions", "kind": "rotx_partitions", "title": "RO-TX over p partitions",
            "runs": [_run(system, "rotx", clients, 800.0 / p + clients, rotx_partitions=p, kinds=("rotx", "put"),
                          waits=_waits(0.1 * p), traffic=_traffic(28.0 if system == "cure" else 12.0))
                     for system in systems for p in (1, 2, 4) for clients in (6, 24)]},
        "paper-write-ratio": {
            "name": "paper-write-ratio", "kind": "write_ratio", "title": "Write ratio",
            "runs": [_run(system, "rotx", 12, 700.0, rotx_partitions=2, write_ratio=w, kinds=("rotx", "put"),
                          waits=_waits(w / 2), traffic=_traffic(12.0)) for system in systems for w in (0.1, 0.5)]},
        "paper-scalability": {
            "name": "paper-scalability", "kind": "partitions", "title": "Scalability",
            "runs": [_run(system, "rotx", 12, 300.0 * n, partitions=n, rotx_partitions=min(2, n),
                          kinds=("rotx", "put")) for system in systems for n in (1, 2, 4)]},
        "paper-skew": {
            "name": "paper-skew", "kind": "clock_skew_ms", "title": "Clock-skew sweep",
            "runs": [_run(system, "rotx", 32, 500.0, rotx_partitions=4, clock_skew_ms=skew, kinds=("rotx", "put"),
                          clock_skew_model="uniform", max_dc_skew_ms=0.8 * skew,
                          waits={**_waits(0.0 if system == "okapi" else 0.5),
                                 "rotx_tx": _waits(0.4)["rotx"]}) for system in systems for skew in (0.0, 10.0)]},
    }
    visibility = {system: [{"source": a, "destination": b, "count": 3, "timeouts": 0, "mean_ms": 70.0,
                            "p50_ms": 70.0, "p90_ms": 80.0, "p99_ms": 90.0, "max_ms": 90.0,
                            "samples_ms": [60.0, 70.0, 90.0]}
                           for a, b in (("oregon", "virginia"), ("virginia", "oregon"))] for system in systems}
    return {"okapikv_version": "0", "started_at": "now", "elapsed_s": 1.0,
            "config": {"suite": "paper", "quick": True, "command": "okapi bench --suite paper --quick"},
            "machine": {"cpu_model": "test cpu", "cores": 2, "python": "3.11"},
            "series": series, "visibility": visibility, "notes": ["Redis reference skipped: test"],
            "timings_s": {"total_s": 1.0}}


EXPECTED_PLOTS = {
    "single_client.png", "throughput_vs_clients.png", "latency_vs_clients.png", "latency_vs_throughput.png",
    "rotx_sweep.png", "waits_vs_rotx_partitions.png", "waits_vs_clock_skew.png", "rotx_latency_vs_throughput.png",
    "write_ratio.png",
    "scalability.png", "visibility_cdf.png", "visibility_by_destination.png", "metadata.png",
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], dict[str, list[str]]]:
    """Plots are the slow part: write the synthetic outputs once for every test of this module."""
    out = tmp_path_factory.mktemp("report")
    results = synthetic_results()
    return out, results, write_outputs(results, out)


def test_every_output_is_written(written: tuple[Path, dict[str, Any], dict[str, list[str]]]) -> None:
    tmp_path, results, files = written
    assert set(files["png"]) == EXPECTED_PLOTS
    for name in files["png"]:
        data = (tmp_path / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["series"].keys() == results["series"].keys()
    assert set(saved["files"]["png"]) == EXPECTED_PLOTS
    for name in results["series"]:
        with (tmp_path / f"{name}.csv").open() as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) == len(results["series"][name]["runs"])
        assert {"system", "throughput_ops_s", "all_mean_us", "all_p999_us", "cpu_server_cores"} <= set(rows[0])
    with (tmp_path / "paper-skew.csv").open() as handle:
        skew = list(csv.DictReader(handle))
    assert [(row["clock_skew_ms"], row["clock_skew_model"], row["max_dc_skew_ms"]) for row in skew[:2]] == [
        ("0.0", "uniform", "0.0"), ("10.0", "uniform", "8.0")]
    assert skew[0]["rotx_tx_wait_probability"] and skew[0]["rotx_tx_wait_mean_us"]
    with (tmp_path / "visibility-samples.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 3 * 2 * 3


def test_report_has_tables_and_links_every_plot(written: tuple[Path, dict[str, Any], dict[str, list[str]]]) -> None:
    tmp_path, _, files = written
    report = (tmp_path / "report.md").read_text()
    assert report.startswith("# okapikv benchmark: paper (quick: a smoke test, not a measurement)")
    for name in files["png"]:
        assert f"![{name}]({name})" in report
    assert "| system | workload | clients |" in report
    assert "| p | w | skew ms | ops/s |" in report  # the skew sweep's table shows each run's skew
    assert "## Remote update visibility latency" in report
    assert "Redis reference skipped" in report
    # the traffic table shows Cure's vector metadata next to Okapi's 12 bytes
    assert "| cure | 28.0 |" in report and "| okapi | 12.0 |" in report
    assert "The course service's published numbers" in report


def test_empty_results_still_make_a_report(tmp_path: Path) -> None:
    results = {"config": {"workload": "a"}, "series": {}, "visibility": {}, "notes": []}
    files = write_outputs(results, tmp_path)
    assert files == {"csv": [], "png": []}
    assert "# okapikv benchmark: a" in render_markdown(results, [], [])
    assert (tmp_path / "results.json").exists()


def test_traffic_comes_from_the_run_with_the_most_partitions() -> None:
    """With one partition per DC, Cure's stabilization round sends nothing: a run of the largest
    configuration represents the system even when a smaller one replicated more updates."""
    from okapikv.bench.engine.report import traffic_rows

    small = _run("cure", "rotx", 24, 9_000.0, partitions=1,
                 traffic=_traffic(28.0) | {"updates_replicated": 9_000, "stabilization_bytes_per_s": 0.0})
    large = _run("cure", "rotx", 24, 3_000.0, partitions=4, traffic=_traffic(28.0))
    rows = traffic_rows({"series": {"s": {"runs": [small, large]}}})
    assert len(rows) == 1
    assert rows[0][4] == "9,000" and rows[0][-1] == "rotx, 4 partition(s) per DC, 24 clients"
    with_ratio = _run("okapi", "rotx", 12, 1_000.0, partitions=2, write_ratio=0.5, traffic=_traffic(12.0))
    assert traffic_rows({"series": {"s": {"runs": [with_ratio]}}})[0][-1] == (
        "rotx, 2 partition(s) per DC, 12 clients, write ratio 0.5")


def test_plots_that_would_mean_nothing_are_not_drawn(tmp_path: Path) -> None:
    """One system's metadata bar, a traffic line through runs of unrelated series, a one-point
    sweep, repeated 64-session rounds drawn as "one client" bars: none of them is a figure."""
    from benchmarks.suites.paper_plots import FIGURES
    from okapikv.bench.engine.plots import write_plots

    series = {
        "scaling-runs": {"name": "scaling-runs", "kind": "scaling_sessions", "title": "runs",
                         "runs": [_run("okapi", "ycsb-a", clients, 1000.0 + clients, partitions=p,
                                       traffic=_traffic(12.0)) for p in (1, 2) for clients in (12, 24)]},
        "fast-ycsb-a": {"name": "fast-ycsb-a", "kind": "single", "title": "YCSB-A, 64 sessions",
                        "runs": [_run(system, "ycsb-a", 64, 5000.0 + r, traffic=_traffic(12.0))
                                 for r in range(3) for system in ("okapi", "eventual")]},
        "one-level": {"name": "one-level", "kind": "clients", "title": "one level",
                      "runs": [_run(system, "ycsb-a", 10, 900.0) for system in ("okapi", "redis")]},
    }
    written = write_plots({"series": series}, tmp_path, FIGURES)
    # two systems have replication metadata, so that bar chart alone is drawn
    assert written == ["metadata.png"]
    only_okapi = {name: {**one, "runs": [run for run in one["runs"] if run["system"] == "okapi"]}
                  for name, one in series.items()}
    assert write_plots({"series": only_okapi}, tmp_path, FIGURES) == []


def test_a_puts_waits_are_shown_by_cause_and_a_hot_server_shows() -> None:
    """The report splits a PUT's waits into the skew's and the clock microsecond's (from the reason
    counts where a run predates the split), and shows the busiest and median server's CPU share."""
    from okapikv.bench.engine.report import series_table

    waits = _waits(0.5)
    waits["write"] = {**waits["write"], "reasons": {"put_dependency": 10, "clock_tick": 40}}
    run = _run("cure", "rotx", 12, 700.0, kinds=("rotx", "put"), waits=waits)
    run["cpu"].update(server_busy_max=0.99, server_busy_median=0.41)
    lines = series_table({"name": "s", "kind": "clients", "title": "t", "runs": [run]})
    assert "of which skew / same-us P" in lines[0]
    assert "| 10.0% / 40.0% |" in lines[2] and "busiest / median server 99% / 41%" in lines[2]


def test_a_durable_runs_commit_groups_are_columns_of_its_csv_row() -> None:
    run = {"system": "okapi", "durability": {"fsyncs": 3, "gets_held": 1}}
    row = flatten_run(run, [])
    assert (row["durable_fsyncs"], row["durable_gets_held"]) == (3, 1)
    assert not any(key.startswith("durable_") for key in flatten_run({"system": "okapi"}, []))
