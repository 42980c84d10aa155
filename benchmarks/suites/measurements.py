"""One typed record of what the paper's claims read, built from a real run or from the simulator.

The 19 claims (``paper_claims.CLAIMS``) are judged by one function over a ``Measurements``, so a
verdict cannot depend on where its figures came from, only on the figures. One record covers every
experiment of one source (a sweep per peak-search series, the rest per figure); two builders read
the results back into it, and the claims read nothing else:

- ``from_real``: a paper-suite results.json (``okapi bench --suite paper``; its ``paper`` section,
  ``paper_figures.summarize``): each point's peak from its search, a peak stopped by the session cap
  a lower bound; RO-TX stalls per transaction at each p's peak; the skew sweep; the replication
  bytes on the wire and by the formula; bytes per operation.
- ``from_simulated``: the results.json files ``okapi sim --experiment ...`` writes under one folder
  (``load_simulated``): each point's peak the steady run of highest throughput of its sweep, a peak
  at the sweep's last step, or before the step out of a steady state that ended it, still growing
  a lower bound; the write-ratio, visibility and traffic runs at a
  fixed load; the metadata bytes the core's formula (the simulator encodes no wire); stabilization
  bytes per second without heartbeats (1 ms, every system alike: no part of the claims'
  stabilization). A sweep whose window holds fewer than ``WINDOW_CYCLES`` GentleRain cycles, or
  whose runs lack their servers' CPU spread, carries no verdict (``Sweep.untrusted``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from okapikv.bench.engine.stats import wait_of_cause
from okapikv.core.deployment import paper_delay_ms
from okapikv.sim.config import dc_names, wan_matrix_ms
from okapikv.sim.experiments import MAX_SWEEP_STEPS, PEAK_GROWTH, WINDOW_CYCLES, gentlerain_cycle_s

SYSTEMS = ("okapi", "cure", "gentlerain")
#: the simulated experiments (``okapi sim --experiment``) the claims read, and the traffic at 5 DCs
#: beyond the paper (the other DC count of the metadata claim)
EXPERIMENTS = ("fig3", "fig4", "write-ratio", "visibility", "traffic")
FIVE_DC_TRAFFIC = "beyond/traffic-5dc"


@dataclass(frozen=True, slots=True)
class Source:
    """Where the measurements came from, in the words the claims' reasons use."""

    name: str  # "real" or "simulated"
    load: str  # what a peak's load counts: "sessions" or "clients"
    bound: str  # what makes a peak a lower bound, said of several
    bound_one: str  # the same, said of one
    remedy: str  # how to get a real knee
    drift: str  # what else moves a throughput ratio ("" where nothing does)
    no_skew_sweep: str  # why a skew sweep may be missing


REAL = Source("real", "sessions", "at their search's session cap", "at the session cap",
              "the search must end on a real knee: more sessions, `--max-sessions`",
              " (peaks measured minutes apart on a shared 2-core VM)",
              "the skew sweep (`paper-skew`) is not in these results")
SIMULATED = Source("simulated", "clients", "at their sweep's last (steady) step, still growing",
                   "at its sweep's last (steady) step",
                   "the sweep must end on a real knee: more steps, `--sweep-steps`, or a longer window "
                   "(`--duration-s`) where a step out of a steady state ended it", "",
                   "the simulated experiments run at one skew (no skew sweep)")


@dataclass(frozen=True, slots=True)
class Peak:
    """One system at one point of a sweep: its peak (or its run at a fixed load)."""

    system: str
    point: float  # the sweep's variable: partitions per DC, RO-TX partitions p or write ratio w
    throughput_ops_s: float
    load: int | None  # sessions or clients at the peak
    rotx_mean_ms: float | None
    put_mean_ms: float | None
    lower_bound: bool = False
    #: the busiest and the median server's CPU share (simulated; None where not measured)
    busy_max: float | None = None
    busy_median: float | None = None
    #: the share of PUTs that waited for the clock skew and for the next clock microsecond
    put_skew_probability: float | None = None
    put_tick_probability: float | None = None


