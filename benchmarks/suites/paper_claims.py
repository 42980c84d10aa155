"""The paper's evaluation claim by claim (Okapi, section 5): one table, judged the same way for real
and simulated measurements.

``CLAIMS`` holds the 19 claims, each a ``Row``: what the paper says, the figure okapikv shows it in,
which fields of the typed ``measurements.Measurements`` its rule reads, and the rule. ``judge``
gives, for one record, what was measured (computed, never typed in) and a verdict by the rule:
``reproduced`` (the direction and the size the paper states, its sizes taken as bounds), ``partly``
(the direction, not the size, or only part of the claim), ``not`` (the opposite), ``inconclusive``
(the figures cannot carry a verdict: a peak that is a lower bound, a simulated window too short, a
peak set by one hot server), ``by construction`` (the figure is the claim's formula: the simulator
counts metadata bytes by the core's formula) or ``n/a`` (nothing measured speaks to the claim),
each with the reason. The record comes from a paper-suite results.json (``from_real``) or from the
simulated experiments (``from_simulated``); a verdict depends on the figures alone, never on their
source. ``render`` is the table docs/paper.md carries, a column for each source; a test checks
that the committed table is this function of the committed results.

Throughput ratios within 5% count as equal: on a shared 2-core machine runs minutes apart drift by
more than that (docs/benchmarks.md, "How to read them"); simulated runs are deterministic, so there
a ratio within 5% is a tie of the model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from benchmarks.suites.measurements import (
    SYSTEMS,
    Communication,
    Measurements,
    Peak,
    RotxStall,
    Source,
    Sweep,
    from_real,
)

REPRODUCED, PARTLY, NOT = "reproduced", "partly", "not"
#: no verdict: the figure is a lower bound (a peak at its search's session cap or its sweep's last
#: step), or the measurement cannot carry the claim (the reason says why)
INCONCLUSIVE = "inconclusive"
#: the figure is the formula the claim states, computed, not measured: it cannot fail
BY_CONSTRUCTION = "by construction"
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
#: "grows with the partitions" (Fig. 4c): a stall probability may fall by at most this much from one
#: p to the next (a probability near 1 has no room left to grow: 95% at p = 16 and 32)
PROBABILITY_NOISE = 0.02


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

def _listing(pairs: Sequence[tuple[Any, float | None]], label: str) -> str:
    return ", ".join(f"{label}{point:g}: {_x(ratio)}" for point, ratio in pairs)


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


def considerably_verdict(cells: Sequence[tuple[float, float]]) -> tuple[str, str]:
    """Row 6's rule, real and simulated alike, over cells of (GentleRain / Okapi, Cure / Okapi) RO-TX
    latency at the same throughput (``measurements.equal_throughput``): "considerably higher" is at
    least ``CONSIDERABLY``. **reproduced**: GentleRain's at every cell and Cure's at three quarters of
    them; **partly**: both higher than Okapi's at three quarters of them, not by the size; **not**:
    else."""
    total = len(cells)
    gr_big = sum(gr >= CONSIDERABLY for gr, _ in cells)
    cure_big = sum(cure >= CONSIDERABLY for _, cure in cells)
    higher = sum(gr > 1 + EQUAL and cure > 1 + EQUAL for gr, cure in cells)
    counts = (f"x{CONSIDERABLY:g} or more at {gr_big} (GentleRain) and {cure_big} (Cure) of {total} throughputs; "
              f"both above Okapi at {higher}")
    if gr_big == total and cure_big >= total * 0.75:
        return REPRODUCED, counts
    if higher >= total * 0.75:
        return PARTLY, counts + ": higher, not considerably everywhere"
    return NOT, counts + ": Okapi's RO-TX is not the fastest at most throughputs"


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


def _fmt_bytes(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} B"


def _fmt_num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def table(rows: Iterable[Claim], simulated: Sequence[str] | None = None) -> str:
    """The claims as the Markdown table docs/paper.md and the paper report carry; with ``simulated``
    (a cell per row, ``cell``) a last column: the claim simulated at the
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



#: a simulated peak whose busiest server is saturated (``SATURATED`` of its cores or more) while its
#: CPU share exceeds the median server's by this factor is one hot server's, not the deployment's:
#: no verdict from it. Below saturation a spread is no bottleneck (GentleRain's servers in the DC
#: nearest the others complete more RO-TXs, as the paper's would)
HOT_SERVER_SPREAD = 1.3
SATURATED = 0.9
#: no measurement speaks to the claim (the reason says why)
SILENT = "n/a"

#: what a rule gives: (what was measured, the verdict, why)
Judged = tuple[str, str, str]


def _evidence(sweep: Sweep, what: str) -> str:
    """What a row's figure rests on: ``what`` (the runs), in each run's measured window."""
    if sweep.window_s and sweep.warmup_s is not None:
        return f" [{what}; each run's {sweep.window_s:g} s window after {sweep.warmup_s:g} s]"
    return f" [{what}]"


def _runs_of(sweep: Sweep, at_peak: str, what: str) -> str:
    """``at_peak`` (which peak runs) for a sweep of peaks, each ``what``'s run at its fixed load else."""
    if sweep.at_peak:
        return at_peak
    load = f" ({sweep.fixed_load} clients per partition of each DC)" if sweep.fixed_load else ""
    return f"each {what}'s run at a fixed load{load}"


