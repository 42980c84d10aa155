"""The paper's evaluation claim by claim (Okapi, section 5), against a paper-suite results.json.

Each ``Claim`` names what the paper says, the figure, what the results measured (computed here from
the results, never typed in) and a verdict by a stated rule: ``reproduced`` (the direction and the
size the paper states), ``partly`` (the direction, not the size, or only part of the claim), ``not``
(the opposite, or nothing to compare), each with the reason. ``render`` is the table docs/paper.md
carries; a test checks that the committed table is this function of the committed results.

The rules compare peaks (``suites.paper_figures``: each point's peak-throughput search) and the
servers' own counters. Throughput ratios within 5% count as equal: on a shared 2-core machine runs
minutes apart drift by more than that (docs/benchmarks.md, "How to read them").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from okapikv.bench.engine.stats import wait_of_cause
from okapikv.core.deployment import paper_delay_ms

REPRODUCED, PARTLY, NOT = "reproduced", "partly", "not"
#: no verdict: the figure is a lower bound (a peak at its search's session cap or its sweep's last
#: step), or the measurement cannot carry the claim (the reason says why)
INCONCLUSIVE = "inconclusive"
#: the figure is the formula the claim states, computed, not measured: it cannot fail
BY_CONSTRUCTION = "by construction"
SYSTEMS = ("okapi", "cure", "gentlerain")
#: Throughput ratios within this of 1 count as equal (module docstring).
EQUAL = 0.05
#: The paper's sizes as bounds, for the real and the simulated measurements alike:
#: "50% higher" (Fig. 3a) and "up to 60%" (Fig. 4a) over GentleRain: a ratio within this band
FIFTY_PERCENT = (1.3, 2.0)
#: "slightly higher" than Cure: Okapi over Cure within [1 - EQUAL, 1 + SLIGHTLY]
SLIGHTLY = 0.15
#: "considerably higher", "2x lower": at least this ratio
CONSIDERABLY = 1.5
#: "up to 100x lower" than GentleRain: at least an order of magnitude somewhere
ORDER_OF_MAGNITUDE = 10.0
#: "proportional to the clock skew": the stall per ms of skew may vary by at most this factor over
#: the non-zero skew levels, and the stall at no skew stays below this share of the largest one
PROPORTIONAL_SPREAD = 1.5
NO_SKEW_SHARE = 0.25


def throughput_verdict(cure: Sequence[float], gentlerain: Sequence[float], *,
                       gentlerain_at_most: bool = False) -> tuple[str, str]:
    """Okapi's throughput over Cure's ("slightly higher": within ``[1 - EQUAL, 1 + SLIGHTLY]`` at
    every point) and over GentleRain's ("50% higher": within ``FIFTY_PERCENT`` at every point; "up
    to 60%" (``gentlerain_at_most``): the largest ratio within it). **reproduced**: both sizes;
    **partly**: the direction (at or above Cure, above GentleRain) without a size; **not**: else."""
    gr_sized = [max(gentlerain)] if gentlerain_at_most else list(gentlerain)
    cure_size = all(1 - EQUAL <= r <= 1 + SLIGHTLY for r in cure)
    gr_size = all(FIFTY_PERCENT[0] <= r <= FIFTY_PERCENT[1] for r in gr_sized)
    cure_dir = all(r >= 1 - EQUAL for r in cure)
    gr_dir = all(r > 1 + EQUAL for r in gentlerain)
    low, high = FIFTY_PERCENT
    cure_text = (f"over Cure within x{1 - EQUAL:.2f}-x{1 + SLIGHTLY:.2f} everywhere" if cure_size else
                 f"at or above Cure, beyond x{1 + SLIGHTLY:.2f} somewhere" if cure_dir else "behind Cure somewhere")
    gr_text = (f"over GentleRain within x{low:g}-x{high:g}" + (" at best" if gentlerain_at_most else " everywhere")
               if gr_size else f"above GentleRain, outside x{low:g}-x{high:g}" if gr_dir
               else "not above GentleRain everywhere")
    if cure_size and gr_size:
        return REPRODUCED, f"{cure_text}; {gr_text}"
    if cure_dir and gr_dir:
        return PARTLY, f"the direction, not the paper's size: {cure_text}; {gr_text}"
    return NOT, f"{cure_text}; {gr_text}"


def proportional(levels: Sequence[tuple[float, float]]) -> tuple[bool, bool, bool]:
    """(grows, grows at every step, proportional) of stalls ``(skew, stall)`` sorted by skew:
    proportional when the stall per ms of skew spreads by at most ``PROPORTIONAL_SPREAD`` over the
    non-zero levels and the stall at no skew is below ``NO_SKEW_SHARE`` of the largest."""
    stalls = [stall for _, stall in levels]
    grows = len(stalls) > 1 and stalls[-1] > stalls[0]
    every = grows and all(b >= a for a, b in zip(stalls, stalls[1:], strict=False))
    slopes = [stall / skew for skew, stall in levels if skew > 0]
    zero = [stall for skew, stall in levels if skew == 0]
    flat_at_zero = all(stall <= NO_SKEW_SHARE * max(stalls) for stall in zero)
    ratio = max(slopes) / min(slopes) if slopes and min(slopes) > 0 else float("inf")
    return grows, every, grows and len(slopes) >= 2 and ratio <= PROPORTIONAL_SPREAD and flat_at_zero


@dataclass(frozen=True, slots=True)
class Claim:
    topic: str
    claim: str  # what the paper says
    figure: str  # where okapikv's figure is (report section, plot, CSV)
    measured: str
    verdict: str
    why: str


def _x(value: float | None) -> str:
    return "-" if value is None else f"x{value:.2f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _span(values: Iterable[float | None], show: Callable[[float | None], str] = _x) -> str:
    known = [value for value in values if value is not None]
    if not known:
        return "-"
    low, high = min(known), max(known)
    return show(low) if low == high else f"{show(low)} to {show(high)}"


class _Paper:
    """Lookups into one results dictionary's ``paper`` section."""

    def __init__(self, results: dict[str, Any]) -> None:
        self.results = results
        self.paper: dict[str, Any] = results.get("paper", {})
        self.peaks: list[dict[str, Any]] = self.paper.get("peaks", [])
        self.systems = [system for system in SYSTEMS if any(peak["system"] == system for peak in self.peaks)]

    def points(self, series: str, key: str) -> list[Any]:
        return sorted({peak[key] for peak in self.peaks if peak["series"] == series})

    def peak(self, series: str, system: str, key: str, value: Any) -> dict[str, Any] | None:
        return next((peak for peak in self.peaks if peak["series"] == series and peak["system"] == system
                     and peak[key] == value), None)

    def figure(self, series: str, system: str, key: str, value: Any, field: str) -> float | None:
        peak = self.peak(series, system, key, value)
        return None if peak is None else peak.get(field)

    def ratios(self, series: str, key: str, field: str, a: str, b: str) -> list[tuple[Any, float | None]]:
        return [(point, _ratio(self.figure(series, a, key, point, field), self.figure(series, b, key, point, field)))
                for point in self.points(series, key)]

    def evidence(self, what: str) -> str:
        """What a row's figure rests on: ``what`` (the runs), in each run's measured window."""
        config = self.results.get("config", {})
        window, warmup = config.get("duration_s"), config.get("warmup_s")
        return f" [{what}; each run's {window:g} s window after {warmup:g} s]" if window and warmup is not None \
            else f" [{what}]"

    def lower_bounds(self, series: str, key: str, systems: Iterable[str] = SYSTEMS) -> list[str]:
        """The peaks of ``series`` that are lower bounds (``paper_figures.lower_bound``), named."""
        return [f"{peak['system']} at {key} {peak[key]:g}" for peak in self.peaks
                if peak["series"] == series and peak["system"] in systems and peak.get("lower_bound")]

    def stall(self, system: str, p: int) -> dict[str, Any] | None:
        return next((row for row in self.paper.get("stalls", [])
                     if row["system"] == system and row["rotx_partitions"] == p), None)