@dataclass(frozen=True, slots=True)
class Sweep:
    """A sweep's points, each system's peak at each (``at_peak``) or its run at a fixed load."""

    key: str  # the variable's name: partitions, rotx_partitions, write_ratio
    peaks: tuple[Peak, ...] = ()
    at_peak: bool = True
    window_s: float | None = None  # each run's measured window
    warmup_s: float | None = None
    fixed_load: int | None = None  # clients per partition of each DC, for a fixed-load sweep
    untrusted: str | None = None  # why no run of the sweep can carry a verdict

    def points(self) -> list[float]:
        return sorted({peak.point for peak in self.peaks})

    def get(self, system: str, point: float) -> Peak | None:
        return next((peak for peak in self.peaks if peak.system == system and peak.point == point), None)


@dataclass(frozen=True, slots=True)
class Wait:
    """RO-TX waits: the share of transactions (or slices) that waited, and the mean wait (ms)."""

    label: str  # where: "p=4", "10 ms skew"
    probability: float | None
    mean_ms: float | None


@dataclass(frozen=True, slots=True)
class RotxStall:
    """A system's RO-TX stalls at one p's peak: per transaction where counted, and per slice."""

    system: str
    p: int
    tx_probability: float | None
    tx_mean_ms: float | None
    slice_probability: float | None
    slice_mean_ms: float | None


@dataclass(frozen=True, slots=True)
class SkewLevel:
    """Cure's mean stall per transaction at one level of the skew sweep (Fig. 4d)."""

    skew_ms: float
    tx_mean_ms: float
    max_dc_skew_ms: float | None


@dataclass(frozen=True, slots=True)
class LatencyCell:
    """Each system's mean RO-TX latency (ms) at the same p and throughput (Fig. 4b, 5): at a
    throughput one of Okapi's steps reached, the others' on their own curves (``equal_throughput``)."""

    p: int
    throughput: float
    okapi: float
    cure: float
    gentlerain: float


@dataclass(frozen=True, slots=True)
class Visibility:
    system: str
    mean_ms: float  # over every pair of DCs, weighted by the samples
    source_spreads_ms: tuple[float, ...]  # per destination: the distance between its sources' medians


@dataclass(frozen=True, slots=True)
class Metadata:
    """Replication metadata per update: the formula's bytes and the wire's (None: not encoded)."""

    system: str
    formula_bytes: float
    wire_bytes: float | None
    payload_bytes: float


@dataclass(frozen=True, slots=True)
class Communication:
    system: str
    write_ratio: float
    stabilization: float | None  # in ``Measurements.stabilization_unit``
    total_bytes_per_op: float | None  # stabilization and replication per client operation


@dataclass(frozen=True, slots=True)
class Measurements:
    """Everything the 19 claims read, from one source (module docstring)."""

    source: Source
    scalability: Sweep
    rotx: Sweep
    writes: Sweep
    #: row 6: RO-TX latency at equal p and throughput (``equal_throughput``)
    rotx_latency: tuple[LatencyCell, ...] = ()
    rotx_latency_what: str = ""
    rotx_stalls: tuple[RotxStall, ...] = ()
    #: row 7: Cure's RO-TX stalls at each p's first step (below saturation), and what that step was
    stalls_below: tuple[RotxStall, ...] = ()
    stalls_below_what: str = ""
    #: row 8: Cure's stall against the skew, and what the RO-TX sweep's one skew was
    skew: tuple[SkewLevel, ...] = ()
    skew_what: str = ""
    one_skew: str = ""
    #: row 9: GentleRain's waits below saturation, and where they were measured
    gentlerain_below: tuple[Wait, ...] = ()
    below_what: str = ""
    furthest_ms: tuple[tuple[str, float], ...] = ()
    visibility: tuple[Visibility, ...] = ()
    visibility_untrusted: str | None = None
    metadata: tuple[Metadata, ...] = ()
    #: the formula's bytes per update at another DC count: (DCs, ((system, bytes), ...))
    metadata_other_dcs: tuple[int, tuple[tuple[str, float], ...]] | None = None
    communication: tuple[Communication, ...] = ()
    stabilization_unit: str = "B/op"
    communication_untrusted: str | None = None


