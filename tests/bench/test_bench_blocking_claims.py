"""The claims that rest on what a blocked request costs, judged under each blocking model side by
side (``paper_claims.render_models``, ``scripts/redraw_paper.py``): the same rules on each model's
simulated runs, a column per model, and docs/paper.md carries the table of the committed runs; an
experiment run in parts (a process per system, ``scripts/merge_sim_results.py``) merges into one."""

from __future__ import annotations

from pathlib import Path

from scripts_support import load_script

from benchmarks.suites.measurements import SIMULATED, Measurements, Peak, Sweep, cost_model
from benchmarks.suites.paper_claims import BLOCKING_ROWS, CLAIMS, PARTLY, REPRODUCED, judge, render_models

ROOT = Path(__file__).resolve().parents[2]



def _fig3(gentlerain_ops: float) -> Measurements:
    """One fig3 point at 2 partitions: Okapi 100k, Cure 95k, GentleRain as given, every peak a knee."""
    peaks = tuple(Peak(system, 2, ops, clients, 5.0, 1.0, busy_max=0.99, busy_median=0.98)
                  for system, ops, clients in (("okapi", 100_000.0, 96), ("cure", 95_000.0, 192),
                                               ("gentlerain", gentlerain_ops, 3072)))
    return Measurements(SIMULATED, Sweep("partitions", peaks, window_s=0.8, warmup_s=0.2), Sweep("rotx_partitions"),
                        Sweep("write_ratio"))


def test_the_blocking_table_has_a_column_per_model_judged_by_the_same_rules() -> None:
    free, thread = _fig3(70_000.0), _fig3(30_000.0)  # GentleRain's capacity without and with its threads' cost
    table = render_models([("free: parked", free), ("thread: polling", thread)])
    lines = table.splitlines()
    assert lines[0] == "| # | the paper | free: parked | thread: polling |"
    assert [line.split(" | ")[0] for line in lines[2:]] == [f"| {row}" for row in BLOCKING_ROWS]
    row_one = lines[2]
    assert CLAIMS[0].claim in row_one and row_one.count("**") == 4  # a verdict in each model's column
    # the same rule, judged on each model's figures, gives different verdicts: x1.43 over GentleRain
    # is the paper's "50%", x3.33 only its direction
    assert judge(free)[0].verdict == REPRODUCED and judge(thread)[0].verdict == PARTLY
    assert f"**{REPRODUCED}**" in row_one.split(" | ")[2] and f"**{PARTLY}**" in row_one.split(" | ")[3]


def test_a_model_is_named_by_the_cost_profile_its_runs_ran_under() -> None:
    free = {"fig3": {"config": {"cost_profile": {"name": "this-vm", "blocking": "free", "threads": 0}}}}
    thread = {"fig3": {"config": {"cost_profile": {"name": "paper", "blocking": "thread", "threads": 544,
                                                   "wake_us": 10.5, "poll_ms": 5.0}}}}
    assert cost_model(free) == "profile this-vm, blocking free (a parked request costs nothing while it waits)"
    assert cost_model(thread) == ("profile paper, blocking thread (544 threads per server, a blocked one waking "
                                  "every 5 ms for 10.5 us of CPU)")


def test_docs_paper_md_carries_the_blocking_table_of_the_committed_runs() -> None:
    redraw = load_script("redraw_paper")
    models = redraw.blocking_models()
    assert [label.split(":")[0] for label, _ in models] == ["free", "thread"]
    text = (ROOT / "docs" / "paper.md").read_text()
    section = text.split(redraw.BLOCKING_BEGIN, 1)[1].split(redraw.BLOCKING_END, 1)[0].strip()
    assert section == render_models(models).strip()


def _part(system: str, **config: object) -> dict[str, object]:
    run = {"system": system, "partitions": 2, "clients": 6, "throughput_ops_s": 1.0}
    return {"config": {"suite": "sim --experiment fig3", "dcs": 3, "partitions": 2, "protocols": [system],
                       "command": f"okapi sim --experiment fig3 --protocols {system}", **config},
            "series": {"sim-scalability": {"kind": "partitions", "title": "t", "runs": [run]}},
            "visibility": {}, "notes": [f"{system} checked"], "timings_s": {"simulation_cpu_s": 2.0}}


def test_an_experiment_run_in_parts_merges_into_one_results() -> None:
    merge = load_script("merge_sim_results").merge
    merged = merge([_part("okapi", sweep_start={"okapi": 1}), _part("gentlerain", sweep_start={"gentlerain": 32})])
    assert merged["config"]["protocols"] == ["okapi", "gentlerain"]
    # each system's sweep start, which tells a peak at a sweep's last step (a lower bound)
    assert merged["config"]["sweep_start"] == {"okapi": 1, "gentlerain": 32}
    assert [run["system"] for run in merged["series"]["sim-scalability"]["runs"]] == ["okapi", "gentlerain"]
    assert merged["notes"] == ["okapi checked", "gentlerain checked"]
    assert merged["timings_s"]["simulation_cpu_s"] == 4.0 and "; okapi sim" in merged["config"]["command"]
    try:
        merge([_part("okapi"), _part("cure", cost_profile={"blocking": "thread"})])
    except ValueError as error:
        assert "cost_profile" in str(error)
    else:
        raise AssertionError("parts of other cost models merged")
