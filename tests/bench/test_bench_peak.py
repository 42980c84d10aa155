"""The peak-throughput rule (``benchmarks.harness.peak``) on a fake measure function: it doubles
the sessions and stops after two steps in a row of < 5% growth over the best, at the latency cap,
or at the session cap."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from benchmarks.harness.peak import STOP_FAILED, STOP_GROWTH, STOP_LATENCY, STOP_SESSIONS, PeakRule, find_peak


def _fake(curve: dict[int, tuple[float, float]]) -> tuple[list[int], Callable[[int], tuple[float, float, str] | None]]:
    asked: list[int] = []

    def measure(sessions: int) -> tuple[float, float, str] | None:
        asked.append(sessions)
        if sessions not in curve:
            return None
        throughput, latency = curve[sessions]
        return throughput, latency, f"run@{sessions}"

    return asked, measure


def test_it_stops_once_throughput_grows_less_than_five_percent() -> None:
    once = PeakRule(4, 1024, 500.0, patience=1)  # the first flat step ends it
    asked, measure = _fake({4: (1000, 4), 8: (1900, 4.2), 16: (1950, 8), 32: (5000, 6)})
    result = find_peak(measure, once)
    assert asked == [4, 8, 16] and result.stopped_by == STOP_GROWTH
    peak = result.peak
    assert peak is not None and (peak.sessions, peak.throughput_ops_s, peak.run) == (16, 1950, "run@16")
    asked, measure = _fake({4: (1000, 4), 8: (1049, 8)})  # 4.9%: saturated
    assert find_peak(measure, once).stopped_by == STOP_GROWTH
    asked, measure = _fake({4: (1000, 4), 8: (1051, 8), 16: (1051, 16)})  # 5.1%: one more step
    result = find_peak(measure, once)
    assert asked == [4, 8, 16] and result.peak is not None and result.peak.sessions == 8


def test_by_default_one_flat_step_is_not_saturation() -> None:
    """A noisy step (16 sessions below 8's) does not end the search; two flat steps in a row do,
    each judged against the best step before it."""
    asked, measure = _fake({4: (1000, 4), 8: (1700, 5), 16: (1650, 9), 32: (3000, 10), 64: (3100, 20),
                            128: (3120, 40), 256: (9000, 50)})
    result = find_peak(measure, PeakRule(4, 1024, 500.0))
    assert asked == [4, 8, 16, 32, 64, 128] and result.stopped_by == STOP_GROWTH
    assert result.peak is not None and result.peak.sessions == 128
    asked, measure = _fake({4: (1000, 4), 8: (1040, 5), 16: (1060, 9)})  # neither 5% over the best before it
    result = find_peak(measure, PeakRule(4, 1024, 500.0))
    assert asked == [4, 8, 16] and result.stopped_by == STOP_GROWTH
    with pytest.raises(ValueError):
        PeakRule(4, 1024, 500.0, patience=0)


def test_it_stops_at_the_latency_cap_and_keeps_the_best_step_within_it() -> None:
    asked, measure = _fake({8: (100, 80), 16: (200, 90), 32: (390, 120), 64: (700, 250)})
    result = find_peak(measure, PeakRule(8, 1024, 200.0))
    assert asked == [8, 16, 32, 64] and result.stopped_by == STOP_LATENCY
    assert result.peak is not None and result.peak.sessions == 32  # 64 passed the cap
    asked, measure = _fake({8: (100, 300)})  # over the cap at once: that one step is what there is
    result = find_peak(measure, PeakRule(8, 1024, 200.0))
    assert result.stopped_by == STOP_LATENCY and result.peak is not None and result.peak.sessions == 8


def test_it_stops_at_the_session_cap() -> None:
    asked, measure = _fake({n: (n * 100.0, 1.0) for n in (4, 8, 16, 32, 64)})
    result = find_peak(measure, PeakRule(4, 40, 200.0))
    assert asked == [4, 8, 16, 32] and result.stopped_by == STOP_SESSIONS
    assert result.peak is not None and result.peak.sessions == 32
    asked, measure = _fake({4: (100.0, 1.0)})
    assert find_peak(measure, PeakRule(4, 4, 200.0)).stopped_by == STOP_SESSIONS
    assert asked == [4]


def test_a_failed_step_ends_the_search_with_what_was_measured() -> None:
    asked, measure = _fake({4: (100.0, 1.0)})
    result = find_peak(measure, PeakRule(4, 64, 200.0))
    assert asked == [4, 8] and result.stopped_by == STOP_FAILED
    assert result.peak is not None and result.peak.sessions == 4


def test_a_rule_that_cannot_run_is_refused() -> None:
    for start, cap, latency in ((0, 8, 1.0), (16, 8, 1.0), (4, 8, 0.0)):
        with pytest.raises(ValueError):
            PeakRule(start, cap, latency)
