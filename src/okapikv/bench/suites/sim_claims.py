"""The paper's claims (``paper_claims``, rows 1..19) against the simulated experiments at its scale.

``okapi sim --experiment fig3|fig4|write-ratio|visibility|traffic`` writes results.json files under
docs/results/simulated/<experiment> (3 DCs x 32 partitions, the cost model; docs/simulated.md), and
docs/results/simulated/beyond/<name> beyond the paper (5 DCs, 64 partitions, okapi-piggyback).
``judge`` reads those and gives, for every row of ``paper_claims.claims`` in its order, what the
simulation measured and a verdict by the same rule functions the real measurements are judged by
(``paper_claims.throughput_verdict``, ``latency_verdict``, ``considerably_verdict``,
``gentlerain_wait_verdict``, ``write_ratio_verdict``, ``comparable_verdict``,
``visibility_order_verdict``, with the paper's sizes as bounds), or ``n/a`` where the simulation
cannot speak to the claim, ``by construction`` where its figure is the claim's formula (the
metadata rows), and ``inconclusive`` where its runs cannot carry a verdict: a window shorter than
``WINDOW_CYCLES`` GentleRain cycles, runs without their servers' CPU spread (made before the paper
workload chose partitions uniformly), a peak at its sweep's last step still growing, or a peak set
by one hot server (``HOT_SERVER_SPREAD``, ``SATURATED``).

Each point of fig3 and fig4 is a peak-throughput sweep (``okapikv.sim.experiments``), its peak the
sweep's run of highest throughput. Simulated runs are deterministic and have the machines to
themselves, so a ratio within ``EQUAL`` of 1 is a tie of the model, not noise. Write-ratio,
visibility and traffic run at a fixed load (8 clients per partition of each DC), not at each
system's peak. Waits and bytes are the servers' counters inside the measurement window.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from okapikv.bench.engine.stats import wait_of_cause
from okapikv.bench.suites.paper_claims import (
    BY_CONSTRUCTION,
    INCONCLUSIVE,
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
    comparable_verdict,
    considerably_verdict,
    gentlerain_wait_verdict,
    latency_verdict,
    throughput_verdict,
    visibility_order_verdict,
    write_ratio_verdict,
)
from okapikv.sim.config import dc_names, wan_matrix_ms
from okapikv.sim.experiments import MAX_SWEEP_STEPS, WINDOW_CYCLES, gentlerain_cycle_s

#: the simulation cannot speak to the claim (the reason says why)
SILENT = "n/a"
#: a peak whose busiest server is saturated (``SATURATED`` of its cores or more) while its CPU share
#: exceeds the median server's by this factor is one hot server's, not the deployment's: no verdict
#: from it. Below saturation a spread is no bottleneck (GentleRain's servers in the DC nearest the
#: others complete more RO-TXs, as the paper's would)
HOT_SERVER_SPREAD = 1.3
SATURATED = 0.9
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

    def untrusted(self, experiment: str) -> str | None:
        """Why ``experiment``'s runs cannot carry a verdict, or None: a window shorter than
        ``WINDOW_CYCLES`` GentleRain cycles, or runs without their servers' CPU spread (made before
        the paper workload chose partitions uniformly: one hot server may set every figure)."""
        config = self.results.get(experiment, {}).get("config", {})
        window = float(config.get("duration_s", 0.0)) - float(config.get("warmup_s", 0.0))
        cycle = gentlerain_cycle_s(int(config.get("dcs", 3)))
        if window < WINDOW_CYCLES * cycle:
            return (f"a {window:g} s window holds {window / cycle:.1f} GentleRain cycles ({cycle * 1000:g} ms), "
                    f"fewer than {WINDOW_CYCLES}")
        if any((run.get("cpu") or {}).get("server_busy_max") is None for run in self.runs(experiment)):
            return "runs without their servers' CPU spread (a hot server cannot be ruled out)"
        return None

    def hot(self, peaks: Iterable[dict[str, Any]]) -> list[str]:
        """The peaks whose busiest server is saturated and ``HOT_SERVER_SPREAD`` above the median one."""
        found = []
        for run in peaks:
            cpu = run.get("cpu") or {}
            top, median = cpu.get("server_busy_max"), cpu.get("server_busy_median")
            if top is not None and median and top >= SATURATED and top / median >= HOT_SERVER_SPREAD:
                found.append(f"{run['system']} ({top:.0%} / {median:.0%})")
        return found


def at_sweep_top(run: dict[str, Any], steps: int = MAX_SWEEP_STEPS) -> bool:
    """The run is its sweep's last possible step (``steps`` steps, each doubling the clients, from one
    client per partition of each DC): its peak may lie beyond."""
    return bool(run["clients"] >= run["partitions"] * run.get("dcs", 3) * 2 ** (steps - 1))


def _topped(sim: _Sim, experiment: str, key: str, peaks: dict[tuple[str, Any], dict[str, Any]]) -> str:
    """What the measured figure says of the peaks at their sweep's last step that were still growing."""
    top = _lower_bounds(sim, experiment, key, peaks)
    return (f" (peaks at the sweep's last step, {sim.steps(experiment)} steps, so possibly below the peak: "
            f"{', '.join(top)})") if top else ""