def _capped(source: Source, bounds: list[str]) -> str:
    named = ", ".join(bounds[:4]) + (f" and {len(bounds) - 4} more" if len(bounds) > 4 else "")
    return f"{len(bounds)} peak(s) {source.bound}, lower bounds ({named}): no verdict from them ({source.remedy})"


def _lower_bounds(sweep: Sweep) -> list[str]:
    return [f"{peak.system} at {sweep.key} {peak.point:g}" for peak in sweep.peaks
            if sweep.at_peak and peak.system in SYSTEMS and peak.lower_bound]


def _hot(sweep: Sweep) -> list[str]:
    """The peaks whose busiest server is saturated and ``HOT_SERVER_SPREAD`` above the median one."""
    return [f"{peak.system} ({peak.busy_max:.0%} / {peak.busy_median:.0%})" for peak in sweep.peaks
            if sweep.at_peak and peak.busy_max is not None and peak.busy_median
            and peak.busy_max >= SATURATED and peak.busy_max / peak.busy_median >= HOT_SERVER_SPREAD]


def _gate(m: Measurements, sweep: Sweep,
          lower_bounds: Callable[[Sweep], list[str]] | None = None) -> str | None:
    """Why ``sweep``'s figures carry no verdict, or None: runs that cannot carry one, peaks that are
    lower bounds (those ``lower_bounds`` names: every one by default), peaks set by one hot server
    (every reason that holds, in that order)."""
    reasons = [sweep.untrusted] if sweep.untrusted else []
    bounds = (lower_bounds or _lower_bounds)(sweep)
    if bounds:
        reasons.append(_capped(m.source, bounds))
    hot = _hot(sweep)
    if hot:
        reasons.append(f"peaks set by one hot server (the busiest saturated, x{HOT_SERVER_SPREAD:g} the median or "
                       "more): " + ", ".join(hot))
    return "; ".join(reasons) or None


def _ratios(sweep: Sweep, a: str, b: str, upto: float | None = None) -> list[tuple[float, float | None]]:
    return [(point, _ratio(_throughput_of(sweep.get(a, point)), _throughput_of(sweep.get(b, point))))
            for point in sweep.points() if upto is None or point <= upto]


def _throughput_of(peak: Peak | None) -> float | None:
    return None if peak is None else peak.throughput_ops_s


def _throughput_rule(sweep_of: Callable[[Measurements], Sweep], label: str,
                     gentlerain_upto: float | None = None) -> Callable[[Measurements], Judged]:
    """Okapi against Cure and GentleRain at every point, by ``throughput_verdict`` (with
    ``gentlerain_upto``: GentleRain judged at its best point up to that level, "up to 60% ... up to 8
    partitions"); **inconclusive** where the sweep cannot carry a verdict (``_gate``)."""
    def rule(m: Measurements) -> Judged:
        sweep = sweep_of(m)
        cure, gentlerain = _ratios(sweep, "okapi", "cure"), _ratios(sweep, "okapi", "gentlerain", gentlerain_upto)
        known_cure = [ratio for _, ratio in cure if ratio is not None]
        known_gr = [ratio for _, ratio in gentlerain if ratio is not None]
        if not known_cure or not known_gr:
            return "-", SILENT, "the measurements have no peaks of these systems"
        measured = (f"Okapi / Cure {_listing(cure, label)}; Okapi / GentleRain {_listing(gentlerain, label)}"
                    + _evidence(sweep, "each point's peak run"))
        reason = _gate(m, sweep)
        if reason:
            return measured, INCONCLUSIVE, reason
        verdict, why = throughput_verdict(known_cure, known_gr, gentlerain_at_most=gentlerain_upto is not None)
        return measured, verdict, why + m.source.drift
    return rule


def _latency_rule(m: Measurements) -> Judged:
    sweep = m.scalability
    rows = []
    ratios: dict[str, list[float]] = {"rotx_gr": [], "rotx_cure": [], "put_gr": [], "put_cure": []}
    for point in sweep.points():
        okapi = sweep.get("okapi", point)
        found: dict[str, float | None] = {}
        for system, short in (("gentlerain", "gr"), ("cure", "cure")):
            other = sweep.get(system, point)
            if other is None or okapi is None:
                found[f"rotx_{short}"] = found[f"put_{short}"] = None
            else:
                found[f"rotx_{short}"] = _ratio(other.rotx_mean_ms, okapi.rotx_mean_ms)
                found[f"put_{short}"] = _ratio(other.put_mean_ms, okapi.put_mean_ms)
        for name, value in found.items():
            if value is not None:
                ratios[name].append(value)
        rows.append(f"{point} partition(s): RO-TX GentleRain {_x(found['rotx_gr'])}, Cure {_x(found['rotx_cure'])}; "
                    f"PUT GentleRain {_x(found['put_gr'])}, Cure {_x(found['put_cure'])}")
    if not rows or not ratios["rotx_gr"] or not ratios["rotx_cure"]:
        return "-", SILENT, "no scalability peaks"
    measured = "mean at the peak, over Okapi's: " + "; ".join(rows) + _evidence(sweep, "the scalability peaks' runs")
    reason = _gate(m, sweep)
    if reason:
        return measured, INCONCLUSIVE, reason
    verdict, why = latency_verdict(ratios["rotx_gr"], ratios["rotx_cure"], ratios["put_gr"], ratios["put_cure"])
    return measured, verdict, why


