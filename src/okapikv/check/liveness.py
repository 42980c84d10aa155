"""Liveness after the heal: work resumes within a bound once every fault is repaired.

The safety checkers (causal, snapshot, session, convergence, linearizability) pass a system that
stops: a write parked until a clock an hour behind catches up, or remote visibility stalled for an
hour, breaks no safety property. This checker judges the part of a history after ``heal_us`` (meta
``liveness``, recorded by the simulator when it runs clients on after the heal):

- every operation of a live client that was in flight at the heal or started after it completes
  within ``operation_bound_us`` of the later of the heal and its invocation. A clean refusal
  (``fail``) counts as complete: a request refused at once with a clear error is live;
- every write started after the heal becomes visible in every other DC (``visible`` events)
  within ``visibility_bound_us`` of its completion.

One exemption, the narrowest the protocol allows: a write whose timestamp is legitimately ahead of
other servers' clocks (its server's own clock is ahead, or its HLC restarted above a clock bound a
step back left ahead of the clock) cannot become visible before those clocks are within the
maximum clock offset of it, since servers hold back peers' watermarks beyond their clock plus the
offset (docs/operations.md, "Clocks: the maximum offset"). The recorder gives such a write
``held_until_us``, that moment, computed from the servers' clocks, and its deadline counts from
then. A timestamp that is ahead because the server's HLC was dragged by an input beyond the offset
gets no exemption (the simulator reports that as ``ClockDragged``).
"""

from __future__ import annotations

from okapikv.check.anomalies import Anomaly
from okapikv.check.history import History, Operation

CHECKER = "liveness"
DEFAULT_OPERATION_BOUND_US = 2_000_000
DEFAULT_VISIBILITY_BOUND_US = 2_000_000
#: Anomalies of one name reported in full; the rest are counted in one more.
MAX_REPORTED = 20


def check_liveness(history: History) -> list[Anomaly]:
    """Operations and remote visibility after the heal, each within its bound (module docstring);
    nothing to judge (an empty list) when the history records no heal."""
    spec = history.meta.get("liveness")
    if not isinstance(spec, dict) or "heal_us" not in spec:
        return []
    heal_us = int(spec["heal_us"])
    operation_bound = int(spec.get("operation_bound_us", DEFAULT_OPERATION_BOUND_US))
    visibility_bound = int(spec.get("visibility_bound_us", DEFAULT_VISIBILITY_BOUND_US))
    operations = [op for op in history.operations if not op.final]
    if not history.operations:
        return []
    end_us = max(max([op.complete_us or op.invoke_us, *(op.visible or {}).values()])
                 for op in history.operations)
    found: dict[str, list[Anomaly]] = {}

    def report(name: str, explanation: str, op: Operation) -> None:
        found.setdefault(name, []).append(Anomaly(name, CHECKER, explanation, (op.id,), op.key))

    for op in operations:
        done = op.complete_us if op.status is not None else None
        if done is not None and done < heal_us:
            continue
        start = max(op.invoke_us, heal_us)
        since = "the heal" if start == heal_us else "its start"
        bound = f"(bound {operation_bound / 1000:.0f} ms)"
        if done is None:
            if end_us - start > operation_bound:
                report("OperationNeverCompleted",
                       f"{op.describe()}: no outcome {(end_us - start) / 1000:.0f} ms after {since} {bound}", op)
        elif done - start > operation_bound:
            report("SlowOperation", f"{op.describe()} took {(done - start) / 1000:.0f} ms after {since} {bound}", op)
    if spec.get("visibility"):
        dcs = range(int(history.meta.get("dcs", 1)))
        for op in operations:
            if not (op.is_write and op.ok and op.invoke_us >= heal_us and op.complete_us is not None):
                continue
            start = max(op.complete_us, op.held_until_us or 0)
            deadline = start + visibility_bound
            held = f", held until {op.held_until_us / 1000:.0f} ms" if op.held_until_us else ""
            for dc in dcs:
                if dc == op.dc:
                    continue
                seen = (op.visible or {}).get(dc)
                if seen is None and end_us >= deadline:
                    report("VisibilityStalled", f"{op.describe()} [dc{op.dc}] was still not visible in dc{dc} "
                           f"{(end_us - start) / 1000:.0f} ms after it completed{held} (bound "
                           f"{visibility_bound / 1000:.0f} ms)", op)
                elif seen is not None and seen > deadline:
                    report("VisibilityStalled", f"{op.describe()} [dc{op.dc}] became visible in dc{dc} "
                           f"{(seen - start) / 1000:.0f} ms after it completed{held} (bound "
                           f"{visibility_bound / 1000:.0f} ms)", op)
    anomalies: list[Anomaly] = []
    for name, items in found.items():
        anomalies.extend(items[:MAX_REPORTED])
        if len(items) > MAX_REPORTED:
            anomalies.append(Anomaly(name, CHECKER, f"... and {len(items) - MAX_REPORTED} more of these"))
    return anomalies