SCALE = ("paper-scalability", "partitions")
ROTX = ("paper-rotx-partitions", "rotx_partitions")
WRITES = ("paper-write-ratio", "write_ratio")


def _listing(pairs: Sequence[tuple[Any, float | None]], label: str) -> str:
    return ", ".join(f"{label}{point:g}: {_x(ratio)}" for point, ratio in pairs)


def _capped(bounds: list[str]) -> str:
    named = ", ".join(bounds[:4]) + (f" and {len(bounds) - 4} more" if len(bounds) > 4 else "")
    return (f"{len(bounds)} peak(s) at their search's session cap, lower bounds ({named}): no verdict from them "
            "(the search must end on a real knee: more sessions, `--max-sessions`)")


def _throughput_claim(paper: _Paper, where: tuple[str, str], label: str, *, claim: str, figure: str,
                      topic: str, gentlerain_upto: float | None = None) -> list[Claim]:
    """Okapi against Cure and GentleRain at every point, by ``throughput_verdict`` (with
    ``gentlerain_upto``: GentleRain judged at its best point up to that level, "up to 60% ... up to 8
    partitions"); **inconclusive** where a peak of the comparison is a lower bound."""
    series, key = where
    cure = paper.ratios(series, key, "throughput_ops_s", "okapi", "cure")
    gentlerain = [(point, ratio) for point, ratio in
                  paper.ratios(series, key, "throughput_ops_s", "okapi", "gentlerain")
                  if gentlerain_upto is None or point <= gentlerain_upto]
    known_cure = [ratio for _, ratio in cure if ratio is not None]
    known_gr = [ratio for _, ratio in gentlerain if ratio is not None]
    if not known_cure or not known_gr:
        return [Claim(topic, claim, figure, "-", NOT, "the results have no peaks of these systems")]
    measured = (f"Okapi / Cure {_listing(cure, label)}; Okapi / GentleRain {_listing(gentlerain, label)}"
                + paper.evidence("each point's peak run"))
    bounds = paper.lower_bounds(series, key)
    if bounds:
        return [Claim(topic, claim, figure, measured, INCONCLUSIVE, _capped(bounds))]
    verdict, why = throughput_verdict(known_cure, known_gr, gentlerain_at_most=gentlerain_upto is not None)
    return [Claim(topic, claim, figure, measured, verdict, why + " (peaks measured minutes apart on a shared "
                  "2-core VM)")]


def latency_verdict(rotx_gr: Sequence[float], rotx_cure: Sequence[float], put_gr: Sequence[float],
                    put_cure: Sequence[float]) -> tuple[str, str]:
    """Row 2's rule, real and simulated alike: RO-TX "up to 100x lower than GentleRain, 2x lower
    than Cure" (GentleRain's over Okapi's at least ``ORDER_OF_MAGNITUDE`` somewhere, Cure's at least
    ``CONSIDERABLY``), and the claim names PUT too: Okapi's PUT at or below both (within ``EQUAL``) at
    every point. **partly**: RO-TX slower in both, without the sizes or without PUT; **not**: else."""
    rotx_size = max(rotx_gr) >= ORDER_OF_MAGNITUDE and max(rotx_cure) >= CONSIDERABLY
    rotx_dir = max(rotx_gr) > 1 + EQUAL and max(rotx_cure) > 1 + EQUAL
    put_ok = all(r >= 1 - EQUAL for r in (*put_gr, *put_cure))
    put_text = "Okapi's PUT at or below both everywhere" if put_ok else "Okapi's PUT slower than one of them somewhere"
    if rotx_size and put_ok:
        return REPRODUCED, (f"RO-TX x{ORDER_OF_MAGNITUDE:g}+ against GentleRain and x{CONSIDERABLY:g}+ against Cure; "
                            f"{put_text}")
    if rotx_dir:
        return PARTLY, ("RO-TX slower in both" + ("" if rotx_size else ", not by the paper's sizes") + f"; {put_text}")
    return NOT, "Okapi's RO-TX is not the fastest at the peak"


