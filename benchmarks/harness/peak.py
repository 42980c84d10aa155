"""Peak throughput the paper's way (Okapi section 5, Figures 3a and 4a): raise the closed-loop
sessions until the system is saturated, and report the peak, the sessions it took, and the latency
at it.

Each system gets as many sessions as it needs: a system whose operations block (Cure's clock
waits, GentleRain's RO-TX waiting for the furthest DC) needs many more to fill its waiting time
("Cure and GentleRain need to activate many more clients than Okapi"), so a fixed session count
measures the load generator rather than the system. The rule (``find_peak``): start at
``PeakRule.start`` sessions and double; stop once ``patience`` steps in a row (2) did not raise
throughput by ``growth`` (5%) over the best step before them, when the mean latency passed
``latency_cap_ms``, or at ``max_sessions``. The peak is the step with the highest throughput among
those within the latency cap (the first step if none was). Every step is bounded: at most
log2(max_sessions / start) + 1 of them.

Why a patience of two: on a machine whose servers already take most of its cores, one step's
throughput moves by more than 5% from run to run, and a search that stops at the first flat step
stops at 8 or 16 sessions where doubling twice more gains half again (the paper suite on 2 cores,
2026-12-02). One more step costs one run per point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

_R = TypeVar("_R")

GROWTH = 0.05
PATIENCE = 2
STOP_GROWTH = "growth"  # ``patience`` steps in a row grew throughput less than ``growth``
STOP_LATENCY = "latency"  # mean latency passed the cap
STOP_SESSIONS = "sessions"  # the next step would pass max_sessions
STOP_FAILED = "failed"  # a step could not be measured


@dataclass(frozen=True, slots=True)
class PeakRule:
    start: int
    max_sessions: int
    latency_cap_ms: float
    growth: float = GROWTH
    patience: int = PATIENCE

    def __post_init__(self) -> None:
        if self.start < 1 or self.max_sessions < self.start:
            raise ValueError(f"peak search needs 1 <= start ({self.start}) <= max sessions ({self.max_sessions})")
        if self.latency_cap_ms <= 0 or self.growth < 0 or self.patience < 1:
            raise ValueError("peak search needs a positive latency cap, a non-negative growth threshold and a "
                             "patience of at least one step")


@dataclass(frozen=True, slots=True)
class Step(Generic[_R]):
    sessions: int
    throughput_ops_s: float
    mean_latency_ms: float
    run: _R


@dataclass(slots=True)
class Peak(Generic[_R]):
    """The steps measured, in order, why the search stopped, and the peak among them."""

    steps: list[Step[_R]] = field(default_factory=list)
    stopped_by: str = ""
    cap_ms: float = 0.0

    @property
    def peak(self) -> Step[_R] | None:
        within = [step for step in self.steps if step.mean_latency_ms <= self.cap_ms] or self.steps[:1]
        return max(within, key=lambda step: step.throughput_ops_s, default=None)


def find_peak(measure: Callable[[int], tuple[float, float, _R] | None], rule: PeakRule) -> Peak[_R]:
    """Measure at ``rule.start`` sessions, then double, until the rule stops (module docstring).
    ``measure(sessions)``: (throughput ops/s, mean latency ms, the run), or None if it failed."""
    result: Peak[_R] = Peak(cap_ms=rule.latency_cap_ms)
    sessions = rule.start
    best = 0.0  # the highest throughput so far
    flat = 0  # steps in a row that did not grow it by ``growth``
    while True:
        measured = measure(sessions)
        if measured is None:
            result.stopped_by = STOP_FAILED
            return result
        throughput, latency_ms, run = measured
        first = not result.steps
        result.steps.append(Step(sessions, throughput, latency_ms, run))
        if latency_ms > rule.latency_cap_ms:
            result.stopped_by = STOP_LATENCY
            return result
        if first or throughput >= best * (1 + rule.growth):
            flat = 0
        else:
            flat += 1
            if flat >= rule.patience:
                result.stopped_by = STOP_GROWTH
                return result
        best = max(best, throughput)
        if sessions * 2 > rule.max_sessions:
            result.stopped_by = STOP_SESSIONS
            return result
        sessions *= 2