# ------------------------------------------------------------------------------ the real runs


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _series_runs(results: Mapping[str, Any], series: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = results.get("series", {}).get(series, {}).get("runs", [])
    return runs


def first_steps(runs: Iterable[Mapping[str, Any]], system: str) -> dict[int, Mapping[str, Any]]:
    """``system``'s run with the fewest clients (sessions) at each p of a RO-TX sweep: its servers
    below saturation, where a RO-TX's wait is the protocol's and not a queue's."""
    first: dict[int, Mapping[str, Any]] = {}
    for run in runs:
        p = run["rotx_partitions"]
        if run["system"] == system and (p not in first or run["clients"] < first[p]["clients"]):
            first[p] = run
    return dict(sorted(first.items()))


def _stalls_below(runs: list[dict[str, Any]], unit: str) -> tuple[tuple[RotxStall, ...], str]:
    first = first_steps(runs, "cure")
    if not first:
        return (), ""
    loads = sorted({int(run["clients"]) for run in first.values()})
    span = str(loads[0]) if len(loads) == 1 else f"{loads[0]}-{loads[-1]}"
    return tuple(_sim_stall(run) for run in first.values()), f"each p's first step ({span} {unit})"


def _real_sweep(results: Mapping[str, Any], series: str, key: str) -> Sweep:
    config = results.get("config", {})
    peaks = []
    for peak in results.get("paper", {}).get("peaks", []):
        if peak["series"] != series:
            continue
        skew = tick = None
        if key == "write_ratio":
            run = next((r for r in _series_runs(results, series)
                        if r["system"] == peak["system"] and r.get("write_ratio") == peak["write_ratio"]), None)
            waits = (run or {}).get("waits") or {}
            found_skew, found_tick = wait_of_cause(waits, "write_skew"), wait_of_cause(waits, "write_tick")
            skew = None if found_skew is None else found_skew["probability"]
            tick = None if found_tick is None else found_tick["probability"]
        peaks.append(Peak(peak["system"], peak[key], float(peak["throughput_ops_s"]), peak.get("sessions"),
                          _float(peak.get("rotx_mean_ms")), _float(peak.get("put_mean_ms")),
                          bool(peak.get("lower_bound")), put_skew_probability=skew, put_tick_probability=tick))
    return Sweep(key, tuple(peaks), window_s=_float(config.get("duration_s")), warmup_s=_float(config.get("warmup_s")))


def _on_curve(curve: Sequence[tuple[float, float]], throughput: float) -> float | None:
    """The latency on ``curve`` ((throughput, latency) by throughput) at ``throughput``, linear
    between the two points around it; None outside the curve."""
    if not curve or not curve[0][0] <= throughput <= curve[-1][0]:
        return None
    for (x0, y0), (x1, y1) in zip(curve, curve[1:], strict=False):
        if x0 <= throughput <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (throughput - x0) / (x1 - x0)
    return curve[0][1]


def equal_throughput(runs: Iterable[Mapping[str, Any]]) -> tuple[LatencyCell, ...]:
    """Row 6's cells, as Fig. 5 draws RO-TX latency against throughput: for each p, at the throughput
    of each of Okapi's steps, Okapi's RO-TX latency and Cure's and GentleRain's on their own curves,
    each curve a system's steps up to its peak (the rising part of its sweep) ordered by throughput,
    linear between two steps; a throughput a curve does not reach gives no cell. Comparing at equal
    clients would set a system that queues more clients per operation (GentleRain, Cure) against
    Okapi at a lower throughput, and past saturation compare queues, not the protocols' waits."""
    steps: dict[tuple[int, str], list[tuple[int, float, float]]] = {}
    for run in runs:
        latency = _latency_ms(run, "rotx")
        if latency is not None and run["throughput_ops_s"]:
            steps.setdefault((run["rotx_partitions"], run["system"]), []).append(
                (run["clients"], float(run["throughput_ops_s"]), latency))
    curves: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for key, points in steps.items():
        points.sort()
        peak = max(range(len(points)), key=lambda i: points[i][1])
        curves[key] = sorted((ops, latency) for _, ops, latency in points[:peak + 1])
    cells = []
    for (p, system), curve in sorted(curves.items()):
        if system != "okapi":
            continue
        for ops, latency in curve:
            cure, gentlerain = (_on_curve(curves.get((p, other), []), ops) for other in ("cure", "gentlerain"))
            if cure is not None and gentlerain is not None:
                cells.append(LatencyCell(p, ops, latency, cure, gentlerain))
    return tuple(cells)


def _real_skew_model(results: Mapping[str, Any]) -> str:
    """The RO-TX sweep's clock skew model (its Cure runs', else the plan's)."""
    plan = results.get("config", {}).get("paper_plan", {})
    cure_runs = [run for run in _series_runs(results, "paper-rotx-partitions") if run["system"] == "cure"]
    return str(next((run["clock_skew_model"] for run in cure_runs if run.get("clock_skew_model")),
                    plan.get("clock_skew_model") or "dc-major"))


def _real_one_skew(results: Mapping[str, Any]) -> str:
    plan = results.get("config", {}).get("paper_plan", {})
    cure_runs = [run for run in _series_runs(results, "paper-rotx-partitions") if run["system"] == "cure"]
    model = _real_skew_model(results)
    inside = [run["max_dc_skew_ms"] for run in cure_runs if run.get("max_dc_skew_ms") is not None]
    return (f"at the RO-TX sweep's {plan.get('clock_skew_ms', '?')} ms skew ({model}"
            + (f", at most {max(inside):.1f} ms between two servers of one DC" if inside else "") + ")")


def from_real(results: Mapping[str, Any]) -> Measurements:
    """The measurements of a paper-suite results dictionary (module docstring)."""
    paper = results.get("paper", {})
    stalls = tuple(RotxStall(row["system"], row["rotx_partitions"], row["tx_probability"], row["tx_mean_ms"],
                             row.get("slice_probability"), row.get("slice_mean_ms"))
                   for row in paper.get("stalls", []))
    sweep = [row for row in paper.get("skew", []) if row["system"] == "cure" and row["tx_mean_ms"] is not None]
    skew_what = (f"skew sweep ({sweep[0]['clock_skew_model'] or _real_skew_model(results)}, "
                 f"p={sweep[0]['rotx_partitions']}, {sweep[0]['sessions']} sessions)") if sweep else ""
    gentlerain = [row for row in paper.get("skew", [])
                  if row["system"] == "gentlerain" and row["tx_probability"] is not None]
    below_what = ""
    if gentlerain:
        sessions = gentlerain[0].get("sessions")
        below_what = f"the skew sweep (p={gentlerain[0]['rotx_partitions']}" + (
            f", {sessions} sessions" if sessions else "") + ")"
    stalls_below, stalls_below_what = _stalls_below(_series_runs(results, "paper-rotx-partitions-sessions"),
                                                    "sessions")
    dcs = results.get("config", {}).get("paper_plan", {}).get("dcs", [])
    furthest = tuple((a, max((paper_delay_ms(a, b) or 0.0) for b in dcs if b != a)) for a in dcs)
    visibility = paper.get("visibility", {})
    communication = tuple(Communication(row["system"], row["write_ratio"], row.get("stabilization_bytes_per_op"),
                                        row.get("total_bytes_per_op")) for row in paper.get("communication", []))
    return Measurements(
        REAL, _real_sweep(results, "paper-scalability", "partitions"),
        _real_sweep(results, "paper-rotx-partitions", "rotx_partitions"),
        _real_sweep(results, "paper-write-ratio", "write_ratio"),
        rotx_latency=equal_throughput(_series_runs(results, "paper-rotx-partitions-sessions")),
        rotx_latency_what="every step of the RO-TX searches up to each system's peak",
        rotx_stalls=stalls,
        stalls_below=stalls_below, stalls_below_what=stalls_below_what,
        skew=tuple(SkewLevel(row["clock_skew_ms"], row["tx_mean_ms"], row.get("max_dc_skew_ms")) for row in sweep),
        skew_what=skew_what, one_skew=_real_one_skew(results),
        gentlerain_below=tuple(Wait(f"{row['clock_skew_ms']:g} ms skew", row["tx_probability"], row["tx_mean_ms"])
                               for row in gentlerain),
        below_what=below_what, furthest_ms=furthest,
        visibility=tuple(Visibility(system, _weighted_mean(rows), tuple(row["source_spread_ms"] for row in rows))
                         for system, rows in visibility.items()),
        metadata=tuple(Metadata(row["system"], row["formula_bytes"], row["wire_bytes"], row["payload_bytes"] or 16.0)
                       for row in paper.get("metadata", [])),
        communication=communication)


def _weighted_mean(rows: Iterable[Mapping[str, Any]]) -> float:
    rows = list(rows)
    count = sum(row["count"] for row in rows)
    return sum(row["mean_ms"] * row["count"] for row in rows) / count if count else 0.0


# ------------------------------------------------------------------------------ the simulator


def load_simulated(folder: Path) -> dict[str, dict[str, Any]]:
    """The simulated results under ``folder`` by experiment name (absent ones left out)."""
    found: dict[str, dict[str, Any]] = {}
    for name in (*EXPERIMENTS, FIVE_DC_TRAFFIC):
        path = folder / name / "results.json"
        if path.is_file():
            found[name] = json.loads(path.read_text(encoding="utf-8"))
    return found


def cost_model(results: Mapping[str, Mapping[str, Any]]) -> str:
    """The cost model simulated experiments ran under, in words: the profile and what a blocked
    request costs (``okapikv.sim.cost``: ``free``, or ``thread`` with its threads and wakes); the
    experiments of one folder share one model, or it says which differ."""
    models = sorted({_model((data.get("config") or {}).get("cost_profile") or {}) for data in results.values()})
    return " / ".join(models) or "no simulated results"


def _model(profile: Mapping[str, Any]) -> str:
    name = profile.get("name", "?")
    if profile.get("blocking") != "thread":
        return f"profile {name}, blocking free (a parked request costs nothing while it waits)"
    wakes = (f", a blocked one waking every {profile['poll_ms']:g} ms for {profile['wake_us']:g} us of CPU"
             if profile.get("wake_us") else "")
    return f"profile {name}, blocking thread ({profile.get('threads')} threads per server{wakes})"


def source_spreads(pairs: Iterable[Mapping[str, Any]]) -> list[float]:
    """Per destination DC, the distance between its sources' median visibility (ms): two modes when
    the sources are far apart, the measure ``paper_figures`` uses for real runs."""
    medians: dict[str, list[float]] = {}
    for pair in pairs:
        medians.setdefault(pair["destination"], []).append(pair["p50_ms"])
    return [max(values) - min(values) for _, values in sorted(medians.items()) if len(values) > 1]


def _every_run(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [run for series in data.get("series", {}).values() for run in series.get("runs", [])]


def _runs(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The runs that measured a steady state: a sweep step marked ``steady: False`` measured a
    transient, which ended its sweep (``okapikv.sim.experiments.steady``), and measures nothing."""
    return [run for run in _every_run(data) if run.get("steady") is not False]


def _untrusted(data: Mapping[str, Any]) -> str | None:
    """Why an experiment's runs cannot carry a verdict, or None: a window shorter than
    ``WINDOW_CYCLES`` GentleRain cycles, or runs without their servers' CPU spread (made before the
    paper workload chose partitions uniformly: one hot server may set every figure)."""
    if not data:
        return None
    config = data.get("config", {})
    window = float(config.get("duration_s", 0.0)) - float(config.get("warmup_s", 0.0))
    cycle = gentlerain_cycle_s(int(config.get("dcs", 3)))
    if window < WINDOW_CYCLES * cycle:
        return (f"a {window:g} s window holds {window / cycle:.1f} GentleRain cycles ({cycle * 1000:g} ms), "
                f"fewer than {WINDOW_CYCLES}")
    if any((run.get("cpu") or {}).get("server_busy_max") is None for run in _runs(data)):
        return "runs without their servers' CPU spread (a hot server cannot be ruled out)"
    return None


def at_sweep_top(run: Mapping[str, Any], steps: int = MAX_SWEEP_STEPS, start: int = 1) -> bool:
    """The run is its sweep's last possible step (``steps`` steps, each doubling the clients, from
    ``start`` clients per partition of each DC, ``okapikv.sim.experiments.sweep_start``): its peak
    may lie beyond."""
    return bool(run["clients"] >= run["partitions"] * run.get("dcs", 3) * start * 2 ** (steps - 1))


def _latency_ms(run: Mapping[str, Any] | None, kind: str) -> float | None:
    latency = (run or {}).get("latency_us", {}).get(kind)
    return latency["mean_us"] / 1000 if latency and latency.get("count") else None


def _peak(run: Mapping[str, Any], key: str, lower_bound: bool) -> Peak:
    cpu = run.get("cpu") or {}
    waits = run.get("waits") or {}
    skew, tick = wait_of_cause(waits, "write_skew"), wait_of_cause(waits, "write_tick")
    return Peak(run["system"], run[key], float(run["throughput_ops_s"]), run["clients"], _latency_ms(run, "rotx"),
                _latency_ms(run, "put"), lower_bound, cpu.get("server_busy_max"), cpu.get("server_busy_median"),
                None if skew is None else skew["probability"], None if tick is None else tick["probability"])


def _best(runs: Iterable[dict[str, Any]], key: str) -> dict[tuple[str, Any], dict[str, Any]]:
    best: dict[tuple[str, Any], dict[str, Any]] = {}
    for run in runs:
        at = (run["system"], run[key])
        if at not in best or run["throughput_ops_s"] > best[at]["throughput_ops_s"]:
            best[at] = run
    return best


def _window(data: Mapping[str, Any]) -> tuple[float | None, float | None]:
    config = data.get("config", {})
    if "duration_s" not in config:
        return None, None
    warmup = float(config.get("warmup_s", 0.0))
    return round(float(config["duration_s"]) - warmup, 6), warmup


def _sim_sweep(data: Mapping[str, Any], key: str) -> Sweep:
    """Each point's peak: the steady run of highest throughput of its sweep, a lower bound when it is
    the sweep's last step, or its last steady one, and still growing there (5% or more over the step
    below: the sweep's own rule for a flat step, ``okapikv.sim.experiments.PEAK_GROWTH``). The step
    below is read from the peak's ``sweep`` (every steady step's clients and throughput), or from the
    runs kept beside it."""
    runs = _runs(data)
    steps = int(data.get("config", {}).get("sweep_steps", 6))
    starts = data.get("config", {}).get("sweep_start", {})
    unsteady = {(run["system"], run[key]) for run in _every_run(data) if run.get("steady") is False}
    peaks = []
    for (system, value), run in sorted(_best(runs, key).items()):
        below = sorted(([clients, ops] for clients, ops in run["sweep"] if clients < run["clients"])
                       if "sweep" in run else
                       ([r["clients"], r["throughput_ops_s"]] for r in runs
                        if r["system"] == system and r[key] == value and r["clients"] < run["clients"]))
        growing = not below or run["throughput_ops_s"] >= below[-1][1] * (1 + PEAK_GROWTH)
        above = [r for r in runs if r["system"] == system and r[key] == value and r["clients"] > run["clients"]]
        # the sweep ended after the peak on a step out of a steady state: its capacity lies beyond
        last = "sweep" in run and run["clients"] >= max(clients for clients, _ in run["sweep"])
        ended = ("unsteady" in run and last) or (not above and (system, value) in unsteady)
        peaks.append(_peak(run, key, (at_sweep_top(run, steps, int(starts.get(system, 1))) or ended) and growing))
    window, warmup = _window(data)
    return Sweep(key, tuple(peaks), window_s=window, warmup_s=warmup, untrusted=_untrusted(data))


def _sim_fixed(data: Mapping[str, Any], key: str) -> Sweep:
    window, warmup = _window(data)
    return Sweep(key, tuple(_peak(run, key, False) for run in _runs(data)), at_peak=False, window_s=window,
                 warmup_s=warmup, fixed_load=data.get("config", {}).get("clients_per_partition"),
                 untrusted=_untrusted(data))


def _sim_stall(run: Mapping[str, Any]) -> RotxStall:
    waits = run.get("waits", {})
    tx = waits.get("rotx_tx") if waits.get("rotx_tx", {}).get("operations") else None
    part = waits.get("rotx")
    return RotxStall(run["system"], run["rotx_partitions"], tx and tx["probability"], tx and tx["mean_us"] / 1000,
                     part and part["probability"], part and part["mean_us"] / 1000)


def _bytes_per_op(run: Mapping[str, Any]) -> float | None:
    """Stabilization (heartbeats included) and replication bytes per client operation."""
    if not run.get("traffic") or not run["throughput_ops_s"]:
        return None
    traffic = run["traffic"]
    return float(traffic["stabilization_bytes_per_s"] + traffic["heartbeat_bytes_per_s"]
                 + traffic["replication_bytes_per_s"]) / float(run["throughput_ops_s"])


def _traffic(data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {run["system"]: run for run in _runs(data) if run.get("traffic")}


def from_simulated(results: Mapping[str, Mapping[str, Any]]) -> Measurements:
    """The measurements of the simulated experiments (``load_simulated``; module docstring)."""
    fig4 = results.get("fig4", {})
    rotx = _sim_sweep(fig4, "rotx_partitions")
    first = first_steps(_runs(fig4), "gentlerain")
    best = _best(_runs(fig4), "rotx_partitions")
    stalls_below, stalls_below_what = _stalls_below(_runs(fig4), "clients")
    below = [(p, _sim_stall(run)) for p, run in first.items()]
    dcs = int(fig4.get("config", {}).get("dcs", 3))
    matrix = wan_matrix_ms(dcs)
    skew = float(_runs(fig4)[0].get("clock_skew_ms") or 0.0) if _runs(fig4) else 0.0
    visibility = results.get("visibility", {}).get("visibility", {})
    traffic = _traffic(results.get("traffic", {}))
    five = _traffic(results.get(FIVE_DC_TRAFFIC, {}))
    writes = results.get("write-ratio", {})
    communication = tuple(
        Communication(run["system"], run["write_ratio"],
                      float((run.get("traffic") or {}).get("stabilization_bytes_per_s", 0.0)), _bytes_per_op(run))
        for run in _runs(writes))
    return Measurements(
        SIMULATED, _sim_sweep(results.get("fig3", {}), "partitions"), rotx, _sim_fixed(writes, "write_ratio"),
        rotx_latency=equal_throughput(_runs(fig4)),
        rotx_latency_what="every steady step of the fig4 sweeps up to each system's peak",
        rotx_stalls=tuple(_sim_stall(run) for run in best.values()),
        stalls_below=stalls_below, stalls_below_what=stalls_below_what,
        one_skew=f"under offsets uniform in [0, {skew:g}] ms per server",
        gentlerain_below=tuple(Wait(f"p={p}", *((s.tx_probability, s.tx_mean_ms) if s.tx_probability is not None
                                               else (s.slice_probability, s.slice_mean_ms))) for p, s in below),
        below_what="each p's first sweep step",
        furthest_ms=tuple((name, max(matrix[i])) for i, name in enumerate(dc_names(dcs))) if first else (),
        visibility=tuple(Visibility(system, _weighted_mean(pairs), tuple(source_spreads(pairs)))
                         for system, pairs in visibility.items() if pairs),
        visibility_untrusted=_untrusted(results.get("visibility", {})),
        metadata=tuple(Metadata(system, run["traffic"]["metadata_bytes_per_update"], None, 16.0)
                       for system, run in traffic.items()),
        metadata_other_dcs=(int(results[FIVE_DC_TRAFFIC]["config"].get("dcs", 5)),
                            tuple((system, float(run["traffic"]["metadata_bytes_per_update"]))
                                  for system, run in five.items())) if five else None,
        communication=communication, stabilization_unit="B/s without heartbeats",
        communication_untrusted=_untrusted(writes))