def _latency_claim(paper: _Paper) -> Claim:
    claim = "RO-TX and PUT latency much lower: up to 100x lower than GentleRain, 2x lower than Cure (Fig. 3b, 3c)"
    figure = "report: paper figures, peaks; scalability.png"
    series, key = SCALE
    rows = []
    ratios: dict[str, list[float]] = {"rotx_gr": [], "rotx_cure": [], "put_gr": [], "put_cure": []}
    for point in paper.points(series, key):
        found = {}
        for kind in ("rotx", "put"):
            okapi = paper.figure(series, "okapi", key, point, f"{kind}_mean_ms")
            for system, short in (("gentlerain", "gr"), ("cure", "cure")):
                found[f"{kind}_{short}"] = _ratio(paper.figure(series, system, key, point, f"{kind}_mean_ms"), okapi)
        for name, value in found.items():
            if value is not None:
                ratios[name].append(value)
        rows.append(f"{point} partition(s): RO-TX GentleRain {_x(found['rotx_gr'])}, Cure {_x(found['rotx_cure'])}; "
                    f"PUT GentleRain {_x(found['put_gr'])}, Cure {_x(found['put_cure'])}")
    if not rows or not ratios["rotx_gr"] or not ratios["rotx_cure"]:
        return Claim("Fig. 3", claim, figure, "-", NOT, "no scalability peaks")
    measured = "mean at the peak, over Okapi's: " + "; ".join(rows) + paper.evidence("the scalability peaks' runs")
    bounds = paper.lower_bounds(series, key)
    if bounds:
        return Claim("Fig. 3", claim, figure, measured, INCONCLUSIVE, _capped(bounds))
    verdict, why = latency_verdict(ratios["rotx_gr"], ratios["rotx_cure"], ratios["put_gr"], ratios["put_cure"])
    return Claim("Fig. 3", claim, figure, measured, verdict, why)