def _lower_bounds(sim: _Sim, experiment: str, key: str, peaks: dict[tuple[str, Any], dict[str, Any]]) -> list[str]:
    """The peaks at their sweep's last step that were still growing there (lower bounds)."""
    steps = sim.steps(experiment)
    top = []
    for (system, value), run in sorted(peaks.items()):
        below = sorted((r for r in sim.runs(experiment) if r["system"] == system and r[key] == value
                        and r["clients"] < run["clients"]), key=lambda r: r["clients"])
        still_growing = not below or run["throughput_ops_s"] >= below[-1]["throughput_ops_s"] * 1.05
        if at_sweep_top(run, steps) and still_growing:
            top.append(f"{system} at {value}")
    return top


def _no_verdict(sim: _Sim, experiment: str, key: str | None = None) -> str | None:
    """Why the ``experiment``'s figures (its peaks, with ``key``) carry no verdict, or None."""
    reason = sim.untrusted(experiment)
    if reason or key is None:
        return reason
    peaks = sim.peaks(experiment, key)
    top = _lower_bounds(sim, experiment, key, peaks)
    if top:
        return f"peaks at their sweep's last step, still growing (lower bounds): {', '.join(top)}"
    hot = sim.hot(peaks.values())
    if hot:
        return (f"peaks set by one hot server (the busiest saturated, x{HOT_SERVER_SPREAD:g} the median or more): "
                + ", ".join(hot))
    return None


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
    reason = _no_verdict(sim, experiment, key)
    if reason:
        return SimClaim(topic, measured, INCONCLUSIVE, reason)
    verdict, why = throughput_verdict(known_cure, known_gr, gentlerain_at_most=gentlerain_upto is not None)
    return SimClaim(topic, measured, verdict, why)


