"""The servers' side of a run: their counters over the measured window and the figures derived.

Waits (the paper's central measurement) and metadata bytes come from each server's Stats RPC: the
parent reads every server before and after the measured window and keeps the difference, so the
load phase and warm-up do not count. Wait reasons are the core's: ``tx_*`` are waits of a RO-TX or
SCAN (Cure's per-slice clock wait, GentleRain's coordinator stable-time wait), the others are waits
of a write (``put_dependency``, ``clock_tick``), also summarised apart (``WRITE_WAIT_CAUSES``): the
skew's waits are the paper's measurement, the clock microsecond's a cost of the write rate.

Two figures of a snapshot read's waits: per slice (``rotx``: every parked slice counts, so a RO-TX
over p partitions can count p times) and per transaction (``rotx_tx``, the paper's Figure 4c/d:
the coordinator counts a read once, stalled for its snapshot wait plus its longest slice's,
``okapikv.core.reads.SnapshotReads._count_stall``). Traffic has the core's metadata formula beside
what the peer links really carried (the Stats document's ``wire``, ``okapikv.server.wire_bytes``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from okapikv.bench.engine.results import DurabilitySummary, TrafficSummary, WaitSummary


def _number(value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return value


def _diff(after: Mapping[str, Any], before: Mapping[str, Any]) -> dict[str, Any]:
    """``after - before`` for every numeric leaf (nested dicts recursively); missing before = 0."""
    result: dict[str, Any] = {}
    for key, value in after.items():
        previous = before.get(key) if isinstance(before, Mapping) else None
        if isinstance(value, Mapping):
            result[key] = _diff(value, previous if isinstance(previous, Mapping) else {})
        elif isinstance(value, int | float) and not isinstance(value, bool):
            result[key] = value - _number(previous)
    return result


def _add_into(total: dict[str, Any], part: Mapping[str, Any]) -> None:
    for key, value in part.items():
        if isinstance(value, Mapping):
            _add_into(total.setdefault(key, {}), value)
        elif isinstance(value, int | float):
            total[key] = total.get(key, 0) + value


def stats_delta(after: Mapping[str, Mapping[str, Any]], before: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Sum over servers of (after - before) of every counter. Keys are server addresses."""
    total: dict[str, Any] = {}
    for address, stats in after.items():
        _add_into(total, _diff(stats, before.get(address, {})))
    # Means and maxima are not additive: drop them, they are recomputed from totals.
    for wait in total.get("waits", {}).values():
        if isinstance(wait, dict):
            wait.pop("mean_us", None)
            wait.pop("max_us", None)
    return total


def is_read_wait(reason: str) -> bool:
    """``tx_*`` reasons are waits of a snapshot read (RO-TX or SCAN); the rest are write waits."""
    return reason.startswith("tx")


#: a write's waits by cause, each its own summary (``summarize_waits``): ``write_skew`` when the
#: client's dependency is ahead of the server's clock (``put_dependency``: the skew cost the paper
#: measures, Figure 1 and section 5), ``write_tick`` when the partition's clock microsecond is taken
#: by an earlier write (``clock_tick``: one Cure or GentleRain write per microsecond, a cost of
#: timestamping with the physical clock alone that grows with the write rate, not with the skew)
WRITE_WAIT_CAUSES = {"write_skew": "put_dependency", "write_tick": "clock_tick"}


def wait_of_cause(waits: Mapping[str, Any], kind: str) -> dict[str, float | None] | None:
    """``kind`` (``WRITE_WAIT_CAUSES``) of a run's ``waits`` as ``{probability, mean_us}``; from the
    write summary's reason counts for results written without the split (their mean unknown: None)."""
    if kind in waits:
        return {"probability": waits[kind]["probability"], "mean_us": waits[kind]["mean_us"]}
    write = waits.get("write")
    if not write:
        return None
    operations = write.get("operations") or 0
    count = (write.get("reasons") or {}).get(WRITE_WAIT_CAUSES[kind], 0)
    return {"probability": round(min(1.0, count / operations), 6) if operations else 0.0,
            "mean_us": None if count else 0.0}


def _summary(ops: int, count: int, total_us: float, reasons: dict[str, int]) -> WaitSummary:
    return WaitSummary(operations=ops, waits=count, probability=round(min(1.0, count / ops), 6) if ops else 0.0,
                       mean_us=round(total_us / count, 1) if count else 0.0, total_us=total_us, reasons=reasons)


