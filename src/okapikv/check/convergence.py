"""Convergence at quiescence (docs/protocol.md, "Replication and heartbeats": last-writer-wins, replicas converge).

After the run stops writing and every update has been replicated and become stable, the recorder
reads every written key in every DC (operations marked ``final``). Each key must then read the same
in every DC, and that value must be the one of the write the store arbitrates last: the greatest
``(timestamp, source DC)`` among the writes that took effect (null if that write is a DELETE).

Writes of unknown outcome may or may not have taken effect and carry no timestamp: a key with such
a write is only checked for agreement between DCs, not against a winner. A key with a write held
back past the final reads (``held_until_us``: its timestamp is legitimately ahead of other servers'
clocks, ``okapikv.check.liveness``) is not checked: the other DCs may not show it yet.
"""

from __future__ import annotations

from okapikv.check.anomalies import Anomaly
from okapikv.check.history import History, Operation

CHECKER = "convergence"


def _winner(writes: list[Operation]) -> Operation | None:
    ranked = [w for w in writes if w.status == "ok" and w.timestamp is not None]
    if not ranked:
        return None
    return max(ranked, key=lambda w: (w.timestamp, w.dc, w.id))


def check_convergence(history: History) -> list[Anomaly]:
    """Compare the final reads of every key across DCs and with the last-writer-wins winner."""
    finals = [op for op in history.operations if op.final and op.status == "ok" and op.f == "get"]
    if not finals:
        return []
    writes: dict[str, list[Operation]] = {}
    for op in history.operations:
        if op.is_write and op.key is not None and op.status != "fail" and not op.final:
            writes.setdefault(op.key, []).append(op)
    first_final_us = min(op.invoke_us for op in finals)
    held = {key for key, ops in writes.items()
            if any(op.held_until_us is not None and op.held_until_us > first_final_us for op in ops)}
    final_dcs = sorted({op.dc for op in finals})
    by_key: dict[str, dict[int, Operation]] = {}
    for op in finals:
        assert op.key is not None
        by_key.setdefault(op.key, {})[op.dc] = op
    anomalies: list[Anomaly] = []
    for key in sorted(writes.keys() - held):
        reads = by_key.get(key, {})
        missing = [dc for dc in final_dcs if dc not in reads]
        if missing:
            anomalies.append(
                Anomaly(
                    "MissingFinalRead",
                    CHECKER,
                    f"key {key} was written but never read at quiescence in DC(s) {missing}",
                    tuple(w.id for w in writes[key][:3]),
                    key,
                )
            )
        values = {dc: op.read for dc, op in reads.items()}
        if len(set(values.values())) > 1:
            anomalies.append(
                Anomaly(
                    "Divergence",
                    CHECKER,
                    f"at quiescence key {key} reads differently per DC: "
                    + ", ".join(f"dc{dc}={value}" for dc, value in sorted(values.items())),
                    tuple(op.id for op in reads.values()),
                    key,
                )
            )
        if any(w.status != "ok" or w.timestamp is None for w in writes[key]):
            continue
        winner = _winner(writes[key])
        if winner is None:
            continue
        expected = winner.written
        for dc, op in sorted(reads.items()):
            if op.read != expected:
                anomalies.append(
                    Anomaly(
                        "LostUpdate",
                        CHECKER,
                        f"at quiescence {op.describe()} in dc{dc}, but the last write by (timestamp, DC) is "
                        f"{winner.describe()} [dc{winner.dc}]: replicas converged to the wrong value",
                        (op.id, winner.id),
                        key,
                    )
                )
    return anomalies
