"""``okapi calibrate``: measure what the real server's work costs on this machine; write a cost profile.

The core is pure, so its handlers can be timed in-process under a representative load: a simulated
run (``okapikv.sim``, no cost model) of the paper's workload and of the mixed one, 3 DCs, drives
partition servers that time every call into them (``handle`` per message type, ``on_timer``). Each
per-item cost is a least-squares line over the calls (a replication batch against its updates, a
slice against its keys, a slice reply against its values, a RO-TX against the slices it sends); a
GC slice is the timer runs that ran one less those that did not. What a peer message costs to
encode and decode (``okapikv.wire``) is timed on the messages of the same run and fitted against
their encoded size: the profile's ``send_us`` and ``send_per_byte_us``.

What the core's handlers leave out (the driver's event loop, framing, system calls, the clients)
is not timed here: ``okapi calibrate --validate`` fits it to a real ``okapi bench`` run's CPU
counters and throughput (``benchmarks.validate.fit``). The figures are this machine's
Python costs (the ``source`` field says which command made them, when, on what).
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    Effect,
    Message,
    PeerMessage,
    ReadTxRequest,
    ReplicateBatch,
    ScanRequest,
    ScanSlice,
    Send,
    SliceReply,
    TxSlice,
)
from okapikv.core.server import PartitionServer
from okapikv.sim import SimConfig, Simulation
from okapikv.sim.cost import CostProfile
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire.convert import encode_peer_message, peer_message_from_pb

#: the profile field each client request's handling goes to
_REQUEST_FIELDS = {"GetRequest": "get_us", "PutRequest": "put_us", "SwapRequest": "swap_us",
                   "DeleteRequest": "delete_us", "ReadTxRequest": "rotx_us", "ScanRequest": "scan_us"}
_PLAIN_FIELDS = {"Heartbeat": "heartbeat_us", "VvReport": "vv_report_us", "GsvBroadcast": "gsv_broadcast_us",
                 "GsvExchange": "usv_step_us"}


class Timings:
    """Every timed call: (message type name, size parameter, ns), and the timer runs."""

    def __init__(self) -> None:
        self.calls: dict[str, list[tuple[int, int]]] = {}
        self.timer_ns: list[int] = []
        self.gc_timer_ns: list[int] = []
        self.peer_samples: list[PeerMessage] = []

    def add(self, name: str, size: int, ns: int) -> None:
        self.calls.setdefault(name, []).append((size, ns))


def _size_of(message: Message, effects: list[Effect]) -> int:
    """The parameter a call's cost grows with (``okapikv.sim.cost.Costs.message_us``)."""
    if isinstance(message, ReplicateBatch):
        return len(message.updates)
    if isinstance(message, SliceReply):
        return len(message.items)
    if isinstance(message, TxSlice):
        return len(message.keys)
    if isinstance(message, ReadTxRequest | ScanRequest):
        return sum(1 for e in effects if type(e) is Send)
    if isinstance(message, ScanSlice):
        return sum(len(e.message.items) for e in effects if isinstance(e, Send) and isinstance(e.message, SliceReply))
    return 0


def timed_factory(timings: Timings, *, sample_every: int = 50) -> Callable[[CoreConfig], PartitionServer]:
    """Partition servers that time every call into them (and keep some peer messages they send).
    The clock is the thread's CPU time: on a shared machine, time the OS gave to other processes
    in the middle of a call is not its cost."""
    clock = time.thread_time_ns
    counter = [0]

    class TimedServer(PartitionServer):
        def handle(self, message: Message, now_us: int) -> list[Effect]:
            started = clock()
            effects = super().handle(message, now_us)
            elapsed = clock() - started
            timings.add(type(message).__name__, _size_of(message, effects), elapsed)
            counter[0] += 1
            if counter[0] % sample_every == 0:
                timings.peer_samples.extend(e.message for e in effects if isinstance(e, Send))
            return effects

        def on_timer(self, now_us: int) -> list[Effect]:
            gc_slice = self.gc.next_slice_us
            started = clock()
            effects = super().on_timer(now_us)
            elapsed = clock() - started
            (timings.gc_timer_ns if self.gc.next_slice_us != gc_slice else timings.timer_ns).append(elapsed)
            return effects

    return TimedServer