def summarize_waits(delta: Mapping[str, Any]) -> dict[str, WaitSummary]:
    operations = delta.get("operations", {})
    waits = delta.get("waits", {})
    write_ops = int(sum(_number(operations.get(kind)) for kind in ("put", "swap", "delete")))
    read_ops = int(sum(_number(operations.get(kind)) for kind in ("read_tx", "scan")))
    result: dict[str, WaitSummary] = {}
    for label, ops, wanted in (("write", write_ops, False), ("rotx", read_ops, True)):
        chosen = {reason: w for reason, w in waits.items() if is_read_wait(reason) == wanted}
        count = int(sum(_number(w.get("count")) for w in chosen.values()))
        total_us = sum(_number(w.get("total_us")) for w in chosen.values())
        result[label] = _summary(ops, count, total_us,
                                 {reason: int(_number(w.get("count"))) for reason, w in chosen.items()})
    for kind, reason in WRITE_WAIT_CAUSES.items():
        wait = waits.get(reason, {})
        result[kind] = _summary(write_ops, int(_number(wait.get("count"))), _number(wait.get("total_us")), {})
    finished = int(_number(delta.get("snapshot_reads_finished")))
    stalls = int(_number(delta.get("snapshot_read_stalls")))
    stall_us = _number(delta.get("snapshot_read_stall_us"))
    if finished or "snapshot_reads_finished" in delta:
        result["rotx_tx"] = WaitSummary(
            operations=finished, waits=stalls,
            probability=round(min(1.0, stalls / finished), 6) if finished else 0.0,
            mean_us=round(stall_us / stalls, 1) if stalls else 0.0, total_us=stall_us, reasons={},
        )
    return result


def _per(value: float, count: float) -> float | None:
    return round(value / count, 2) if count else None


def summarize_traffic(delta: Mapping[str, Any], window_s: float, wire: Mapping[str, Any] | None = None,
                      operations: int = 0) -> TrafficSummary:
    """The window's traffic: the core's formula figures (``delta``) and, with ``wire`` (the delta
    of the servers' ``wire`` counters), what the links carried, per update and per client
    operation (``operations`` in the window)."""
    sent = _number(delta.get("replicated_updates_sent"))
    metadata = _number(delta.get("replication_metadata_bytes"))
    payload = _number(delta.get("replication_payload_bytes"))
    window = max(window_s, 1e-9)
    measured: dict[str, float | None] = {}
    if wire:
        updates = _number(wire.get("replication_wire_updates"))
        replication = _number(wire.get("replication_wire_bytes"))
        update_bytes = _number(wire.get("replication_wire_update_bytes"))
        wire_payload = _number(wire.get("replication_wire_payload_bytes"))
        stabilization = _number(wire.get("stabilization_wire_bytes")) + _number(wire.get("heartbeat_wire_bytes"))
        measured = {
            "wire_metadata_bytes_per_update": _per(update_bytes - wire_payload, updates),
            "wire_batch_bytes_per_update": _per(replication - update_bytes, updates),
            "wire_replication_bytes_per_op": _per(replication, operations),
            "wire_stabilization_bytes_per_op": _per(stabilization, operations),
            "wire_total_bytes_per_op": _per(replication + stabilization, operations),
            "wire_read_bytes_per_op": _per(_number(wire.get("read_wire_bytes")), operations),
        }
    return TrafficSummary(
        updates_replicated=int(sent),
        metadata_bytes_per_update=round(metadata / sent, 2) if sent else 0.0,
        payload_bytes_per_update=round(payload / sent, 2) if sent else 0.0,
        replication_bytes_per_s=round((metadata + payload) / window, 1),
        stabilization_bytes_per_s=round(_number(delta.get("stabilization_bytes")) / window, 1),
        heartbeat_bytes_per_s=round(_number(delta.get("heartbeat_bytes")) / window, 1),
        stabilization_messages_per_s=round(_number(delta.get("stabilization_messages_sent")) / window, 1),
        **measured,
    )


def summarize_durability(delta: Mapping[str, Any]) -> DurabilitySummary | None:
    """A durable run's commit groups from the delta of the servers' whole Stats documents
    (``storage``, ``driver``, ``core``); None for servers kept in memory (no ``storage``)."""
    storage = delta.get("storage")
    if not storage:
        return None
    driver = delta.get("driver", {})
    fsyncs = int(_number(storage.get("fsyncs")))
    gets = int(_number(delta.get("core", {}).get("operations", {}).get("get")))
    return DurabilitySummary(
        fsyncs=fsyncs,
        versions_per_fsync=_per(_number(storage.get("versions_written")), fsyncs),
        operations_per_fsync=_per(_number(storage.get("operations_committed")), fsyncs),
        commit_ms=_per(1000 * _number(storage.get("commit_seconds")), fsyncs),
        release_lag_ms=_per(1000 * _number(storage.get("release_lag_seconds")), fsyncs),
        gets=gets, gets_early=int(_number(driver.get("get_replies_early"))),
        gets_held=int(_number(driver.get("get_replies_held"))))