def _latency_rule(sim: _Sim) -> SimClaim:
    topic = "Fig. 3"
    peaks = sim.peaks("fig3", "partitions")
    if not peaks:
        return _missing(topic, "fig3")
    rows = []
    ratios: dict[str, list[float]] = {"rotx_gr": [], "rotx_cure": [], "put_gr": [], "put_cure": []}
    for n in sim.levels("fig3", "partitions"):
        found = {}
        for kind in ("rotx", "put"):
            okapi = _latency_ms(peaks.get(("okapi", n)), kind)
            for system, short in (("gentlerain", "gr"), ("cure", "cure")):
                found[f"{kind}_{short}"] = _ratio(_latency_ms(peaks.get((system, n)), kind), okapi)
        for name, value in found.items():
            if value is not None:
                ratios[name].append(value)
        rows.append(f"n={n}: RO-TX GentleRain {_x(found['rotx_gr'])}, Cure {_x(found['rotx_cure'])}; PUT "
                    f"GentleRain {_x(found['put_gr'])}, Cure {_x(found['put_cure'])}")
    measured = "mean at the peak over Okapi's: " + ", ".join(rows)
    if not ratios["rotx_gr"] or not ratios["rotx_cure"]:
        return SimClaim(topic, measured, SILENT, "the simulated results lack a system's peaks")
    reason = _no_verdict(sim, "fig3", "partitions")
    if reason:
        return SimClaim(topic, measured, INCONCLUSIVE, reason)
    verdict, why = latency_verdict(ratios["rotx_gr"], ratios["rotx_cure"], ratios["put_gr"], ratios["put_cure"])
    return SimClaim(topic, measured, verdict, why)


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
    reason = _no_verdict(sim, "fig3", "partitions") or _no_verdict(sim, "fig4", "rotx_partitions")
    if reason:
        return SimClaim(topic, measured, INCONCLUSIVE, reason)
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
    reason = _no_verdict(sim, "fig3", "partitions")
    if reason:
        return SimClaim(topic, measured, INCONCLUSIVE, reason)
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
    measured = (f"at the same p and clients ({len(full)} steps): GentleRain / Okapi "
                f"{_span(c['gentlerain'] / c['okapi'] for c in full)}, Cure / Okapi "
                f"{_span(c['cure'] / c['okapi'] for c in full)}")
    reason = sim.untrusted("fig4")
    if reason:
        return SimClaim(topic, measured, INCONCLUSIVE, reason)
    verdict, why = considerably_verdict([(c["gentlerain"] / c["okapi"], c["cure"] / c["okapi"]) for c in full])
    return SimClaim(topic, measured, verdict, why)


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
    reason = sim.untrusted("fig4")
    first = SimClaim(topic, measured, INCONCLUSIVE, reason) if reason else SimClaim(
        topic, measured, REPRODUCED if rising and grows else PARTLY if grows else NOT,
        "grows with p at every step" if rising and grows else
        "higher at the largest p than at 1, not at every step (each p is its own peak, at its own load)" if grows
        else "does not grow with p: the probability is " + how)
    means = [mean for _, prob, mean, _ in known if prob and mean]
    skew = _skew_ms(sim)
    measured = (f"mean stall {how} {_span(means, _ms)} under offsets uniform in [0, {skew:g}] ms per server"
                if means else "no Cure stalls")
    second = SimClaim(topic, measured, SILENT, "the simulated experiments run at one skew: whether the stall is "
                      "proportional to the skew needs a skew sweep (the real suite's `paper-skew`)")
    return [first, second]


def _skew_ms(sim: _Sim) -> float:
    runs = sim.runs("fig4")
    return float(runs[0].get("clock_skew_ms") or 0.0) if runs else 0.0


def _gentlerain_stall_rule(sim: _Sim) -> SimClaim:
    """Judged below saturation: each p's first sweep step (one client per partition of each DC)."""
    topic = "Fig. 4"
    first: dict[Any, dict[str, Any]] = {}
    for run in sim.runs("fig4"):
        if run["system"] == "gentlerain" and (run["rotx_partitions"] not in first
                                              or run["clients"] < first[run["rotx_partitions"]]["clients"]):
            first[run["rotx_partitions"]] = run
    known = [(p, *_stall(run)) for p, run in sorted(first.items())]
    known = [row for row in known if row[1] is not None]
    if not known:
        return _missing(topic, "fig4")
    dcs = int(sim.results["fig4"]["config"].get("dcs", 3))
    matrix = wan_matrix_ms(dcs)
    furthest = {name: max(matrix[i]) for i, name in enumerate(dc_names(dcs))}
    measured = ("below saturation (each p's first sweep step): "
                + ", ".join(f"p={p}: {_pct(prob)} for {_ms(mean)}" for p, prob, mean, _ in known)
                + f" ({known[0][3]}); furthest DC one-way: "
                + ", ".join(f"{dc} {d:g} ms" for dc, d in furthest.items()))
    reason = sim.untrusted("fig4")
    if reason:
        return SimClaim(topic, measured, INCONCLUSIVE, reason)
    verdict, why = gentlerain_wait_verdict([(prob or 0.0, mean or 0.0) for _, prob, mean, _ in known],
                                           list(furthest.values()))
    return SimClaim(topic, measured, verdict, why)