def _sessions_claim(paper: _Paper) -> Claim:
    claim = "Cure and GentleRain need many more clients than Okapi to saturate their resources (Fig. 3a)"
    figure = "report: paper figures, peaks (sessions)"
    rows: list[dict[str, float]] = []
    more_gr = more_cure = total = 0
    for series, key in (ROTX, WRITES, SCALE):
        for point in paper.points(series, key):
            found = {system: paper.figure(series, system, key, point, "sessions") for system in paper.systems}
            sessions = {system: value for system, value in found.items() if value is not None}
            if len(sessions) < 3:
                continue
            total += 1
            more_gr += sessions["gentlerain"] > sessions["okapi"]
            more_cure += sessions["cure"] > sessions["okapi"]
            rows.append(sessions)
    if not total:
        return Claim("Fig. 3", claim, figure, "-", NOT, "no peaks of all three systems")

    def median(system: str) -> float:
        values = sorted(row[system] for row in rows)
        return float(values[len(values) // 2])
    measured = (f"median sessions at the peak: Okapi {median('okapi'):g}, Cure {median('cure'):g}, GentleRain "
                f"{median('gentlerain'):g}; more than Okapi at {more_cure} (Cure) and {more_gr} (GentleRain) of "
                f"{total} points")
    bounds = [bound for series, key in (ROTX, WRITES, SCALE) for bound in paper.lower_bounds(series, key)]
    if bounds:
        return Claim("Fig. 3", claim, figure, measured, INCONCLUSIVE, "the sessions of a peak at the session cap "
                     "say only that more were needed: " + _capped(bounds))
    if more_gr >= total * 0.75 and more_cure >= total / 2:
        return Claim("Fig. 3", claim, figure, measured, REPRODUCED, "at most points both need more sessions")
    if more_gr >= total / 2:
        return Claim("Fig. 3", claim, figure, measured, PARTLY, "GentleRain needs more sessions; Cure not more "
                     "than Okapi at most points (its waits, ~ms, are small next to the queueing on 2 cores)")
    return Claim("Fig. 3", claim, figure, measured, NOT, "every system saturates the 2 shared cores at about the "
                 "same session count: the CPU, not the waiting, limits each")


def _scaling_claim(paper: _Paper) -> Claim:
    claim = "Throughput scales with the partitions (2 to 32 partitions on their own machines) (Fig. 3a)"
    figure = "scalability.png; paper-scalability.csv"
    series, key = SCALE
    points = paper.points(series, key)
    if len(points) < 2:
        return Claim("Fig. 3", claim, figure, "-", NOT, "one partition level only")
    growth = {system: _ratio(paper.figure(series, system, key, points[-1], "throughput_ops_s"),
                             paper.figure(series, system, key, points[0], "throughput_ops_s"))
              for system in paper.systems}
    measured = f"peak at {points[-1]} over {points[0]} partition(s) per DC: " + ", ".join(
        f"{system} {_x(ratio)}" for system, ratio in growth.items()) + paper.evidence("the scalability peaks' runs")
    bounds = paper.lower_bounds(series, key)
    if bounds:
        return Claim("Fig. 3", claim, figure, measured, INCONCLUSIVE, _capped(bounds))
    if all(ratio is not None and ratio > 1.5 for ratio in growth.values()):
        return Claim("Fig. 3", claim, figure, measured, REPRODUCED, "every system gains from added partitions")
    return Claim("Fig. 3", claim, figure, measured, NOT, "the machine: every added partition is three more server "
                 "processes on the same 2 cores (`okapi bench --suite scaling` on a machine with cores)")


def _rotx_latency_claim(paper: _Paper) -> Claim:
    claim = "Cure and GentleRain incur considerably higher RO-TX latency, for any value of throughput (Fig. 4b, 5)"
    figure = "rotx_latency_vs_throughput.png; paper-rotx-partitions-sessions.csv"
    runs = paper.results.get("series", {}).get("paper-rotx-partitions-sessions", {}).get("runs", [])
    table: dict[tuple[int, int], dict[str, float]] = {}
    for run in runs:
        latency = run.get("latency_us", {}).get("rotx")
        if latency and latency.get("count"):
            table.setdefault((run["rotx_partitions"], run["clients"]), {})[run["system"]] = latency["mean_us"] / 1000
    cells = [cell for cell in table.values() if len(cell) == 3]
    if not cells:
        return Claim("Fig. 4-5", claim, figure, "-", NOT, "no session count measured for all three systems")
    measured = (f"at the same p and sessions ({len(cells)} pairs of steps): GentleRain / Okapi "
                f"{_span(c['gentlerain'] / c['okapi'] for c in cells)}, Cure / Okapi "
                f"{_span(c['cure'] / c['okapi'] for c in cells)}" + paper.evidence("every step of the RO-TX searches"))
    verdict, why = considerably_verdict([(c["gentlerain"] / c["okapi"], c["cure"] / c["okapi"]) for c in cells])
    return Claim("Fig. 4-5", claim, figure, measured, verdict, why)


def considerably_verdict(cells: Sequence[tuple[float, float]]) -> tuple[str, str]:
    """Row 6's rule, real and simulated alike, over cells of (GentleRain / Okapi, Cure / Okapi) RO-TX
    latency at the same load: "considerably higher" is at least ``CONSIDERABLY``. **reproduced**:
    GentleRain's at every cell and Cure's at three quarters of them; **partly**: both higher than
    Okapi's at three quarters of them, not by the size; **not**: else."""
    total = len(cells)
    gr_big = sum(gr >= CONSIDERABLY for gr, _ in cells)
    cure_big = sum(cure >= CONSIDERABLY for _, cure in cells)
    higher = sum(gr > 1 + EQUAL and cure > 1 + EQUAL for gr, cure in cells)
    counts = (f"x{CONSIDERABLY:g} or more at {gr_big} (GentleRain) and {cure_big} (Cure) of {total} loads; "
              f"both above Okapi at {higher}")
    if gr_big == total and cure_big >= total * 0.75:
        return REPRODUCED, counts
    if higher >= total * 0.75:
        return PARTLY, counts + ": higher, not considerably everywhere"
    return NOT, counts + ": Okapi's RO-TX is not the fastest at most loads"


def _cure_stalls_claim(paper: _Paper) -> list[Claim]:
    levels = paper.points(*ROTX)
    rows = [(p, paper.stall("cure", p)) for p in levels]
    known = [(p, row) for p, row in rows if row and row["tx_probability"] is not None]
    figure = "report: RO-TX stalls per transaction; waits_vs_rotx_partitions.png; paper-stalls.csv"
    claims = []
    claim = "In Cure the probability that a RO-TX stalls grows with the partitions it contacts (Fig. 4c)"
    if len(known) < 2:
        claims.append(Claim("Fig. 4", claim, figure, "-", NOT, "fewer than two p levels"))
    else:
        tx = [row["tx_probability"] for _, row in known]
        measured = "per transaction " + ", ".join(f"p={p}: {_pct(row['tx_probability'])}" for p, row in known) + \
            "; per slice " + ", ".join(f"p={p}: {_pct(row['slice_probability'])}" for p, row in known)
        rising = all(b >= a for a, b in zip(tx, tx[1:], strict=False)) and tx[-1] > tx[0]
        claims.append(Claim("Fig. 4", claim, figure, measured, REPRODUCED if rising else PARTLY if tx[-1] > tx[0]
                            else NOT, "grows with p at every step" if rising else
                            "higher at the largest p than at 1, not at every step (each point is its own peak, "
                            "at its own session count)" if tx[-1] > tx[0] else "does not grow with p here"))
    claims.append(_cure_skew_claim(paper, [row for _, row in known]))
    return claims


def _cure_skew_claim(paper: _Paper, rotx_stalls: list[dict[str, Any]]) -> Claim:
    """Row 8, judged on the skew sweep (series ``paper-skew``: Cure's mean stall per transaction at
    each skew level, a fresh cluster each) by ``skew_verdict``: the paper says the waiting time is
    proportional to the clock skew (section 5, Fig. 4d). Without the sweep in the results, the RO-TX sweep's
    stalls at its one skew are shown and the verdict is at most **partly** (one skew cannot show a
    duration following the skew)."""
    claim = "Cure's stall lasts about the clock skew: 5-10 ms on average (Fig. 4d)"
    figure = "report: RO-TX stalls against the clock skew; waits_vs_clock_skew.png; paper-skew.csv"
    plan = paper.results.get("config", {}).get("paper_plan", {})
    cure_runs = [run for run in paper.results.get("series", {}).get(ROTX[0], {}).get("runs", [])
                 if run["system"] == "cure"]
    model = next((run["clock_skew_model"] for run in cure_runs if run.get("clock_skew_model")),
                 plan.get("clock_skew_model") or "dc-major")
    inside = [run["max_dc_skew_ms"] for run in cure_runs if run.get("max_dc_skew_ms") is not None]
    means = [row["tx_mean_ms"] for row in rotx_stalls if row["tx_mean_ms"]]
    at_one = (f"at the RO-TX sweep's {plan.get('clock_skew_ms', '?')} ms skew ({model}"
              + (f", at most {max(inside):.1f} ms between two servers of one DC" if inside else "")
              + f"): mean stall per transaction {_span(means, _ms)}") if means else ""
    sweep = [row for row in paper.paper.get("skew", [])
             if row["system"] == "cure" and row["tx_mean_ms"] is not None]
    if len(sweep) < 2:
        missing = "the skew sweep (`paper-skew`) is not in these results"
        figure = "report: RO-TX stalls per transaction; waits_vs_rotx_partitions.png; paper-stalls.csv"
        if not means:
            return Claim("Fig. 4", claim, figure, missing, NOT, "no Cure stalls measured")
        within = min(means) >= 5 and max(means) <= 10
        return Claim("Fig. 4", claim, figure, f"{at_one}; {missing}", PARTLY,
                     ("within 5-10 ms at every p" if within else
                      "Cure stalls for milliseconds, not within 5-10 ms at every p: a RO-TX waits only for the "
                      "partitions of its own DC, so the largest offset inside a DC bounds the stall, and at the peak "
                      "a stall also holds the queueing of a saturated machine")
                     + "; whether the stall follows the skew needs the skew sweep (`okapi bench --suite paper`)")
    measured = (f"skew sweep ({sweep[0]['clock_skew_model'] or model}, p={sweep[0]['rotx_partitions']}, "
                f"{sweep[0]['sessions']} sessions), mean stall per transaction at each skew (largest in-DC skew): "
                + ", ".join(f"{row['clock_skew_ms']:g} ms: {_ms(row['tx_mean_ms'])} ({_ms(row['max_dc_skew_ms'])})"
                            for row in sweep) + (f"; {at_one}" if at_one else ""))
    verdict, why = skew_verdict([(row["clock_skew_ms"], row["tx_mean_ms"]) for row in sweep])
    return Claim("Fig. 4", claim, figure, measured, verdict, why)


def skew_verdict(levels: Sequence[tuple[float, float]]) -> tuple[str, str]:
    """Row 8's rule: the stall "proportional to the clock skew" (``proportional``): **reproduced**
    when proportional, **partly** when it grows with the skew without being proportional, **not**
    when it does not grow."""
    grows, every, fits = proportional(sorted(levels))
    if fits:
        return REPRODUCED, (f"proportional to the skew: the stall per ms of skew within x{PROPORTIONAL_SPREAD:g} "
                            f"over the skew levels, and under {NO_SKEW_SHARE:.0%} of the largest stall at no skew")
    if grows:
        return PARTLY, ("grows with the skew" + ("" if every else ", not at every step") + ", not in proportion "
                        f"(the stall per ms of skew spreads by more than x{PROPORTIONAL_SPREAD:g}, or the stall at no "
                        "skew is large: a stall also holds scheduling delay)")
    return NOT, "the stall does not grow with the skew here"


def gentlerain_wait_verdict(waits: Sequence[tuple[float, float]], furthest_ms: Sequence[float]) -> tuple[str, str]:
    """Row 9's rule over (probability, mean ms) of RO-TX waits measured below saturation:
    **reproduced** if at least 95% of RO-TXs wait, for between 0.8x the nearest furthest-DC delay
    and 1.5x the furthest plus 10 ms (stabilization); **partly** if they always wait, for another
    time, or wait about that long, not always; else **not**."""
    always = all(probability >= 0.95 for probability, _ in waits)
    near = bool(furthest_ms) and all(min(furthest_ms) * 0.8 <= mean <= max(furthest_ms) * 1.5 + 10
                                     for _, mean in waits)
    if always and near:
        return REPRODUCED, "every RO-TX after a PUT waits, as long as the furthest DC's delay plus stabilization"
    if always or near:
        return PARTLY, ("it always waits, but not about the furthest DC's delay" if always else
                        "it waits about the furthest DC's delay, not every RO-TX: one reads at once when its DC's "
                        "stable time already covers its session's last write")
    return NOT, "not every RO-TX waits, and not about the furthest DC's delay"


def _gentlerain_stalls_claim(paper: _Paper) -> Claim:
    """Judged below saturation (``gentlerain_wait_verdict``): on the skew sweep's levels (a fixed,
    moderate session count; the wait is for the furthest DC whatever the skew). The RO-TX sweep's
    peaks are shown, not judged: at a peak a wait also holds a saturated machine's queueing."""
    claim = "GentleRain's RO-TX always waits, about the delay to the furthest DC (Fig. 4c/d)"
    figure = "report: RO-TX stalls per transaction and against the clock skew; paper-stalls.csv; paper-skew.csv"
    known: list[tuple[Any, dict[str, Any]]] = [
        (p, row) for p in paper.points(*ROTX) if (row := paper.stall("gentlerain", p))
        and row["tx_probability"] is not None]
    sweep = [row for row in paper.paper.get("skew", [])
             if row["system"] == "gentlerain" and row["tx_probability"] is not None]
    if not known and not sweep:
        return Claim("Fig. 4", claim, figure, "-", NOT, "no GentleRain runs")
    dcs = paper.results.get("config", {}).get("paper_plan", {}).get("dcs", [])
    furthest = {a: max((paper_delay_ms(a, b) or 0.0) for b in dcs if b != a) for a in dcs} if dcs else {}
    measured = ", ".join(f"p={p}: {_pct(row['tx_probability'])} for {_ms(row['tx_mean_ms'])}" for p, row in known)
    measured = f"at the peaks (shown, not judged) {measured}" if measured else ""
    if sweep:
        sessions = sweep[0].get("sessions")
        measured += ("; " if measured else "") + (f"below saturation, the skew sweep (p={sweep[0]['rotx_partitions']}"
                                                  + (f", {sessions} sessions" if sessions else "") + "): ") + ", ".join(
            f"{row['clock_skew_ms']:g} ms skew: {_pct(row['tx_probability'])} for {_ms(row['tx_mean_ms'])}"
            for row in sweep)
    if furthest:
        measured += ("; furthest DC one-way: " + ", ".join(f"{dc} {delay:g} ms" for dc, delay in furthest.items()))
    if not sweep:
        return Claim("Fig. 4", claim, figure, measured, INCONCLUSIVE, "measured only at the peaks, where a wait also "
                     "holds a saturated machine's queueing; the skew sweep (below saturation) is not in these results")
    verdict, why = gentlerain_wait_verdict([(row["tx_probability"], row["tx_mean_ms"]) for row in sweep],
                                           list(furthest.values()))
    return Claim("Fig. 4", claim, figure, measured, verdict, why)


#: write ratios at most this are "read-heavy" (row 11: "read-heavy workloads cost Okapi < 10%")
READ_HEAVY = 0.1
#: "comparable", "< 10%": Okapi's throughput at least this share of GentleRain's
COMPARABLE = 0.9


def write_ratio_verdict(cure: Sequence[tuple[float, float]], skew_stalls: Sequence[float | None]) -> tuple[str, str]:
    """Row 10's rule over (w, Okapi / Cure): **reproduced** if Okapi is at or above Cure (within
    ``EQUAL``) at every w and the gap widens from the most read-heavy to the most write-heavy by more
    than ``EQUAL``; **partly** if one holds; else **not**. Cure's PUT stalls caused by the skew
    (``skew_stalls``, the paper's mechanism) are said, growing or not."""
    above = all(r >= 1 - EQUAL for _, r in cure)
    widening = cure[-1][1] > cure[0][1] + EQUAL
    known = [stall for stall in skew_stalls if stall is not None]
    mechanism = ("Cure's skew-caused PUT stalls grow with w" if len(known) > 1 and known[-1] > known[0] else
                 "Cure's skew-caused PUT stalls do not grow with w (its waits are mostly the clock microsecond's)")
    if above and widening:
        return REPRODUCED, f"at or above Cure and widening with writes; {mechanism}"
    if above or widening:
        return PARTLY, ("at or above Cure, not widening" if above else "widening, not above Cure everywhere") + \
            f"; {mechanism}"
    return NOT, f"Cure is ahead and the gap does not widen; {mechanism}"


def comparable_verdict(gentlerain: Sequence[tuple[float, float]]) -> tuple[str, str]:
    """Row 11's rule over (w, Okapi / GentleRain), judged at every ratio (at least two):
    **reproduced** if Okapi keeps ``COMPARABLE`` of GentleRain's throughput or more at every w;
    **partly** if it does at every read-heavy w (``READ_HEAVY``), not at the others; **not** else."""
    if len(gentlerain) < 2:
        return INCONCLUSIVE, "fewer than two write ratios"
    every = all(r >= COMPARABLE for _, r in gentlerain)
    heavy = [r for w, r in gentlerain if w <= READ_HEAVY]
    if every:
        return REPRODUCED, f"Okapi within {1 - COMPARABLE:.0%} of GentleRain or ahead at every write ratio"
    if heavy and all(r >= COMPARABLE for r in heavy):
        return PARTLY, (f"within {1 - COMPARABLE:.0%} or ahead at the read-heavy ratios (w <= {READ_HEAVY:g}), "
                        "not at every ratio")
    return NOT, f"Okapi more than {1 - COMPARABLE:.0%} behind at a read-heavy ratio"


def _write_ratio_claims(paper: _Paper) -> list[Claim]:
    series, key = WRITES
    cure = paper.ratios(series, key, "throughput_ops_s", "okapi", "cure")
    gr = paper.ratios(series, key, "throughput_ops_s", "okapi", "gentlerain")
    figure = "write_ratio.png; paper-write-ratio.csv"
    claims = []
    claim = "Okapi's throughput is higher than Cure's, the more so the more writes (PUT stalls grow) (write sweep)"
    known = [(w, r) for w, r in cure if r is not None]
    causes: list[tuple[float | None, float | None]] = []
    for w, _ in known:
        run = next((r for r in paper.results.get("series", {}).get(series, {}).get("runs", [])
                    if r["system"] == "cure" and r.get("write_ratio") == w), None)
        waits = (run or {}).get("waits") or {}
        skew, tick = wait_of_cause(waits, "write_skew"), wait_of_cause(waits, "write_tick")
        causes.append((None if skew is None else skew["probability"], None if tick is None else tick["probability"]))
    bounds = paper.lower_bounds(series, key)
    if len(known) < 2:
        claims.append(Claim("writes", claim, figure, "-", NOT, "fewer than two write ratios"))
    else:
        measured = f"Okapi / Cure {_listing(known, 'w=')}; Cure's PUTs waited for the skew / the clock " + \
            "microsecond " + ", ".join(f"w={w:g}: {_pct(skew)} / {_pct(tick)}"
                                       for (w, _), (skew, tick) in zip(known, causes, strict=True)) + \
            paper.evidence("each ratio's peak run; waits: the servers' counters")
        if bounds:
            claims.append(Claim("writes", claim, figure, measured, INCONCLUSIVE, _capped(bounds)))
        else:
            verdict, why = write_ratio_verdict(known, [skew for skew, _ in causes])
            claims.append(Claim("writes", claim, figure, measured, verdict, why))
    claim = "Okapi is comparable to GentleRain; read-heavy workloads cost Okapi < 10% (vectors, not a scalar)"
    known = [(w, r) for w, r in gr if r is not None]
    if not known:
        claims.append(Claim("writes", claim, figure, "-", NOT, "no GentleRain peaks"))
    else:
        measured = f"Okapi / GentleRain {_listing(known, 'w=')}" + paper.evidence("each ratio's peak run")
        if bounds:
            claims.append(Claim("writes", claim, figure, measured, INCONCLUSIVE, _capped(bounds)))
        else:
            verdict, why = comparable_verdict(known)
            claims.append(Claim("writes", claim, figure, measured, verdict, why))
    return claims


def visibility_order_verdict(means: dict[str, float]) -> tuple[str, str]:
    """Row 12's rule: **reproduced** if Okapi's mean visibility is the highest. Cure's above
    GentleRain's is said, not required: GentleRain's remote updates become visible with its stable
    time, which waits for the furthest DC (section 5's own mechanism), so whether Cure's are faster
    depends on the WAN, not on the protocols' ranks."""
    order = sorted(SYSTEMS, key=lambda system: -means[system])
    second = "then Cure, then GentleRain" if order[1:] == ["cure", "gentlerain"] else "then GentleRain, then Cure"
    if order[0] == "okapi":
        return REPRODUCED, f"Okapi's is the highest ({second})"
    return NOT, "Okapi's is not the highest"


def _visibility_claims(paper: _Paper) -> list[Claim]:
    visibility = paper.paper.get("visibility", {})
    figure = "visibility_by_destination.png; report: visibility per destination; paper-visibility-by-destination.csv"
    if not all(system in visibility for system in SYSTEMS):
        return [Claim("visibility", "Okapi's visibility latency is the highest, then Cure's, then GentleRain's",
                      figure, "-", NOT, "the results lack a system's visibility")]
    def mean(system: str) -> float:
        rows = visibility[system]
        count = sum(row["count"] for row in rows)
        return sum(row["mean_ms"] * row["count"] for row in rows) / count if count else 0.0
    means = {system: mean(system) for system in SYSTEMS}
    claim = "Okapi's remote update visibility latency is the highest, followed by Cure and GentleRain"
    measured = "mean over every pair: " + ", ".join(f"{system} {_ms(value)}" for system, value in means.items())
    verdict, why = visibility_order_verdict(means)
    claims = [Claim("visibility", claim, figure, measured, verdict, why)]
    spreads = {system: [row["source_spread_ms"] for row in visibility[system]] for system in SYSTEMS}
    claim = ("Per destination DC, Okapi's and Cure's CDFs are bimodal (one mode per source DC), GentleRain's unimodal "
             "(Fig. 6)")
    measured = "distance between the sources' medians at each destination: " + "; ".join(
        f"{system} {', '.join(f'{value:.0f}' for value in values)} ms" for system, values in spreads.items())
    bimodal = {system: max(values, default=0.0) for system, values in spreads.items()}
    gr_max = bimodal["gentlerain"]
    if bimodal["okapi"] > gr_max and bimodal["cure"] > gr_max:
        verdict, why = REPRODUCED, "Okapi's and Cure's modes lie further apart than GentleRain's"
    elif bimodal["okapi"] > gr_max or bimodal["cure"] > gr_max:
        verdict, why = PARTLY, "one of Okapi and Cure separates its sources more than GentleRain does"
    else:
        verdict, why = NOT, "GentleRain's sources are as far apart as the others'"
    claims.append(Claim("visibility", claim, figure, measured, verdict, why))
    return claims


def _metadata_claims(paper: _Paper) -> list[Claim]:
    rows = {row["system"]: row for row in paper.paper.get("metadata", [])}
    figure = "metadata.png; report: replication metadata; paper-metadata.csv"
    if not all(system in rows for system in SYSTEMS):
        return [Claim("metadata", "Okapi and GentleRain need 12 bytes of metadata per update, Cure 28", figure,
                      "-", NOT, "the results lack a system's replication figures")]
    formula = {system: rows[system]["formula_bytes"] for system in SYSTEMS}
    wire = {system: rows[system]["wire_bytes"] for system in SYSTEMS}
    claims = []
    measured = ("formula: " + ", ".join(f"{s} {formula[s]:g} B" for s in SYSTEMS) + "; on the wire (protobuf): "
                + ", ".join(f"{s} {_fmt_bytes(wire[s])}" for s in SYSTEMS))
    same = wire["okapi"] is not None and wire["gentlerain"] is not None and abs(wire["okapi"] - wire["gentlerain"]) < 1
    double = wire["cure"] is not None and wire["okapi"] is not None and wire["cure"] >= 2 * wire["okapi"]
    claims.append(Claim("metadata", "Okapi and GentleRain need 12 bytes of metadata per update (source replica 4, "
                        "update time 8); Cure 28, more than twice", figure, measured,
                        REPRODUCED if same and double else PARTLY,
                        "the formula gives the paper's bytes; on the wire, varints and field tags make each update "
                        "heavier, Okapi's equal to GentleRain's and Cure's more than twice theirs" if same and double
                        else "the formula gives the paper's bytes; the wire does not keep the ratio"))
    payload = rows["okapi"]["payload_bytes"] or 16.0
    formula_ratio = (formula["cure"] + payload) / (formula["okapi"] + payload)
    wire_ratio = _ratio((wire["cure"] or 0) + payload, (wire["okapi"] or 0) + payload)
    claims.append(Claim("metadata", "With 16 B of key and value, Cure sends almost 60% more to replicate an update",
                        figure, f"formula x{formula_ratio:.2f}; on the wire {_x(wire_ratio)}",
                        REPRODUCED if wire_ratio and wire_ratio >= 1.4 else PARTLY,
                        "Cure's update with its payload is half again as large or more" if wire_ratio and
                        wire_ratio >= 1.4 else "the formula holds, the wire's ratio is smaller"))
    claims.append(Claim("metadata", "Okapi's and GentleRain's metadata per update does not grow with the DCs; Cure's "
                        "grows linearly", "tests/unit/test_wire_bytes.py; the formula in okapikv.core.stats",
                        "3 DCs only here: Cure's vector has an entry per DC (the formula 4 + 8 + 8 (M - 1); on the "
                        "wire each entry is one varint), Okapi's and GentleRain's updates carry none",
                        PARTLY, "follows from what an update carries; not measured at other DC counts"))
    return claims


def _fmt_bytes(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} B"


def _communication_claims(paper: _Paper) -> list[Claim]:
    rows = paper.paper.get("communication", [])
    figure = "report: communication per operation; paper-communication.csv; metadata.png"
    by = {(row["system"], row["write_ratio"]): row for row in rows}
    ratios = sorted({row["write_ratio"] for row in rows})
    if not ratios or not all((system, ratios[0]) in by for system in SYSTEMS):
        return [Claim("communication", "UST's stabilization costs more than Cure's and GentleRain's", figure, "-",
                      NOT, "no communication figures")]

    def value(system: str, w: float, field: str) -> float | None:
        row = by.get((system, w))
        return None if row is None else row.get(field)

    claims = []
    stab = {w: {s: value(s, w, "stabilization_bytes_per_op") for s in SYSTEMS} for w in ratios}
    measured = "stabilization B/op " + "; ".join(
        f"w={w:g}: " + ", ".join(f"{s} {_fmt_num(v)}" for s, v in row.items()) for w, row in stab.items())
    costlier = all((row["okapi"] or 0) > max(row["cure"] or 0, row["gentlerain"] or 0) for row in stab.values())
    claims.append(Claim("communication", "UST's stabilization (an extra round between DCs) costs more than Cure's and "
                        "GentleRain's", figure, measured, REPRODUCED if costlier else PARTLY,
                        "Okapi's stabilization bytes are the highest at every write ratio" if costlier else
                        "not the highest at every ratio (per operation, so a system with fewer operations in its "
                        "window pays its timers' bytes over fewer)"))
    low, high = ratios[0], ratios[-1]
    totals = {w: {s: value(s, w, "total_bytes_per_op") for s in SYSTEMS} for w in (low, high)}
    okapi_cure = {w: _ratio(totals[w]["okapi"], totals[w]["cure"]) for w in (low, high)}
    measured = "total B/op Okapi / Cure " + ", ".join(f"w={w:g}: {_x(r)}" for w, r in okapi_cure.items())
    at_low, at_high = okapi_cure[low], okapi_cure[high]
    falls = at_low is not None and at_high is not None and at_high < at_low
    lower_at_writes = at_high is not None and at_high < 1
    claims.append(Claim("communication", "In total (stabilization + replication) Okapi is close to Cure when reads "
                        "dominate and lower as writes grow", figure, measured,
                        REPRODUCED if falls and lower_at_writes else PARTLY if falls or lower_at_writes else NOT,
                        "Okapi's share falls with the write ratio and ends below Cure's" if falls and lower_at_writes
                        else "only one of the two holds" if falls or lower_at_writes else
                        "Okapi's stabilization dominates at every write ratio here"))
    lowest = [w for w in ratios
              if (stab[w]["gentlerain"] or 0) <= min(stab[w]["okapi"] or 0, stab[w]["cure"] or 0)]
    verdict = REPRODUCED if len(lowest) == len(ratios) else PARTLY if len(lowest) * 2 > len(ratios) else NOT
    claims.append(Claim("communication", "GentleRain's stabilization is the most network-efficient at every write "
                        "ratio", figure, f"GentleRain's stabilization B/op the lowest at {len(lowest)} of "
                        f"{len(ratios)} write ratios (the row above)", verdict,
                        "the lowest everywhere" if verdict == REPRODUCED else
                        "the lowest at most ratios, not all: per operation, a run with more operations in its "
                        "window spreads its timers' bytes thinner, and the peaks ran at different loads"
                        if verdict == PARTLY else "not the lowest at most ratios"))
    return claims


def _fmt_num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def claims(results: dict[str, Any]) -> list[Claim]:
    paper = _Paper(results)
    rows: list[Claim] = []
    rows += _throughput_claim(paper, SCALE, "n=", topic="Fig. 3", figure="scalability.png; report: peaks",
                              claim="Okapi's peak throughput is 50% above GentleRain's and slightly above Cure's "
                                    "(Fig. 3a)")
    rows.append(_latency_claim(paper))
    rows.append(_sessions_claim(paper))
    rows.append(_scaling_claim(paper))
    rows += _throughput_claim(paper, ROTX, "p=", topic="Fig. 4", figure="rotx_sweep.png; report: peaks",
                              claim="Okapi's throughput is slightly above Cure's for any p, up to 60% above "
                                    "GentleRain's up to 8 partitions (Fig. 4a)", gentlerain_upto=8)
    rows.append(_rotx_latency_claim(paper))
    rows += _cure_stalls_claim(paper)
    rows.append(_gentlerain_stalls_claim(paper))
    rows += _write_ratio_claims(paper)
    rows += _visibility_claims(paper)
    rows += _metadata_claims(paper)
    rows += _communication_claims(paper)
    return rows


def table(rows: Iterable[Claim], simulated: Sequence[str] | None = None) -> str:
    """The claims as the Markdown table docs/paper.md and the paper report carry; with ``simulated``
    (a cell per row, ``sim_claims.SimClaim.cell``) a last column: the claim simulated at the
    paper's scale."""
    head = "| # | topic | the paper | okapikv measured | where | verdict |"
    rule = "|---|---|---|---|---|---|"
    if simulated is not None:
        head, rule = head + " simulated at the paper's scale |", rule + "---|"
    lines = [head, rule]
    for index, claim in enumerate(rows, 1):
        line = (f"| {index} | {claim.topic} | {claim.claim} | {claim.measured} | {claim.figure} | "
                f"**{claim.verdict}**: {claim.why} |")
        if simulated is not None:
            line += f" {simulated[index - 1]} |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def render(results: dict[str, Any], simulated: Sequence[str] | None = None) -> str:
    """The claims table of a paper-suite results dictionary (with ``simulated``: ``table``)."""
    return table(claims(results), simulated)