def _unsettled_bounds(sweep: Sweep) -> list[str]:
    """Row 3's lower bounds that could change its count: Okapi's (its knee may need more), and a
    baseline's at no more than Okapi's load. A baseline's lower bound already past the load of
    Okapi's knee says what the row counts: its knee needs more than Okapi's."""
    unsettled = []
    for bound, peak in zip(_lower_bounds(sweep), (p for p in sweep.peaks if sweep.at_peak and p.system in SYSTEMS
                                                  and p.lower_bound), strict=True):
        okapi = sweep.get("okapi", peak.point)
        settled = (peak.system != "okapi" and okapi is not None and not okapi.lower_bound
                   and okapi.load is not None and peak.load is not None and peak.load > okapi.load)
        if not settled:
            unsettled.append(bound)
    return unsettled


def _sessions_rule(m: Measurements) -> Judged:
    load = m.source.load
    sweeps = [sweep for sweep in (m.rotx, m.writes, m.scalability) if sweep.at_peak]
    rows: list[dict[str, int]] = []
    for sweep in sweeps:
        for point in sweep.points():
            peaks = {system: sweep.get(system, point) for system in SYSTEMS}
            loads = {system: peak.load for system, peak in peaks.items() if peak is not None and peak.load is not None}
            if len(loads) == len(SYSTEMS):
                rows.append(loads)
    if not rows:
        return "-", SILENT, "no peaks of all three systems"
    total = len(rows)
    more_gr = sum(row["gentlerain"] > row["okapi"] for row in rows)
    more_cure = sum(row["cure"] > row["okapi"] for row in rows)

    def median(system: str) -> float:
        values = sorted(row[system] for row in rows)
        return float(values[len(values) // 2])
    measured = (f"median {load} at the peak: Okapi {median('okapi'):g}, Cure {median('cure'):g}, GentleRain "
                f"{median('gentlerain'):g}; more than Okapi at {more_cure} (Cure) and {more_gr} (GentleRain) of "
                f"{total} points")
    untrusted = next((sweep.untrusted for sweep in sweeps if sweep.untrusted), None)
    if untrusted:
        return measured, INCONCLUSIVE, untrusted
    bounds = [bound for sweep in sweeps for bound in _unsettled_bounds(sweep)]
    if bounds:
        return measured, INCONCLUSIVE, (f"the {load} of a peak {m.source.bound_one} say only that more were needed: "
                                        + _capped(m.source, bounds))
    reason = next((reason for sweep in sweeps if (reason := _gate(m, sweep, _unsettled_bounds))), None)
    if reason:
        return measured, INCONCLUSIVE, reason
    if more_gr >= total * 0.75 and more_cure >= total / 2:
        return measured, REPRODUCED, f"at most points both need more {load}"
    if more_gr >= total / 2:
        return measured, PARTLY, f"GentleRain needs more {load}; Cure not more than Okapi at most points"
    if more_cure >= total / 2:
        return measured, PARTLY, f"Cure needs more {load}; GentleRain not more than Okapi at most points"
    return measured, NOT, f"the three peak at about the same {load}: the CPU, not the waiting, bounds each"


def _scaling_rule(m: Measurements) -> Judged:
    """"Scales": each system's peak within 75% of linear in the partitions (the paper's Fig. 3a is
    near linear); **partly** when every system gains (more than x1.5), less than linearly."""
    sweep = m.scalability
    points = sweep.points()
    if len(points) < 2:
        return "-", SILENT, "one partition level only"
    low, high = points[0], points[-1]
    systems = [system for system in SYSTEMS if any(peak.system == system for peak in sweep.peaks)]
    growth = {system: _ratio(_throughput_of(sweep.get(system, high)), _throughput_of(sweep.get(system, low)))
              for system in systems}
    measured = f"peak at {high} over {low} partition(s) per DC: " + ", ".join(
        f"{system} {_x(ratio)}" for system, ratio in growth.items()) + _evidence(sweep, "the scalability peaks' runs")
    reason = _gate(m, sweep)
    if reason:
        return measured, INCONCLUSIVE, reason
    linear = high / low
    known = [ratio for ratio in growth.values() if ratio is not None]
    if known and all(ratio >= 0.75 * linear for ratio in known):
        return measured, REPRODUCED, f"every system within 75% of linear (x{linear:g} the partitions)"
    if known and all(ratio > 1.5 for ratio in known):
        return measured, PARTLY, f"every system gains, less than linearly (x{linear:g} the partitions)"
    return measured, NOT, "some system does not gain from added partitions (x1.5 or less)"


def _rotx_latency_rule(m: Measurements) -> Judged:
    cells = m.rotx_latency
    if not cells:
        return "-", SILENT, "no throughput that all three systems' curves reach at one p"
    measured = (f"at the same p and throughput ({len(cells)} of Okapi's steps, the others' curves "
                f"between their steps): GentleRain / Okapi "
                f"{_span(c.gentlerain / c.okapi for c in cells)}, Cure / Okapi "
                f"{_span(c.cure / c.okapi for c in cells)}" + _evidence(m.rotx, m.rotx_latency_what))
    if m.rotx.untrusted:
        return measured, INCONCLUSIVE, m.rotx.untrusted
    verdict, why = considerably_verdict([(c.gentlerain / c.okapi, c.cure / c.okapi) for c in cells])
    return measured, verdict, why


def _stalls(m: Measurements, system: str) -> list[RotxStall]:
    """``system``'s RO-TX stalls at each p's peak of the RO-TX sweep."""
    points = m.rotx.points()
    return sorted((stall for stall in m.rotx_stalls if stall.system == system and stall.p in points),
                  key=lambda stall: stall.p)


def _stall_probabilities(stalls: Sequence[RotxStall]) -> tuple[str, list[float]]:
    """Per transaction where the servers count it, else per slice (each server's own count): the
    text and the probabilities in p order (empty with fewer than two p levels)."""
    tx = [stall for stall in stalls if stall.tx_probability is not None]
    if len(tx) >= 2:
        return ("per transaction " + ", ".join(f"p={s.p}: {_pct(s.tx_probability)}" for s in tx) + "; per slice "
                + ", ".join(f"p={s.p}: {_pct(s.slice_probability)}" for s in tx),
                [stall.tx_probability or 0.0 for stall in tx])
    tx = [stall for stall in stalls if stall.slice_probability is not None]
    if len(tx) < 2:
        return "", []
    return ("per slice " + ", ".join(f"p={s.p}: {_pct(s.slice_probability)}" for s in tx),
            [stall.slice_probability or 0.0 for stall in tx])


def _cure_stalls_rule(m: Measurements) -> Judged:
    """Judged below saturation (each p's first step) where measured there, as row 9 is: at a
    saturated peak a slice also waits in its server's queue, and a queue longer than the clock skew
    lets the clock pass the snapshot before the slice runs, so the peaks show a queue's length as
    well as the protocol's stall. The paper's C++ servers cost about a tenth of okapikv's Python per
    request (docs/simulated.md, "The paper profile"), so their queues at a peak are that much
    shorter in time. The peaks' figures are shown beside."""
    at_peaks, peak_probabilities = _stall_probabilities(_stalls(m, "cure"))
    below_text, below_probabilities = _stall_probabilities(
        sorted((s for s in m.stalls_below if s.system == "cure"), key=lambda s: s.p))
    if not peak_probabilities and not below_probabilities:
        return "-", SILENT, "fewer than two p levels"
    measured = "; ".join(part for part in (
        below_text and f"below saturation, {m.stalls_below_what}: {below_text}",
        at_peaks and f"at the peaks: {at_peaks}") if part)
    if m.rotx.untrusted:
        return measured, INCONCLUSIVE, m.rotx.untrusted
    judged, where = ((below_probabilities, "below saturation") if below_probabilities
                     else (peak_probabilities, f"at the peaks (each at its own {m.source.load[:-1]} count)"))
    grows = judged[-1] > judged[0]
    rising = grows and all(b >= a - PROBABILITY_NOISE for a, b in zip(judged, judged[1:], strict=False))
    if rising:
        return measured, REPRODUCED, (f"grows with p, never falling more than {PROBABILITY_NOISE:.0%} "
                                      f"from one p to the next, {where}")
    if grows:
        return measured, PARTLY, f"higher at the largest p than at 1, not at every step, {where}"
    return measured, NOT, f"does not grow with p {where}"


def _cure_skew_rule(m: Measurements) -> Judged:
    """Row 8, judged on the skew sweep (Cure's mean stall per transaction at each skew level, a fresh
    cluster each) by ``skew_verdict``: the paper says the waiting time is proportional to the clock
    skew (section 5, Fig. 4d). Without a sweep, the RO-TX sweep's stalls at its one skew are shown
    and the verdict is at most **partly** (one skew cannot show a duration following the skew)."""
    stalls = _stalls(m, "cure")
    means = [s.tx_mean_ms for s in stalls if s.tx_probability is not None and s.tx_mean_ms]
    per = "per transaction"
    if not means and not any(s.tx_probability is not None for s in stalls):
        means, per = [s.slice_mean_ms for s in stalls if s.slice_probability is not None and s.slice_mean_ms], \
            "per slice"
    at_one = f"{m.one_skew}: mean stall {per} {_span(means, _ms)}" if means else ""
    if len(m.skew) < 2:
        missing = m.source.no_skew_sweep
        if m.rotx.untrusted and means:
            return f"{at_one}; {missing}", INCONCLUSIVE, m.rotx.untrusted
        if not means:
            return missing, SILENT, "no Cure stalls measured"
        within = min(means) >= 5 and max(means) <= 10
        return f"{at_one}; {missing}", PARTLY, (
            ("within 5-10 ms at every p" if within else
             "Cure stalls for milliseconds, not within 5-10 ms at every p: a RO-TX waits only for the "
             "partitions of its own DC, so the largest offset inside a DC bounds the stall, and at the peak "
             "a stall also holds the queueing of a saturated machine")
            + "; whether the stall follows the skew needs the skew sweep (`okapi bench --suite paper`)")
    measured = (f"{m.skew_what}, mean stall per transaction at each skew (largest in-DC skew): "
                + ", ".join(f"{level.skew_ms:g} ms: {_ms(level.tx_mean_ms)} ({_ms(level.max_dc_skew_ms)})"
                            for level in m.skew) + (f"; {at_one}" if at_one else ""))
    verdict, why = skew_verdict([(level.skew_ms, level.tx_mean_ms) for level in m.skew])
    return measured, verdict, why


def _gentlerain_stalls_rule(m: Measurements) -> Judged:
    """Judged below saturation (``gentlerain_wait_verdict``): the real skew sweep's levels (a fixed,
    moderate load; the wait is for the furthest DC whatever the skew), each simulated p's first
    sweep step. The RO-TX sweep's peaks are shown, not judged: at a peak a wait also holds a
    saturated machine's queueing."""
    shown = ", ".join(f"p={s.p}: {_pct(s.tx_probability)} for {_ms(s.tx_mean_ms)}"
                      for s in _stalls(m, "gentlerain") if s.tx_probability is not None)
    if not shown and not m.gentlerain_below:
        return "-", SILENT, "no GentleRain runs"
    measured = f"at the peaks (shown, not judged) {shown}" if shown else ""
    if m.gentlerain_below:
        measured += ("; " if measured else "") + f"below saturation, {m.below_what}: " + ", ".join(
            f"{wait.label}: {_pct(wait.probability)} for {_ms(wait.mean_ms)}" for wait in m.gentlerain_below)
    if m.furthest_ms:
        measured += "; furthest DC one-way: " + ", ".join(f"{dc} {delay:g} ms" for dc, delay in m.furthest_ms)
    if not m.gentlerain_below:
        return measured, INCONCLUSIVE, ("measured only at the peaks, where a wait also holds a saturated machine's "
                                        "queueing; no waits below saturation in these measurements")
    if m.rotx.untrusted:
        return measured, INCONCLUSIVE, m.rotx.untrusted
    verdict, why = gentlerain_wait_verdict([(w.probability or 0.0, w.mean_ms or 0.0) for w in m.gentlerain_below],
                                           [delay for _, delay in m.furthest_ms])
    return measured, verdict, why


def _write_ratio_rule(m: Measurements) -> Judged:
    sweep = m.writes
    known = [(w, r) for w, r in _ratios(sweep, "okapi", "cure") if r is not None]
    if len(known) < 2:
        return "-", SILENT, "fewer than two write ratios"
    causes = [(cure.put_skew_probability, cure.put_tick_probability) if (cure := sweep.get("cure", w)) else
              (None, None) for w, _ in known]
    measured = f"Okapi / Cure {_listing(known, 'w=')}; Cure's PUTs waited for the skew / the clock " + \
        "microsecond " + ", ".join(f"w={w:g}: {_pct(skew)} / {_pct(tick)}"
                                   for (w, _), (skew, tick) in zip(known, causes, strict=True)) + \
        _evidence(sweep, _runs_of(sweep, "each ratio's peak run", "ratio") + "; waits: the servers' counters")
    reason = _gate(m, sweep)
    if reason:
        return measured, INCONCLUSIVE, reason
    verdict, why = write_ratio_verdict(known, [skew for skew, _ in causes])
    return measured, verdict, why


def _comparable_rule(m: Measurements) -> Judged:
    sweep = m.writes
    known = [(w, r) for w, r in _ratios(sweep, "okapi", "gentlerain") if r is not None]
    if not known:
        return "-", SILENT, "no GentleRain peaks"
    measured = f"Okapi / GentleRain {_listing(known, 'w=')}" + _evidence(
        sweep, _runs_of(sweep, "each ratio's peak run", "ratio"))
    reason = _gate(m, sweep)
    if reason:
        return measured, INCONCLUSIVE, reason
    verdict, why = comparable_verdict(known)
    return measured, verdict, why


class _OfSystem(Protocol):
    @property
    def system(self) -> str: ...


_Row = TypeVar("_Row", bound=_OfSystem)


def _every_system(rows: Iterable[_Row]) -> dict[str, _Row] | None:
    """``rows`` by system, or None where one of the three systems lacks its row."""
    found = {row.system: row for row in rows}
    return found if all(system in found for system in SYSTEMS) else None


def _visibility_order_rule(m: Measurements) -> Judged:
    found = _every_system(m.visibility)
    if found is None:
        return "-", SILENT, "the measurements lack a system's visibility"
    means = {system: found[system].mean_ms for system in SYSTEMS}
    measured = "mean over every pair: " + ", ".join(f"{system} {_ms(value)}" for system, value in means.items())
    if m.visibility_untrusted:
        return measured, INCONCLUSIVE, m.visibility_untrusted
    verdict, why = visibility_order_verdict(means)
    return measured, verdict, why


def _bimodal_rule(m: Measurements) -> Judged:
    found = _every_system(m.visibility)
    if found is None:
        return "-", SILENT, "the measurements lack a system's visibility"
    spreads = {system: found[system].source_spreads_ms for system in SYSTEMS}
    measured = "distance between the sources' medians at each destination: " + "; ".join(
        f"{system} {', '.join(f'{value:.0f}' for value in values)} ms" for system, values in spreads.items())
    if m.visibility_untrusted:
        return measured, INCONCLUSIVE, m.visibility_untrusted
    widest = {system: max(values, default=0.0) for system, values in spreads.items()}
    gr_max = widest["gentlerain"]
    if widest["okapi"] > gr_max and widest["cure"] > gr_max:
        return measured, REPRODUCED, "Okapi's and Cure's modes lie further apart than GentleRain's"
    if widest["okapi"] > gr_max or widest["cure"] > gr_max:
        return measured, PARTLY, "one of Okapi and Cure separates its sources more than GentleRain does"
    return measured, NOT, "GentleRain's sources are as far apart as the others'"


#: why a figure that is the core's byte formula (no wire encoded) holds **by construction**
FORMULA_ONLY = "the figures are the core's byte formula, the claim's own sizes, not an encoding: they cannot fail"


def _metadata_rule(m: Measurements) -> Judged:
    rows = _every_system(m.metadata)
    if rows is None:
        return "-", SILENT, "the measurements lack a system's replication figures"
    formula = ", ".join(f"{s} {rows[s].formula_bytes:g} B" for s in SYSTEMS)
    wire = {system: rows[system].wire_bytes for system in SYSTEMS}
    if any(value is None for value in wire.values()):
        return f"the formula per update: {formula}", BY_CONSTRUCTION, FORMULA_ONLY
    measured = f"formula: {formula}; on the wire (protobuf): " + ", ".join(f"{s} {_fmt_bytes(wire[s])}"
                                                                           for s in SYSTEMS)
    okapi, cure, gentlerain = (wire[s] or 0.0 for s in SYSTEMS)
    if abs(okapi - gentlerain) < 1 and cure >= 2 * okapi:
        return measured, REPRODUCED, ("the formula gives the paper's bytes; on the wire, varints and field tags make "
                                      "each update heavier, Okapi's equal to GentleRain's and Cure's more than twice "
                                      "theirs")
    return measured, PARTLY, "the formula gives the paper's bytes; the wire does not keep the ratio"


def _payload_rule(m: Measurements) -> Judged:
    rows = _every_system(m.metadata)
    if rows is None:
        return "-", SILENT, "the measurements lack a system's replication figures"
    payload = rows["okapi"].payload_bytes
    formula_ratio = (rows["cure"].formula_bytes + payload) / (rows["okapi"].formula_bytes + payload)
    wire_cure, wire_okapi = rows["cure"].wire_bytes, rows["okapi"].wire_bytes
    if wire_cure is None or wire_okapi is None:
        return f"formula x{formula_ratio:.2f}", BY_CONSTRUCTION, FORMULA_ONLY
    wire_ratio = _ratio(wire_cure + payload, wire_okapi + payload)
    measured = f"formula x{formula_ratio:.2f}; on the wire {_x(wire_ratio)}"
    if wire_ratio and wire_ratio >= 1.4:
        return measured, REPRODUCED, "Cure's update with its payload is half again as large or more"
    return measured, PARTLY, "the formula holds, the wire's ratio is smaller"


def _dc_growth_rule(m: Measurements) -> Judged:
    rows = _every_system(m.metadata)
    if rows is None:
        return "-", SILENT, "the measurements lack a system's replication figures"
    if any(row.wire_bytes is None for row in rows.values()):
        if m.metadata_other_dcs is None:
            return "-", SILENT, "no measurement at another DC count"
        dcs, more = m.metadata_other_dcs
        return (f"the formula per update at 3 / {dcs} DCs: "
                + ", ".join(f"{s} {rows[s].formula_bytes:g} / {value:g} B" for s, value in more if s in rows),
                BY_CONSTRUCTION, FORMULA_ONLY)
    return ("3 DCs only here: Cure's vector has an entry per DC (the formula 4 + 8 + 8 (M - 1); on the wire each "
            "entry is one varint), Okapi's and GentleRain's updates carry none", PARTLY,
            "follows from what an update carries; not measured at other DC counts")


def _communication(m: Measurements) -> tuple[list[float], dict[float, dict[str, Communication]]]:
    """The write ratios with all three systems' figures, and the figures by ratio and system."""
    by: dict[float, dict[str, Communication]] = {}
    for row in m.communication:
        by.setdefault(row.write_ratio, {})[row.system] = row
    return sorted(w for w, row in by.items() if all(system in row for system in SYSTEMS)), by


def _stabilization_rule(m: Measurements) -> Judged:
    ratios, by = _communication(m)
    if not ratios:
        return "-", SILENT, "no communication figures"
    measured = f"stabilization {m.stabilization_unit} " + "; ".join(
        f"w={w:g}: " + ", ".join(f"{s} {_fmt_num(by[w][s].stabilization)}" for s in SYSTEMS) for w in ratios)
    if m.communication_untrusted:
        return measured, INCONCLUSIVE, m.communication_untrusted
    rate = [{s: by[w][s].stabilization or 0.0 for s in SYSTEMS} for w in ratios]
    if all(row["okapi"] > max(row["cure"], row["gentlerain"]) for row in rate):
        return measured, REPRODUCED, "Okapi's stabilization bytes are the highest at every write ratio"
    if all(row["okapi"] > row["cure"] for row in rate):
        return measured, PARTLY, "above Cure's at every write ratio, not above GentleRain's"
    return measured, NOT, "not the highest at every write ratio"


def _total_rule(m: Measurements) -> Judged:
    ratios, by = _communication(m)
    if not ratios:
        return "-", SILENT, "no communication figures"
    low, high = ratios[0], ratios[-1]
    share = {w: _ratio(by[w]["okapi"].total_bytes_per_op, by[w]["cure"].total_bytes_per_op) for w in (low, high)}
    measured = "total B/op Okapi / Cure " + ", ".join(f"w={w:g}: {_x(r)}" for w, r in share.items())
    if m.communication_untrusted:
        return measured, INCONCLUSIVE, m.communication_untrusted
    at_low, at_high = share[low], share[high]
    falls = at_low is not None and at_high is not None and at_high < at_low
    below = at_high is not None and at_high < 1
    if falls and below:
        return measured, REPRODUCED, "Okapi's share falls with the write ratio and ends below Cure's"
    if falls or below:
        return measured, PARTLY, "only one of the two holds"
    return measured, NOT, "Okapi's stabilization dominates at every write ratio here"


def _efficient_rule(m: Measurements) -> Judged:
    ratios, by = _communication(m)
    if not ratios:
        return "-", SILENT, "no communication figures"
    lowest = [w for w in ratios if (by[w]["gentlerain"].stabilization or 0)
              <= min(by[w]["okapi"].stabilization or 0, by[w]["cure"].stabilization or 0)]
    measured = (f"GentleRain's stabilization {m.stabilization_unit} the lowest at {len(lowest)} of {len(ratios)} "
                "write ratios (the row above)")
    if m.communication_untrusted:
        return measured, INCONCLUSIVE, m.communication_untrusted
    if len(lowest) == len(ratios):
        return measured, REPRODUCED, "the lowest everywhere"
    if len(lowest) * 2 > len(ratios):
        return measured, PARTLY, ("the lowest at most ratios, not all: a run with more operations in its window "
                                  "spreads its timers' bytes thinner, and the runs ran at different loads")
    return measured, NOT, "not the lowest at most ratios"


@dataclass(frozen=True, slots=True)
class Row:
    """One of the paper's claims: what it says, where okapikv shows it, which ``Measurements``
    fields its rule reads, and the rule."""

    topic: str
    claim: str
    figure: str
    reads: tuple[str, ...]
    rule: Callable[[Measurements], Judged]


_FIG3, _FIG4 = "scalability.png; report: peaks", "rotx_sweep.png; report: peaks"
_WRITES = "write_ratio.png; paper-write-ratio.csv"
_VISIBILITY = "visibility_by_destination.png; report: visibility per destination; paper-visibility-by-destination.csv"
_METADATA = "metadata.png; report: replication metadata; paper-metadata.csv"
_COMMUNICATION = "report: communication per operation; paper-communication.csv; metadata.png"
_COMM_READS = ("communication", "stabilization_unit", "communication_untrusted")

#: The paper's 19 claims (Okapi, section 5), in the paper's order, each judged by its rule over
#: real or simulated measurements alike.
CLAIMS: tuple[Row, ...] = (
    Row("Fig. 3", "Okapi's peak throughput is 50% above GentleRain's and slightly above Cure's (Fig. 3a)", _FIG3,
        ("scalability",), _throughput_rule(lambda m: m.scalability, "n=")),
    Row("Fig. 3", "RO-TX and PUT latency much lower: up to 100x lower than GentleRain, 2x lower than Cure "
        "(Fig. 3b, 3c)", "report: paper figures, peaks; scalability.png", ("scalability",), _latency_rule),
    Row("Fig. 3", "Cure and GentleRain need many more clients than Okapi to saturate their resources (Fig. 3a)",
        "report: paper figures, peaks (sessions)", ("scalability", "rotx", "writes"), _sessions_rule),
    Row("Fig. 3", "Throughput scales with the partitions (2 to 32 partitions on their own machines) (Fig. 3a)",
        "scalability.png; paper-scalability.csv", ("scalability",), _scaling_rule),
    Row("Fig. 4", "Okapi's throughput is slightly above Cure's for any p, up to 60% above GentleRain's up to 8 "
        "partitions (Fig. 4a)", _FIG4, ("rotx",), _throughput_rule(lambda m: m.rotx, "p=", gentlerain_upto=8)),
    Row("Fig. 4-5", "Cure and GentleRain incur considerably higher RO-TX latency, for any value of throughput "
        "(Fig. 4b, 5)", "rotx_latency_vs_throughput.png; paper-rotx-partitions-sessions.csv",
        ("rotx", "rotx_latency", "rotx_latency_what"), _rotx_latency_rule),
    Row("Fig. 4", "In Cure the probability that a RO-TX stalls grows with the partitions it contacts (Fig. 4c)",
        "report: RO-TX stalls per transaction; waits_vs_rotx_partitions.png; paper-stalls.csv",
        ("rotx", "rotx_stalls", "stalls_below", "stalls_below_what"), _cure_stalls_rule),
    Row("Fig. 4", "Cure's stall lasts about the clock skew: 5-10 ms on average (Fig. 4d)",
        "report: RO-TX stalls against the clock skew; waits_vs_clock_skew.png; paper-skew.csv",
        ("rotx", "rotx_stalls", "skew", "skew_what", "one_skew"), _cure_skew_rule),
    Row("Fig. 4", "GentleRain's RO-TX always waits, about the delay to the furthest DC (Fig. 4c/d)",
        "report: RO-TX stalls per transaction and against the clock skew; paper-stalls.csv; paper-skew.csv",
        ("rotx", "rotx_stalls", "gentlerain_below", "below_what", "furthest_ms"), _gentlerain_stalls_rule),
    Row("writes", "Okapi's throughput is higher than Cure's, the more so the more writes (PUT stalls grow) "
        "(write sweep)", _WRITES, ("writes",), _write_ratio_rule),
    Row("writes", "Okapi is comparable to GentleRain; read-heavy workloads cost Okapi < 10% (vectors, not a scalar)",
        _WRITES, ("writes",), _comparable_rule),
    Row("visibility", "Okapi's remote update visibility latency is the highest, followed by Cure and GentleRain",
        _VISIBILITY, ("visibility", "visibility_untrusted"), _visibility_order_rule),
    Row("visibility", "Per destination DC, Okapi's and Cure's CDFs are bimodal (one mode per source DC), "
        "GentleRain's unimodal (Fig. 6)", _VISIBILITY, ("visibility", "visibility_untrusted"), _bimodal_rule),
    Row("metadata", "Okapi and GentleRain need 12 bytes of metadata per update (source replica 4, update time 8); "
        "Cure 28, more than twice", _METADATA, ("metadata",), _metadata_rule),
    Row("metadata", "With 16 B of key and value, Cure sends almost 60% more to replicate an update", _METADATA,
        ("metadata",), _payload_rule),
    Row("metadata", "Okapi's and GentleRain's metadata per update does not grow with the DCs; Cure's grows linearly",
        "tests/unit/test_wire_bytes.py; the formula in okapikv.core.stats", ("metadata", "metadata_other_dcs"),
        _dc_growth_rule),
    Row("communication", "UST's stabilization (an extra round between DCs) costs more than Cure's and GentleRain's",
        _COMMUNICATION, _COMM_READS, _stabilization_rule),
    Row("communication", "In total (stabilization + replication) Okapi is close to Cure when reads dominate and "
        "lower as writes grow", _COMMUNICATION, _COMM_READS, _total_rule),
    Row("communication", "GentleRain's stabilization is the most network-efficient at every write ratio",
        _COMMUNICATION, _COMM_READS, _efficient_rule),
)


def judge(measurements: Measurements) -> list[Claim]:
    """Every claim of ``CLAIMS``, in order, judged on ``measurements`` (real or simulated alike)."""
    return [Claim(row.topic, row.claim, row.figure, *row.rule(measurements)) for row in CLAIMS]


def claims(results: Mapping[str, Any]) -> list[Claim]:
    """The claims judged on a paper-suite results dictionary (``measurements.from_real``)."""
    return judge(from_real(results))


def cell(claim: Claim) -> str:
    """A claim's cell in docs/paper.md's "simulated at the paper's scale" column."""
    return f"{claim.measured}; **{claim.verdict}**: {claim.why}"


#: The claims whose figures rest on what a blocked request costs its server (docs/simulated.md,
#: "The cost of a blocked request"): rows 1-3 read the peaks, where a server's capacity is the
#: question and GentleRain parks most of its clients; rows 10 and 11 the write sweep's throughput.
#: 1-based, as the table numbers them.
BLOCKING_ROWS = (1, 2, 3, 10, 11)


def render_models(models: Sequence[tuple[str, Measurements]], rows: Sequence[int] = BLOCKING_ROWS) -> str:
    """The claims ``rows`` judged on each of ``models`` (a label, the measurements under that model)
    side by side, a column each: the same rules (``judge``) and cells (``cell``) as ``render``."""
    judged = [judge(measurements) for _, measurements in models]
    lines = ["| # | the paper | " + " | ".join(label for label, _ in models) + " |",
             "|---|---|" + "---|" * len(models)]
    for row in rows:
        lines.append(f"| {row} | {CLAIMS[row - 1].claim} | "
                     + " | ".join(cell(claims_of[row - 1]) for claims_of in judged) + " |")
    return "\n".join(lines) + "\n"


def render(real: Measurements, simulated: Measurements | None = None) -> str:
    """The claims table of the real measurements, with ``simulated``: a column of the claims judged
    on the simulated ones (``cell``)."""
    return table(judge(real), None if simulated is None else [cell(claim) for claim in judge(simulated)])