def _write_ratio_rules(sim: _Sim) -> list[SimClaim]:
    topic = "writes"
    runs = sim.fixed("write-ratio", "write_ratio")
    ratios = sim.levels("write-ratio", "write_ratio")
    if len(ratios) < 2:
        return [_missing(topic, "write-ratio"), _missing(topic, "write-ratio")]
    cure = [(w, _ratio(_throughput(runs.get(("okapi", w))), _throughput(runs.get(("cure", w))))) for w in ratios]
    causes = []
    for w in ratios:
        waits = (runs.get(("cure", w)) or {}).get("waits") or {}
        skew, tick = wait_of_cause(waits, "write_skew"), wait_of_cause(waits, "write_tick")
        causes.append((None if skew is None else skew["probability"], None if tick is None else tick["probability"]))
    known = [(w, r) for w, r in cure if r is not None]
    reason = sim.untrusted("write-ratio")
    claims = []
    if len(known) < 2:
        claims.append(SimClaim(topic, "-", SILENT, "no Cure and Okapi runs at two write ratios"))
    else:
        measured = (f"at a fixed load: Okapi / Cure {_listing(known, 'w=')}; Cure's PUTs waited for the skew / the "
                    "clock microsecond " + ", ".join(f"w={w:g}: {_pct(skew)} / {_pct(tick)}"
                                                     for w, (skew, tick) in zip(ratios, causes, strict=True)))
        verdict, why = (INCONCLUSIVE, reason) if reason else write_ratio_verdict(known, [skew for skew, _ in causes])
        claims.append(SimClaim(topic, measured, verdict, why))
    gr = [(w, r) for w in ratios
          if (r := _ratio(_throughput(runs.get(("okapi", w))), _throughput(runs.get(("gentlerain", w)))))
          is not None]
    if not gr:
        claims.append(SimClaim(topic, "-", SILENT, "no GentleRain runs"))
    else:
        verdict, why = (INCONCLUSIVE, reason) if reason else comparable_verdict(gr)
        claims.append(SimClaim(topic, f"at a fixed load: Okapi / GentleRain {_listing(gr, 'w=')}", verdict, why))
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
    reason = sim.untrusted("visibility")
    verdict, why = (INCONCLUSIVE, reason) if reason else visibility_order_verdict(means)
    claims = [SimClaim(topic, "mean over every pair: " + ", ".join(f"{s} {_ms(v)}" for s, v in means.items()),
                       verdict, why)]
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
    claims.append(SimClaim(topic, measured, *((INCONCLUSIVE, reason) if reason else (verdict, why))))
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
    """The simulator encodes no wire: its metadata bytes are the core's formula (``okapikv.core.stats``),
    the very sizes the claims state, so these rows hold **by construction** and cannot fail; the
    real suite's wire bytes are the measurement."""
    topic = "metadata"
    runs = _traffic(sim, "traffic")
    if not all(s in runs for s in SYSTEMS):
        return [_missing(topic, "traffic")] * 3
    meta = {s: runs[s]["traffic"]["metadata_bytes_per_update"] for s in SYSTEMS}
    why = "the simulator counts the core's byte formula, the claim's own sizes, not an encoding: it cannot fail"
    claims = [SimClaim(topic, "the formula per update: " + ", ".join(f"{s} {meta[s]:g} B" for s in SYSTEMS),
                       BY_CONSTRUCTION, why)]
    ratio = (meta["cure"] + 16) / (meta["okapi"] + 16)
    claims.append(SimClaim(topic, f"with 16 B of key and value: x{ratio:.2f}", BY_CONSTRUCTION, why))
    five = _traffic(sim, FIVE_DC_TRAFFIC)
    if not five:
        claims.append(SimClaim(topic, "-", SILENT, "no simulated traffic at another DC count"))
        return claims
    dcs = sim.results[FIVE_DC_TRAFFIC]["config"].get("dcs")
    more = {s: five[s]["traffic"]["metadata_bytes_per_update"] for s in five}
    measured = f"per update at 3 / {dcs} DCs: " + ", ".join(f"{s} {meta[s]:g} / {more[s]:g} B" for s in more
                                                              if s in meta)
    claims.append(SimClaim(topic, measured, BY_CONSTRUCTION, why))
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
    """Rows 17 and 19 on the stabilization protocol's own bytes per second, heartbeats left out: at
    a fixed load the runs' throughputs differ (GentleRain's RO-TXs wait for the furthest DC), so
    bytes per operation spread each system's timers over different counts, and heartbeats (1 ms,
    every system alike) are no part of the claims' stabilization."""
    topic = "communication"
    runs = sim.fixed("write-ratio", "write_ratio")
    ratios = [w for w in sim.levels("write-ratio", "write_ratio") if all((s, w) in runs for s in SYSTEMS)]
    if not ratios:
        return [_missing(topic, "write-ratio")] * 3
    reason = sim.untrusted("write-ratio")
    rate = {w: {s: float((runs[(s, w)].get("traffic") or {}).get("stabilization_bytes_per_s", 0.0)) for s in SYSTEMS}
            for w in ratios}
    measured = "stabilization B/s without heartbeats " + "; ".join(
        f"w={w:g}: " + ", ".join(f"{s} {v:,.0f}" for s, v in row.items()) for w, row in rate.items())
    costlier = all(row["okapi"] > max(row["cure"], row["gentlerain"]) for row in rate.values())
    above_cure = all(row["okapi"] > row["cure"] for row in rate.values())
    claims = [SimClaim(topic, measured, *((INCONCLUSIVE, reason) if reason else
                                          (REPRODUCED, "Okapi's the highest at every write ratio") if costlier else
                                          (PARTLY, "above Cure's at every ratio, not above GentleRain's")
                                          if above_cure else (NOT, "not the highest at every ratio")))]
    low, high = ratios[0], ratios[-1]
    share = {w: _ratio(_bytes_per_op(runs[("okapi", w)])[1], _bytes_per_op(runs[("cure", w)])[1]) for w in (low, high)}
    at_low, at_high = share[low], share[high]
    falls = at_low is not None and at_high is not None and at_high < at_low
    below = at_high is not None and at_high < 1
    verdict, why = ((REPRODUCED, "Okapi's share falls with the write ratio and ends below Cure's") if falls and below
                    else (PARTLY, "only one of the two holds") if falls or below else
                    (NOT, "Okapi's stabilization dominates at every write ratio"))
    claims.append(SimClaim(topic, "total B/op Okapi / Cure " + ", ".join(f"w={w:g}: {_x(r)}" for w, r in share.items()),
                           *((INCONCLUSIVE, reason) if reason else (verdict, why))))
    lowest = [w for w in ratios if rate[w]["gentlerain"] <= min(rate[w]["okapi"], rate[w]["cure"])]
    measured = f"GentleRain's stabilization B/s without heartbeats the lowest at {len(lowest)} of {len(ratios)} ratios"
    verdict, why = ((REPRODUCED, "the lowest everywhere") if len(lowest) == len(ratios) else
                    (PARTLY, "the lowest at most ratios") if len(lowest) * 2 > len(ratios) else
                    (NOT, "not the lowest at most ratios"))
    claims.append(SimClaim(topic, measured, *((INCONCLUSIVE, reason) if reason else (verdict, why))))
    return claims


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
