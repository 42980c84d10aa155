"""Merge one simulated experiment run in parts into one results folder.

    python scripts/merge_sim_results.py OUT PART [PART ...]

Each PART is the folder of one ``okapi sim --experiment NAME --protocols SYSTEM ... --out PART``
(the same experiment, plan and cost model, other systems): every system's runs are independent
(each begins with its own checked run), so running the systems as separate processes gives the
runs one command would, on as many cores. OUT gets results.json with every part's series runs,
visibility and notes, the commands and the simulation CPU time summed, and the CSVs, plots and
report.md written from it as ``okapi sim --experiment`` writes them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: its benchmarks/ lab

from okapikv.bench.engine.report import write_outputs

#: what must agree between the parts: the experiment and everything but the systems
_SAME = ("suite", "dcs", "partitions", "duration_s", "warmup_s", "clients_per_partition", "sweep_steps",
         "cost_profile")


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The parts' results as one (``ValueError`` if they are not parts of one experiment and model)."""
    merged: dict[str, Any] = json.loads(json.dumps(parts[0]))
    merged.pop("files", None)
    config = merged["config"]
    for part in parts[1:]:
        other = part["config"]
        differ = [key for key in _SAME if other.get(key) != config.get(key)]
        if differ:
            raise ValueError(f"not parts of one experiment: {', '.join(differ)} differ")
        config["protocols"] = [*config["protocols"], *other["protocols"]]
        config["command"] = f"{config['command']}; {other['command']}"
        if "sweep_start" in other:  # each system's sweep starts where its part's did
            config["sweep_start"] = {**config.get("sweep_start", {}), **other["sweep_start"]}
        for name, series in part["series"].items():
            if name in merged["series"]:
                merged["series"][name]["runs"] += series["runs"]
            else:
                merged["series"][name] = series
        merged["visibility"].update(part.get("visibility", {}))
        merged["notes"] += part["notes"]
        for phase, seconds in part.get("timings_s", {}).items():
            merged["timings_s"][phase] = round(merged["timings_s"].get(phase, 0.0) + seconds, 2)
    return merged


def main(out: Path, parts: list[Path]) -> None:
    from benchmarks.suites import paper_plots  # matplotlib: only to draw

    merged = merge([json.loads((part / "results.json").read_text(encoding="utf-8")) for part in parts])
    write_outputs(merged, out, figures=paper_plots.FIGURES)
    print(f"merged {len(parts)} parts into {out}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), [Path(arg) for arg in sys.argv[2:]])
