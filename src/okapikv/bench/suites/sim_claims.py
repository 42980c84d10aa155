"""The paper's claims (``paper_claims``, rows 1..19) against the simulated experiments at its scale.

``okapi sim --experiment fig3|fig4|write-ratio|visibility|traffic`` writes results.json files under
docs/results/simulated/<experiment> (3 DCs x 32 partitions, the cost model; docs/simulated.md), and
docs/results/simulated/beyond/<name> beyond the paper (5 DCs, 64 partitions, okapi-piggyback).
``judge`` reads those and gives, for every row of ``paper_claims.claims`` in its order, what the
simulation measured and a verdict by a stated rule: ``reproduced`` (the direction and the size the
paper states), ``partly`` (the direction, not the size, or part of the claim), ``not`` (the
opposite), or ``n/a`` where the simulation cannot speak to the claim (the reason says why: the
experiment was not run, or the simulator does not model what the claim measures).

The rules are those of ``paper_claims`` (the same thresholds: ``EQUAL``, 30% ahead, 10x and 1.5x),
applied to simulated peaks: each point of fig3 and fig4 is a peak-throughput sweep
(``okapikv.sim.experiments``), its peak the sweep's run of highest throughput. Simulated runs are
deterministic and have the machines to themselves, so a ratio within ``EQUAL`` of 1 is a tie of
the model, not noise. Write-ratio, visibility and traffic run at a fixed load (8 clients per
partition of each DC), not at each system's peak.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from okapikv.bench.suites.paper_claims import (
    EQUAL,
    NOT,
    PARTLY,
    REPRODUCED,
    SYSTEMS,
    _listing,
    _ms,
    _pct,
    _ratio,
    _span,
    _x,
)
from okapikv.sim.config import dc_names, wan_matrix_ms
from okapikv.sim.experiments import MAX_SWEEP_STEPS

#: the simulation cannot speak to the claim (the reason says why)
SILENT = "n/a"
EXPERIMENTS = ("fig3", "fig4", "write-ratio", "visibility", "traffic")
#: beyond the paper: traffic at 5 DCs, the other DC count of the metadata claim
FIVE_DC_TRAFFIC = "beyond/traffic-5dc"


@dataclass(frozen=True, slots=True)
class SimClaim:
    """What the simulation measured for one claim of ``paper_claims``, and the verdict."""

    topic: str
    measured: str
    verdict: str
    why: str

    def cell(self) -> str:
        """The claim's cell in docs/paper.md's "simulated at the paper's scale" column."""
        return f"{self.measured}; **{self.verdict}**: {self.why}"


def load(folder: Path) -> dict[str, dict[str, Any]]:
    """The simulated results under ``folder`` by experiment name (absent ones left out)."""
    found: dict[str, dict[str, Any]] = {}
    for name in (*EXPERIMENTS, FIVE_DC_TRAFFIC):
        path = folder / name / "results.json"
        if path.is_file():
            found[name] = json.loads(path.read_text(encoding="utf-8"))
    return found


class _Sim:
    """Lookups into the simulated results (``load``)."""

    def __init__(self, results: dict[str, dict[str, Any]]) -> None:
        self.results = results

    def runs(self, experiment: str) -> list[dict[str, Any]]:
        data = self.results.get(experiment, {})
        return [run for series in data.get("series", {}).values() for run in series.get("runs", [])]

    def peaks(self, experiment: str, key: str) -> dict[tuple[str, Any], dict[str, Any]]:
        """The run of highest throughput per (system, ``key``'s value)."""
        best: dict[tuple[str, Any], dict[str, Any]] = {}
        for run in self.runs(experiment):
            at = (run["system"], run[key])
            if at not in best or run["throughput_ops_s"] > best[at]["throughput_ops_s"]:
                best[at] = run
        return best

    def steps(self, experiment: str) -> int:
        """The experiment's sweep steps at most (a results.json without ``sweep_steps`` ran 6)."""
        return int(self.results.get(experiment, {}).get("config", {}).get("sweep_steps", 6))

    def levels(self, experiment: str, key: str) -> list[Any]:
        return sorted({run[key] for run in self.runs(experiment)})

    def fixed(self, experiment: str, key: str) -> dict[tuple[str, Any], dict[str, Any]]:
        return {(run["system"], run[key]): run for run in self.runs(experiment)}


def at_sweep_top(run: dict[str, Any], steps: int = MAX_SWEEP_STEPS) -> bool:
    """The run is its sweep's last possible step (``steps`` steps, each doubling the clients, from one
    client per partition of each DC): its peak may lie beyond."""
    return bool(run["clients"] >= run["partitions"] * run.get("dcs", 3) * 2 ** (steps - 1))


def _topped(sim: _Sim, experiment: str, key: str, peaks: dict[tuple[str, Any], dict[str, Any]]) -> str:
    """What the measured figure says of the peaks at their sweep's last step that the growth rule did
    not stop there (where the series keeps every step; fig3 keeps only the peak, so there it may)."""
    steps = sim.steps(experiment)
    top = []
    for (system, value), run in sorted(peaks.items()):
        below = sorted((r for r in sim.runs(experiment) if r["system"] == system and r[key] == value
                        and r["clients"] < run["clients"]), key=lambda r: r["clients"])
        still_growing = not below or run["throughput_ops_s"] >= below[-1]["throughput_ops_s"] * 1.05
        if at_sweep_top(run, steps) and still_growing:
            top.append(f"{system} at {value}")
    return f" (peaks at the sweep's last step, {steps} steps, so possibly below the peak: {', '.join(top)})" if top \
        else ""


def _throughput(run: dict[str, Any] | None) -> float | None:
    return None if run is None else float(run["throughput_ops_s"])


def _latency_ms(run: dict[str, Any] | None, kind: str) -> float | None:
    latency = (run or {}).get("latency_us", {}).get(kind)
    return latency["mean_us"] / 1000 if latency and latency.get("count") else None


def _stall(run: dict[str, Any] | None) -> tuple[float | None, float | None, str]:
    """A RO-TX's stall probability and mean (ms): per transaction where the servers count it, else
    per slice (the figure each server counts for the slices it serves)."""
    waits = (run or {}).get("waits", {})
    if waits.get("rotx_tx", {}).get("operations"):
        wait = waits["rotx_tx"]
        return wait["probability"], wait["mean_us"] / 1000, "per transaction"
    wait = waits.get("rotx")
    if not wait:
        return None, None, "per slice"
    return wait["probability"], wait["mean_us"] / 1000, "per slice"


def _missing(topic: str, experiment: str) -> SimClaim:
    return SimClaim(topic, "-", SILENT, f"no simulated {experiment} results")


def _throughput_rule(sim: _Sim, experiment: str, key: str, label: str, topic: str, *,
                     gentlerain_upto: float | None = None) -> SimClaim:
    peaks = sim.peaks(experiment, key)
    if not peaks:
        return _missing(topic, experiment)
    levels = sim.levels(experiment, key)
    cure = [(v, _ratio(_throughput(peaks.get(("okapi", v))), _throughput(peaks.get(("cure", v))))) for v in levels]
    gr = [(v, _ratio(_throughput(peaks.get(("okapi", v))), _throughput(peaks.get(("gentlerain", v)))))
          for v in levels if gentlerain_upto is None or v <= gentlerain_upto]
    known_cure = [r for _, r in cure if r is not None]
    known_gr = [r for _, r in gr if r is not None]
    if not known_cure or not known_gr:
        return SimClaim(topic, "-", SILENT, "the simulated results lack a system's peaks")
    measured = (f"Okapi / Cure {_listing(cure, label)}; Okapi / GentleRain {_listing(gr, label)}"
                f"{_topped(sim, experiment, key, peaks)}")
    cure_ok = all(r >= 1 - EQUAL for r in known_cure)
    gr_ok = all(r >= 1.3 for r in known_gr) if gentlerain_upto is None else max(known_gr) >= 1.3
    gr_ahead = all(r > 1 + EQUAL for r in known_gr)
    if cure_ok and gr_ok and gr_ahead:
        return SimClaim(topic, measured, REPRODUCED, "Okapi at or above Cure (within 5%) everywhere and clearly "
                        "above GentleRain (30% or more" + (" at some p)" if gentlerain_upto else ")"))
    if cure_ok or gr_ahead:
        behind = [f"{label}{v:g}" for v, r in cure if r is not None and r < 1 - EQUAL]
        cure_part = "at or above Cure (within 5%) everywhere" if cure_ok else f"behind Cure at {', '.join(behind)}"
        gr_part = ("30% or more above GentleRain" + (" at some p" if gentlerain_upto else " everywhere")
                   if gr_ok else "above GentleRain everywhere, by less than 30%" if gr_ahead
                   else "not above GentleRain everywhere")
        return SimClaim(topic, measured, PARTLY, f"{cure_part}; {gr_part}")
    return SimClaim(topic, measured, NOT, "Okapi behind Cure and not above GentleRain at some point")


def _latency_rule(sim: _Sim) -> SimClaim:
    topic = "Fig. 3"
    peaks = sim.peaks("fig3", "partitions")
    if not peaks:
        return _missing(topic, "fig3")
    rows, gr, cure = [], [], []
    for n in sim.levels("fig3", "partitions"):
        okapi = _latency_ms(peaks.get(("okapi", n)), "rotx")
        g = _ratio(_latency_ms(peaks.get(("gentlerain", n)), "rotx"), okapi)
        c = _ratio(_latency_ms(peaks.get(("cure", n)), "rotx"), okapi)
        gr.append(g)
        cure.append(c)
        rows.append(f"n={n}: GentleRain {_x(g)}, Cure {_x(c)}")
    measured = "RO-TX mean at the peak over Okapi's: " + ", ".join(rows)
    best_gr = max((r for r in gr if r is not None), default=0.0)
    best_cure = max((r for r in cure if r is not None), default=0.0)
    if best_gr >= 10 and best_cure >= 1.5:
        return SimClaim(topic, measured, REPRODUCED, "10x and more against GentleRain, 1.5x or more against Cure")
    if best_gr > 1:
        return SimClaim(topic, measured, PARTLY, "GentleRain's RO-TX is slower (it waits for the furthest DC), "
                        "not 10x: at each system's peak the latency is mostly the servers' CPU queues, and the "
                        "peaks are at different loads; Cure's few-ms waits are small beside them")
    return SimClaim(topic, measured, NOT, "Okapi's RO-TX is not the fastest at the peak")


def _sessions_rule(sim: _Sim) -> SimClaim:
    topic = "Fig. 3"
    total = more_cure = more_gr = capped = 0
    for experiment, key in (("fig3", "partitions"), ("fig4", "rotx_partitions")):
        peaks = sim.peaks(experiment, key)
        for value in sim.levels(experiment, key):
            found = {s: peaks.get((s, value)) for s in SYSTEMS}
            if any(run is None for run in found.values()):
                continue
            clients = {s: run["clients"] for s, run in found.items() if run is not None}
            total += 1
            more_cure += clients["cure"] > clients["okapi"]
            more_gr += clients["gentlerain"] > clients["okapi"]
            capped += any(at_sweep_top(run, sim.steps(experiment)) for run in found.values() if run is not None)
    if not total:
        return SimClaim(topic, "-", SILENT, "no simulated peaks of all three systems")
    measured = (f"clients at the peak more than Okapi's at {more_cure} (Cure) and {more_gr} (GentleRain) of {total} "
                f"fig3/fig4 points; at {capped} of them a system peaks at its sweep's last step")
    if more_gr >= total * 0.75 and more_cure >= total / 2:
        return SimClaim(topic, measured, REPRODUCED, "at most points both need more clients")
    if more_gr >= total / 2 or more_cure >= total / 2:
        return SimClaim(topic, measured, PARTLY, "one of them needs more clients at most points")
    return SimClaim(topic, measured, NOT, "the three peak at the same client counts: the modelled CPU, "
                    "not the waiting, bounds each (a sweep doubles the clients, so small differences vanish)")


def _scaling_rule(sim: _Sim) -> SimClaim:
    topic = "Fig. 3"
    peaks = sim.peaks("fig3", "partitions")
    levels = sim.levels("fig3", "partitions")
    if len(levels) < 2:
        return _missing(topic, "fig3")
    low, high = levels[0], levels[-1]
    growth = {s: _ratio(_throughput(peaks.get((s, high))), _throughput(peaks.get((s, low)))) for s in SYSTEMS}
    measured = f"peak at {high} over {low} partitions per DC ({high // low}x the servers): " + ", ".join(
        f"{s} {_x(r)}" for s, r in growth.items())
    linear = high / low
    known = [r for r in growth.values() if r is not None]
    if known and all(r >= 0.75 * linear for r in known):
        return SimClaim(topic, measured, REPRODUCED, "every system within 75% of linear")
    if known and all(r > 1.5 for r in known):
        return SimClaim(topic, measured, PARTLY, "every system gains, less than linearly (where a peak is its "
                        "sweep's last step, row 1, the gain is a lower bound)")
    return SimClaim(topic, measured, NOT, "some system does not gain from added partitions")


def _rotx_latency_rule(sim: _Sim) -> SimClaim:
    topic = "Fig. 4-5"
    cells: dict[tuple[int, int], dict[str, float]] = {}
    for run in sim.runs("fig4"):
        latency = _latency_ms(run, "rotx")
        if latency is not None:
            cells.setdefault((run["rotx_partitions"], run["clients"]), {})[run["system"]] = latency
    full = [cell for cell in cells.values() if all(s in cell for s in SYSTEMS)]
    if not full:
        return _missing(topic, "fig4")
    gr = sum(c["gentlerain"] > c["okapi"] for c in full)
    cure = sum(c["cure"] > c["okapi"] for c in full)
    measured = (f"at the same p and clients ({len(full)} steps): GentleRain's RO-TX mean above Okapi's at {gr}, "
                f"Cure's at {cure}; GentleRain / Okapi {_span(c['gentlerain'] / c['okapi'] for c in full)}, "
                f"Cure / Okapi {_span(c['cure'] / c['okapi'] for c in full)}")
    if gr == len(full) and cure >= len(full) * 0.75:
        return SimClaim(topic, measured, REPRODUCED, "at (nearly) every load")
    if gr >= len(full) * 0.75:
        return SimClaim(topic, measured, PARTLY, "GentleRain: yes; Cure's waits (a few ms) do not show at every "
                        "load beside the queueing of saturated servers")
    return SimClaim(topic, measured, NOT, "Okapi's RO-TX is not the fastest at most loads")


def _cure_stall_rules(sim: _Sim) -> list[SimClaim]:
    topic = "Fig. 4"
    peaks = sim.peaks("fig4", "rotx_partitions")
    levels = sim.levels("fig4", "rotx_partitions")
    rows = [(p, *_stall(peaks.get(("cure", p)))) for p in levels]
    known = [(p, prob, mean, how) for p, prob, mean, how in rows if prob is not None]
    if len(known) < 2:
        return [_missing(topic, "fig4"), _missing(topic, "fig4")]
    how = known[0][3]
    probabilities = [prob for _, prob, _, _ in known]
    measured = f"{how} at each p's peak: " + ", ".join(f"p={p}: {_pct(prob)}" for p, prob, _, _ in known)
    rising = all(b >= a for a, b in zip(probabilities, probabilities[1:], strict=False))
    grows = probabilities[-1] > probabilities[0]
    first = SimClaim(topic, measured, REPRODUCED if rising and grows else PARTLY if grows else NOT,
                     "grows with p at every step" if rising and grows else
                     "higher at the largest p than at 1, not at every step (each p is its own peak, at its own "
                     "load)" if grows else
                     "does not grow with p: the probability is " + how + (", and a RO-TX over more partitions "
                     "spreads over more servers whose clocks differ less from their DC's slowest" if how ==
                     "per slice" else ""))
    means = [mean for _, prob, mean, _ in known if prob and mean]
    skew = _skew_ms(sim)
    if not means:
        return [first, SimClaim(topic, "no Cure stalls", NOT, "Cure never stalled")]
    measured = f"mean stall {how} {_span(means, _ms)} under offsets uniform in [0, {skew:g}] ms per server"
    if min(means) >= 5 and max(means) <= 10:
        second = SimClaim(topic, measured, REPRODUCED, "within 5-10 ms")
    else:
        second = SimClaim(topic, measured, PARTLY, "Cure stalls for milliseconds, not within 5-10 ms at every p: "
                          "a stall lasts about the offset between two servers' clocks, which for offsets "
                          "uniform in [0, X] ms averages X / 3")
    return [first, second]


def _skew_ms(sim: _Sim) -> float:
    runs = sim.runs("fig4")
    return float(runs[0].get("clock_skew_ms") or 0.0) if runs else 0.0


def _gentlerain_stall_rule(sim: _Sim) -> SimClaim:
    topic = "Fig. 4"
    peaks = sim.peaks("fig4", "rotx_partitions")
    known = [(p, *_stall(peaks.get(("gentlerain", p)))) for p in sim.levels("fig4", "rotx_partitions")]
    known = [row for row in known if row[1] is not None]
    if not known:
        return _missing(topic, "fig4")
    dcs = int(sim.results["fig4"]["config"].get("dcs", 3))
    matrix = wan_matrix_ms(dcs)
    furthest = {name: max(matrix[i]) for i, name in enumerate(dc_names(dcs))}
    measured = ", ".join(f"p={p}: {_pct(prob)} for {_ms(mean)}" for p, prob, mean, _ in known) + \
        f" ({known[0][3]}); furthest DC one-way: " + ", ".join(f"{dc} {d:g} ms" for dc, d in furthest.items())
    always = all((prob or 0) >= 0.95 for _, prob, _, _ in known)
    near = all(min(furthest.values()) * 0.8 <= (mean or 0) <= max(furthest.values()) * 1.5 + 10
               for _, _, mean, _ in known)
    if always and near:
        return SimClaim(topic, measured, REPRODUCED, "every RO-TX waits, about the furthest DC's delay plus "
                        "stabilization")
    if near:
        return SimClaim(topic, measured, PARTLY, "the wait is about the furthest DC's delay, but not every RO-TX "
                        "waits: a RO-TX reads at once when its DC's stable time covers its session's last write")
    return SimClaim(topic, measured, PARTLY if always else NOT,
                    "it always waits, but not about the furthest DC's delay" if always else
                    "not every RO-TX waits, and not about the furthest DC's delay")


def _write_ratio_rules(sim: _Sim) -> list[SimClaim]:
    topic = "writes"
    runs = sim.fixed("write-ratio", "write_ratio")
    ratios = sim.levels("write-ratio", "write_ratio")
    if len(ratios) < 2:
        return [_missing(topic, "write-ratio"), _missing(topic, "write-ratio")]
    cure = [(w, _ratio(_throughput(runs.get(("okapi", w))), _throughput(runs.get(("cure", w))))) for w in ratios]
    stalls = [((runs.get(("cure", w)) or {}).get("waits", {}).get("write") or {}).get("probability") for w in ratios]
    known = [(w, r) for w, r in cure if r is not None]
    claims = []
    if len(known) < 2:
        claims.append(SimClaim(topic, "-", SILENT, "no Cure and Okapi runs at two write ratios"))
    else:
        measured = (f"at a fixed load: Okapi / Cure {_listing(known, 'w=')}; Cure's PUTs stalled "
                    + ", ".join(f"w={w:g}: {_pct(s)}" for w, s in zip(ratios, stalls, strict=True)))
        above = all(r >= 1 - EQUAL for _, r in known)
        widening = known[-1][1] > known[0][1] + EQUAL
        verdict = REPRODUCED if above and widening else PARTLY if above or widening else NOT
        claims.append(SimClaim(topic, measured, verdict,
                               "at or above Cure and widening with writes" if verdict == REPRODUCED else
                               "at or above Cure, the gap not widening: at this fixed load below the peak a "
                               "blocked PUT costs its client time, not the servers' capacity (parked, "
                               "`blocking: free`)" if above else
                               "widening, not above Cure everywhere" if verdict == PARTLY else
                               "Cure is ahead and the gap does not widen"))
    gr = [(w, r) for w in ratios
          if (r := _ratio(_throughput(runs.get(("okapi", w))), _throughput(runs.get(("gentlerain", w)))))
          is not None]
    if not gr:
        claims.append(SimClaim(topic, "-", SILENT, "no GentleRain runs"))
    else:
        verdict = REPRODUCED if gr[0][1] >= 0.9 else NOT
        claims.append(SimClaim(topic, f"at a fixed load: Okapi / GentleRain {_listing(gr, 'w=')}", verdict,
                               "Okapi within 10% of GentleRain or ahead at the most read-heavy ratio"
                               if verdict == REPRODUCED else
                               "Okapi more than 10% behind at the most read-heavy ratio"))
    return claims


def _visibility_rules(sim: _Sim) -> list[SimClaim]:
    topic = "visibility"
    visibility = sim.results.get("visibility", {}).get("visibility", {})
    if not all(visibility.get(s) for s in SYSTEMS):
        return [_missing(topic, "visibility"), _missing(topic, "visibility")]

    def mean(system: str) -> float:
        pairs = visibility[system]
        count = sum(pair["count"] for pair in pairs)
        return sum(pair["mean_ms"] * pair["count"] for pair in pairs) / count if count else 0.0

    means = {s: mean(s) for s in SYSTEMS}
    order = sorted(SYSTEMS, key=lambda s: -means[s])
    verdict = REPRODUCED if order == list(SYSTEMS) else PARTLY if order[0] == "okapi" else NOT
    claims = [SimClaim(topic, "mean over every pair: " + ", ".join(f"{s} {_ms(v)}" for s, v in means.items()),
                       verdict, "Okapi > Cure > GentleRain" if verdict == REPRODUCED else
                       "Okapi is the highest; Cure and GentleRain swap" if verdict == PARTLY else
                       "Okapi is not the highest")]
    spreads = {s: source_spreads(visibility[s]) for s in SYSTEMS}
    measured = "distance between the sources' medians at each destination: " + "; ".join(
        f"{s} {', '.join(f'{v:.0f}' for v in values)} ms" for s, values in spreads.items())
    widest = {s: max(values, default=0.0) for s, values in spreads.items()}
    if widest["okapi"] > widest["gentlerain"] and widest["cure"] > widest["gentlerain"]:
        verdict, why = REPRODUCED, "Okapi's and Cure's modes lie further apart than GentleRain's"
    elif widest["okapi"] > widest["gentlerain"] or widest["cure"] > widest["gentlerain"]:
        verdict, why = PARTLY, "one of Okapi and Cure separates its sources more than GentleRain does"
    else:
        verdict, why = NOT, "GentleRain's sources are as far apart as the others'"
    claims.append(SimClaim(topic, measured, verdict, why))
    return claims


def source_spreads(pairs: Iterable[dict[str, Any]]) -> list[float]:
    """Per destination DC, the distance between its sources' median visibility (ms): two modes when
    the sources are far apart, the measure ``paper_figures`` uses for real runs."""
    medians: dict[str, list[float]] = {}
    for pair in pairs:
        medians.setdefault(pair["destination"], []).append(pair["p50_ms"])
    return [max(values) - min(values) for _, values in sorted(medians.items()) if len(values) > 1]


def _traffic(sim: _Sim, experiment: str) -> dict[str, dict[str, Any]]:
    return {run["system"]: run for run in sim.runs(experiment) if run.get("traffic")}


def _metadata_rules(sim: _Sim) -> list[SimClaim]:
    topic = "metadata"
    runs = _traffic(sim, "traffic")
    if not all(s in runs for s in SYSTEMS):
        return [_missing(topic, "traffic")] * 3
    meta = {s: runs[s]["traffic"]["metadata_bytes_per_update"] for s in SYSTEMS}
    measured = "the servers' counters (the formula; the simulator encodes no wire): " + ", ".join(
        f"{s} {meta[s]:g} B" for s in SYSTEMS)
    same = abs(meta["okapi"] - meta["gentlerain"]) < 1
    double = meta["cure"] >= 2 * meta["okapi"]
    claims = [SimClaim(topic, measured, REPRODUCED if same and double else PARTLY,
                       "Okapi's equal to GentleRain's, Cure's more than twice" if same and double else
                       "the ratio differs from the paper's")]
    ratio = (meta["cure"] + 16) / (meta["okapi"] + 16)
    claims.append(SimClaim(topic, f"with 16 B of key and value: x{ratio:.2f}", REPRODUCED if ratio >= 1.4 else PARTLY,
                           "Cure's update with its payload is half again as large or more" if ratio >= 1.4 else
                           "Cure's update is larger, by less than the paper says"))
    five = _traffic(sim, FIVE_DC_TRAFFIC)
    if not five:
        claims.append(SimClaim(topic, "-", SILENT, "no simulated traffic at another DC count"))
        return claims
    dcs = sim.results[FIVE_DC_TRAFFIC]["config"].get("dcs")
    more = {s: five[s]["traffic"]["metadata_bytes_per_update"] for s in five}
    measured = f"per update at 3 / {dcs} DCs: " + ", ".join(f"{s} {meta[s]:g} / {more[s]:g} B" for s in more
                                                              if s in meta)
    flat = all(abs(more[s] - meta[s]) < 1 for s in ("okapi", "gentlerain") if s in more)
    grows = "cure" in more and more["cure"] > meta["cure"]
    claims.append(SimClaim(topic, measured, REPRODUCED if flat and grows else PARTLY if flat or grows else NOT,
                           "Okapi's and GentleRain's the same, Cure's an entry (8 B) more per added DC"
                           if flat and grows else "one of the two holds" if flat or grows else "neither holds"))
    return claims


def _bytes_per_op(run: dict[str, Any] | None) -> tuple[float | None, float | None]:
    """Stabilization (heartbeats included, as ``paper_figures`` counts it) and total bytes per client
    operation: the servers' byte rates over the throughput."""
    if not run or not run.get("traffic") or not run["throughput_ops_s"]:
        return None, None
    traffic, ops = run["traffic"], run["throughput_ops_s"]
    stabilization = traffic["stabilization_bytes_per_s"] + traffic["heartbeat_bytes_per_s"]
    return stabilization / ops, (stabilization + traffic["replication_bytes_per_s"]) / ops


def _communication_rules(sim: _Sim) -> list[SimClaim]:
    topic = "communication"
    runs = sim.fixed("write-ratio", "write_ratio")
    ratios = [w for w in sim.levels("write-ratio", "write_ratio") if all((s, w) in runs for s in SYSTEMS)]
    if not ratios:
        return [_missing(topic, "write-ratio")] * 3
    stab = {w: {s: _bytes_per_op(runs[(s, w)])[0] or 0.0 for s in SYSTEMS} for w in ratios}
    measured = "stabilization B/op (heartbeats included) " + "; ".join(
        f"w={w:g}: " + ", ".join(f"{s} {v:,.0f}" for s, v in row.items()) for w, row in stab.items())
    costlier = all(row["okapi"] > max(row["cure"], row["gentlerain"]) for row in stab.values())
    heartbeats = {s: _heartbeat_share([runs[(s, w)] for w in ratios]) for s in SYSTEMS}
    measured += "; heartbeats' share of it " + ", ".join(f"{s} {_pct(v)}" for s, v in heartbeats.items())
    above_cure = all(row["okapi"] > row["cure"] for row in stab.values())
    claims = [SimClaim(topic, measured, REPRODUCED if costlier else PARTLY,
                       "Okapi's the highest at every write ratio" if costlier else
                       "Okapi's above Cure's at every ratio, GentleRain's per operation above both: at this fixed "
                       "load GentleRain completes fewer operations, over which its timers' bytes spread"
                       if above_cure else "not the highest at every ratio")]
    low, high = ratios[0], ratios[-1]
    share = {w: _ratio(_bytes_per_op(runs[("okapi", w)])[1], _bytes_per_op(runs[("cure", w)])[1]) for w in (low, high)}
    at_low, at_high = share[low], share[high]
    falls = at_low is not None and at_high is not None and at_high < at_low
    below = at_high is not None and at_high < 1
    claims.append(SimClaim(topic, "total B/op Okapi / Cure " + ", ".join(f"w={w:g}: {_x(r)}" for w, r in share.items()),
                           REPRODUCED if falls and below else PARTLY if falls or below else NOT,
                           "Okapi's share falls with the write ratio and ends below Cure's" if falls and below else
                           "only one of the two holds" if falls or below else
                           "Okapi's stabilization dominates at every write ratio"))
    lowest = [w for w in ratios if stab[w]["gentlerain"] <= min(stab[w]["okapi"], stab[w]["cure"])]
    rate = {w: {s: _stabilization_rate(runs[(s, w)]) for s in SYSTEMS} for w in ratios}
    per_second = [w for w in ratios if rate[w]["gentlerain"] <= min(rate[w]["okapi"], rate[w]["cure"])]
    measured = (f"GentleRain's stabilization B/op the lowest at {len(lowest)} of {len(ratios)} write ratios, its B/s "
                f"at {len(per_second)} (" + ", ".join(f"w={w:g}: " + " / ".join(f"{rate[w][s]:,.0f}" for s in SYSTEMS)
                                                      for w in (low, high)) + " B/s, Okapi / Cure / GentleRain)")
    if len(lowest) == len(ratios):
        verdict, why = REPRODUCED, "the lowest per operation everywhere"
    elif len(lowest) * 2 > len(ratios) or len(per_second) * 2 > len(ratios):
        verdict, why = PARTLY, ("the lowest per operation at most ratios" if len(lowest) * 2 > len(ratios) else
                                "the lowest bytes per second, not per operation: at this fixed load GentleRain "
                                "completes fewer operations (its RO-TXs wait for the furthest DC), over which its "
                                "timers' bytes spread")
    else:
        verdict, why = NOT, "neither per operation nor per second the lowest at most ratios"
    claims.append(SimClaim(topic, measured, verdict, why))
    return claims


def _stabilization_rate(run: dict[str, Any]) -> float:
    traffic = run.get("traffic") or {}
    return float(traffic.get("stabilization_bytes_per_s", 0.0) + traffic.get("heartbeat_bytes_per_s", 0.0))


def _heartbeat_share(runs: list[dict[str, Any]]) -> float | None:
    total = sum(_stabilization_rate(run) for run in runs)
    return sum((run.get("traffic") or {}).get("heartbeat_bytes_per_s", 0.0) for run in runs) / total if total else None


def judge(results: dict[str, dict[str, Any]]) -> list[SimClaim]:
    """One ``SimClaim`` per row of ``paper_claims.claims``, in its order (a test checks the topics)."""
    sim = _Sim(results)
    rows = [_throughput_rule(sim, "fig3", "partitions", "n=", "Fig. 3"), _latency_rule(sim), _sessions_rule(sim),
            _scaling_rule(sim),
            _throughput_rule(sim, "fig4", "rotx_partitions", "p=", "Fig. 4", gentlerain_upto=8),
            _rotx_latency_rule(sim)]
    rows += _cure_stall_rules(sim)
    rows.append(_gentlerain_stall_rule(sim))
    rows += _write_ratio_rules(sim)
    rows += _visibility_rules(sim)
    rows += _metadata_rules(sim)
    rows += _communication_rules(sim)
    return rows