def fit_line(points: list[tuple[int, int]]) -> tuple[float, float]:
    """Least squares ``ns = a + b * size`` (b = 0 when every size is the same); in us, a and b >= 0."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / var if var else 0.0
    slope = max(0.0, slope)
    return max(0.0, (mean_y - slope * mean_x)) / 1000, slope / 1000


def _trimmed_mean_us(values: list[int]) -> float:
    """Mean without the slowest 1% (a call the OS preempted is not its cost)."""
    ordered = sorted(values)
    kept = ordered[: max(1, int(len(ordered) * 0.99))]
    return sum(kept) / len(kept) / 1000


def _trim(points: list[tuple[int, int]]) -> list[tuple[int, int]]:
    ordered = sorted(points, key=lambda point: point[1])
    return ordered[: max(1, int(len(ordered) * 0.99))]


def measure(*, duration_s: float = 0.5, partitions: int = 4, clients: int = 60, seed: int = 1) -> Timings:
    """Time the core's calls under the paper's workload and the mixed one (3 DCs, Okapi)."""
    timings = Timings()
    factory = timed_factory(timings)
    for workload, rotx in (("paper", 1), ("paper", 2), ("paper", 4), ("mix", 2)):
        config = SimConfig(seed=seed, num_dcs=3, num_partitions=partitions, num_clients=clients,
                           duration_s=duration_s / 2 if workload == "paper" else duration_s, workload=workload,
                           rotx_partitions=rotx, record=False, invariants=False, visibility_sample=0.0)
        Simulation(config, server_factory=factory).run()
    return timings


def wire_costs(samples: list[PeerMessage], *, repeat: int = 20, num_dcs: int = 3) -> tuple[float, float]:
    """(us per message, us per byte) of encoding and decoding peer messages, fitted on ``samples``."""
    clock = time.thread_time_ns
    points: list[tuple[int, int]] = []
    for message in samples[:2_000]:
        encoded = encode_peer_message(message)
        started = clock()
        for _ in range(repeat):
            data = encode_peer_message(message)
            peer_message_from_pb(pb.PeerMessage.FromString(data), message.source, num_dcs)
        points.append((len(encoded), (clock() - started) // repeat))
    if not points:
        return 0.0, 0.0
    return fit_line(_trim(points))


def profile_from(timings: Timings, *, name: str, source: str, cores: int = 2,
                 send: tuple[float, float] = (0.0, 0.0)) -> CostProfile:
    """The cost profile the timings say (per-item lines, timer runs, GC slices, encoding)."""
    values: dict[str, Any] = {}
    calls = timings.calls
    for kind, field in {**_REQUEST_FIELDS, **_PLAIN_FIELDS}.items():
        if kind in calls:
            if kind in ("ReadTxRequest", "ScanRequest"):
                base, per = fit_line(_trim(calls[kind]))
                values[field] = base
                if kind == "ReadTxRequest":
                    values["read_per_slice_us"] = per
            else:
                values[field] = _trimmed_mean_us([ns for _, ns in calls[kind]])
    for kind, base_field, per_field in (("ReplicateBatch", "replicate_batch_us", "replicate_per_update_us"),
                                        ("TxSlice", "tx_slice_us", "tx_slice_per_key_us"),
                                        ("SliceReply", "slice_reply_us", "slice_reply_per_value_us"),
                                        ("ScanSlice", "scan_slice_us", "scan_slice_per_item_us")):
        if kind in calls:
            values[base_field], values[per_field] = fit_line(_trim(calls[kind]))
    if timings.timer_ns:
        values["timer_us"] = _trimmed_mean_us(timings.timer_ns)
        if timings.gc_timer_ns:
            values["gc_slice_us"] = max(0.0, _trimmed_mean_us(timings.gc_timer_ns) - values["timer_us"])
    values["send_us"], values["send_per_byte_us"] = send
    rounded = {key: round(value, 4) for key, value in values.items()}
    return CostProfile(name=name, source=source, cores=cores, **rounded)


def machine_line() -> str:
    return f"{platform.processor() or platform.machine()}, Python {platform.python_version()}"


def calibrate(*, name: str, duration_s: float = 0.5, cores: int = 2) -> tuple[CostProfile, Timings]:
    timings = measure(duration_s=duration_s)
    send = wire_costs(timings.peer_samples)
    when = datetime.now(UTC).strftime("%Y-%m-%d")
    source = (f"okapi calibrate ({when}, {machine_line()}): the core's handlers timed in-process under the "
              f"simulated paper workload (RO-TX over 1, 2, 4 partitions) and the mixed one, 3 DCs x 4 "
              f"partitions, Okapi (thread CPU time); peer-message encoding and decoding timed on those runs' "
              f"messages; no driver or client overhead")
    return profile_from(timings, name=name, source=source, cores=cores, send=send), timings


def write_profile(profile: CostProfile, path: str | Path) -> None:
    Path(path).write_text(json.dumps(profile.to_json(), indent=2) + "\n", encoding="utf-8")


def summary_lines(timings: Timings) -> list[str]:
    """Calls timed per type, with their mean cost."""
    lines = []
    for kind, points in sorted(timings.calls.items()):
        lines.append(f"  {kind}: {len(points)} calls, mean {_trimmed_mean_us([ns for _, ns in points]):.1f} us")
    if timings.timer_ns:
        lines.append(f"  timer runs: {len(timings.timer_ns)} without a GC slice, mean "
                     f"{_trimmed_mean_us(timings.timer_ns):.1f} us; {len(timings.gc_timer_ns)} with one")
    return lines


def with_overheads(profile: CostProfile, *, message_us: float, client_us: float, stretch: float,
                   source: str) -> CostProfile:
    """``profile`` plus a driver overhead per message sent and a client CPU per operation, every
    CPU cost times ``stretch`` (a shared machine's other load)."""
    fitted = replace(profile, send_us=profile.send_us + message_us, client_us=client_us,
                     source=f"{profile.source}; {source}")
    return fitted.scaled(stretch) if stretch != 1.0 else fitted
