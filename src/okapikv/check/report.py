"""Run every applicable checker on a history and summarise the result.

Checkers: ``causal`` (Bouajjani et al. patterns under LWW), ``snapshot`` (RO-TX / SCAN atomicity),
``session`` (Terry et al. session guarantees), ``convergence`` (final reads at quiescence), for
single-DC histories ``linearizability`` (per key), and for histories that record a heal
``liveness`` (operations complete and writes become visible within bounds after it). All are pure
functions of the history.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from okapikv.check.anomalies import Anomaly
from okapikv.check.causal import analyse, check_causal, check_sessions, check_snapshots
from okapikv.check.convergence import check_convergence
from okapikv.check.history import History
from okapikv.check.linearizability import linearizability
from okapikv.check.liveness import check_liveness

Checker = Callable[[History], list[Anomaly]]


@dataclass(slots=True)
class CheckReport:
    anomalies: list[Anomaly]
    operations: int
    completed: Counter[str]
    by_function: Counter[str]
    reads_checked: int
    linearizable_keys: int
    undecided_keys: list[str]
    seconds: float
    checkers: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.anomalies

    def counts(self) -> Counter[str]:
        return Counter(f"{a.checker}:{a.name}" for a in self.anomalies)

    def summary_lines(self, max_anomalies: int = 10) -> list[str]:
        lines = [
            f"checked {self.operations} operations "
            f"({', '.join(f'{k} {v}' for k, v in sorted(self.completed.items()))}); "
            f"{self.reads_checked} reads against their causal past; "
            f"checkers: {', '.join(self.checkers)} in {self.seconds:.2f} s",
        ]
        if self.linearizable_keys:
            lines.append(f"linearizability: {self.linearizable_keys} keys searched"
                         + (f", {len(self.undecided_keys)} undecided (budget)" if self.undecided_keys else ""))
        if not self.anomalies:
            lines.append("no anomalies")
            return lines
        lines.append(f"{len(self.anomalies)} anomalies: "
                     + ", ".join(f"{name} {count}" for name, count in sorted(self.counts().items())))
        for anomaly in self.anomalies[:max_anomalies]:
            lines.append(f"  {anomaly}")
        if len(self.anomalies) > max_anomalies:
            lines.append(f"  ... {len(self.anomalies) - max_anomalies} more")
        return lines


def check_history(history: History, *, linearizability_budget: int = 2_000_000) -> CheckReport:
    """Run every checker that applies to ``history``."""
    started = time.perf_counter()
    anomalies: list[Anomaly] = []
    checkers = ["causal", "snapshot", "session", "convergence"]
    anomalies.extend(check_causal(history))
    anomalies.extend(check_snapshots(history))
    anomalies.extend(check_sessions(history))
    anomalies.extend(check_convergence(history))
    if "liveness" in history.meta:
        checkers.append("liveness")
        anomalies.extend(check_liveness(history))
    linearizable_keys = 0
    undecided: list[str] = []
    if len(history.dcs) <= 1:
        checkers.append("linearizability")
        result = linearizability(history, step_budget=linearizability_budget)
        anomalies.extend(result.anomalies)
        linearizable_keys = result.keys_checked
        undecided = result.keys_undecided
    analysis = analyse(history)
    return CheckReport(
        anomalies=anomalies,
        operations=len(history.operations),
        completed=Counter(op.status or "pending" for op in history.operations),
        by_function=Counter(op.f for op in history.operations),
        reads_checked=analysis.reads_checked,
        linearizable_keys=linearizable_keys,
        undecided_keys=undecided,
        seconds=time.perf_counter() - started,
        checkers=checkers,
    )
