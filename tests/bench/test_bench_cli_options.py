"""`okapi bench` argument interpretation: defaults per suite, validation with clear messages."""

from __future__ import annotations

import pytest

from benchmarks.cli import options_from_args
from benchmarks.suites.paper import paper_plan as _paper_plan
from benchmarks.suites.registry import planned_runs
from okapikv.cli import build_parser


def _options(*argv: str):  # type: ignore[no-untyped-def]
    return options_from_args(build_parser().parse_args(["bench", *argv]))


def _names(options) -> tuple[str, ...]:  # type: ignore[no-untyped-def]
    return tuple(system.name for system in options.systems)


def test_defaults() -> None:
    options = _options()
    assert _names(options) == ("okapi",) and options.clients == (1,) and options.suite is None
    paper = _options("--suite", "paper")
    assert _names(paper) == ("okapi", "cure", "gentlerain")


def test_quick_scales_windows_and_records_down() -> None:
    options = _options("--suite", "course", "--quick")
    assert options.duration_s <= 0.5 and options.records <= 1000
    plan = _paper_plan(_options("--suite", "paper", "--quick"))
    assert plan.partitions == 2 and plan.skew_ms == 10.0 and plan.scale_levels == (1, 2)
    full = _paper_plan(_options("--suite", "paper", "--partitions", "8", "--clock-skew-ms", "5"))
    assert full.rotx_levels == (1, 2, 4, 8) and full.skew_ms == 5.0 and full.scale_levels == tuple(range(1, 9))
    # the peak search: quick doubles once on the RO-TX sweep and measures one step elsewhere
    assert (plan.rotx_rule.start, plan.rotx_rule.max_sessions, plan.rule.max_sessions) == (4, 8, 4)
    assert (full.rotx_rule.start, full.rotx_rule.max_sessions, full.rule.max_sessions) == (8, 1024, 1024)
    capped = _paper_plan(_options("--suite", "paper", "--max-sessions", "64", "--latency-cap-ms", "80"))
    assert capped.rotx_rule.max_sessions == capped.rule.max_sessions == 64 and capped.rule.latency_cap_ms == 80.0
    assert planned_runs(_options("--suite", "course", "--quick", "--no-redis")) == 6 + 3 * 3


def test_the_paper_plan_has_a_skew_sweep() -> None:
    """Full: every system at 0, 5, 10 and 20 ms, 32 sessions, loaded; quick: Cure at 0 and 10 ms,
    unloaded, at most the quick search's 8 sessions (suites.paper's docstring); and in the runs
    planned for the progress bar."""
    full = _paper_plan(_options("--suite", "paper"))
    assert (full.skew_levels, full.skew_sessions, full.skew_systems, full.skew_load) == (
        (0.0, 5.0, 10.0, 20.0), 32, None, True)
    quick = _paper_plan(_options("--suite", "paper", "--quick"))
    assert (quick.skew_levels, quick.skew_sessions, quick.skew_systems, quick.skew_load) == (
        (0.0, 10.0), 8, ("cure",), False)
    assert _paper_plan(_options("--suite", "paper", "--max-sessions", "16")).skew_sessions == 16
    quick_cure = planned_runs(_options("--suite", "paper", "--quick", "--protocols", "cure"))
    assert quick_cure == planned_runs(_options("--suite", "paper", "--quick", "--protocols", "okapi")) + 2


@pytest.mark.parametrize("argv,message", [
    (("--protocols", "okapi,paxos"), "unknown protocol"),
    (("--workload", "g"), "unknown workload"),
    (("--clients", "1,x"), "comma-separated integers"),
    (("--write-ratio", "2"), "within [0, 1]"),
    (("--workload", "rotx", "--partitions", "1", "--rotx-partitions", "2"), "--rotx-partitions"),
    (("--records", "100000000"), "--key-bytes"),
    (("--wan", "far"), "--wan"),
    (("--max-sessions", "0"), "--max-sessions"),
    (("--latency-cap-ms", "0"), "--latency-cap-ms"),
    (("--workload", "memory", "--partitions", "2"), "one partition"),
    (("--workload", "memory", "--dcs", "a,b"), "one DC"),
    (("--workload", "memory", "--connect", "127.0.0.1:7100"), "no --connect"),
    (("--workload", "e", "--load", "lean"), "--load lean"),
    (("--workload", "rotx", "--load", "lean"), "--load lean"),
    (("--load", "lean", "--grpc-only"), "without --grpc-only"),
    (("--suite", "fast", "--load", "lean"), "scaling suite"),
])
def test_bad_arguments_are_refused(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        _options(*argv)


def test_memory_workload_is_one_run_per_protocol() -> None:
    options = _options("--workload", "memory", "--records", "1000000", "--protocols", "okapi,cure")
    assert options.workload == "memory" and options.records == 1_000_000 and options.partitions == 1
    assert planned_runs(options) == 2


def test_the_paper_plans_session_cap_is_scaled_for_gentlerain_and_recorded_for_the_replay() -> None:
    """GentleRain's RO-TX waits for the furthest DC, so filling it takes several times the sessions
    (``SESSION_CAP_FACTOR``); the summary replays each search with its system's cap."""
    from benchmarks.suites.paper_figures import rules

    full = _paper_plan(_options("--suite", "paper"))
    assert full.for_system(full.rotx_rule, "gentlerain").max_sessions == 4 * 1024
    assert full.for_system(full.rotx_rule, "okapi").max_sessions == 1024
    assert full.for_system(full.rule, "cure").max_sessions == 1024
    quick = _paper_plan(_options("--suite", "paper", "--quick"))
    assert quick.for_system(quick.rotx_rule, "gentlerain") == quick.rotx_rule
    config = {"paper_plan": {"peak_search": {"start_sessions": 8, "max_sessions": 1024, "latency_cap_ms": 250.0,
                                             "patience": 2, "cap_factors": {"gentlerain": 4}}}}
    assert rules(config, "gentlerain")[0].max_sessions == 4096 and rules(config, "okapi")[0].max_sessions == 1024
