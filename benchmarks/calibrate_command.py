"""``okapi calibrate``: write a cost profile of this machine, or validate one against real runs.

    okapi calibrate --out profile.json            # time the core's handlers (benchmarks.calibrate)
    okapi calibrate --validate A/results.json B/results.json --profile profile.json \\
        --fit "okapi P4 p=2 c=12" --markdown table.md  # fit on one real run, predict the others

Exit status 0, or 2 on bad arguments or unreadable files.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks.calibrate import calibrate, summary_lines, write_profile
from benchmarks.validate import as_json, load_points, summary, table_lines, validate
from okapikv.sim.cost import load_profile


def run_calibrate(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    if args.validate:
        try:
            profile = load_profile(args.profile)
            points = load_points(args.validate)
            fitted, figures, rows = validate(profile, points, args.fit, duration_s=args.sim_duration_s,
                                            shared_cores=args.shared_cores)
        except (ValueError, OSError, KeyError, json.JSONDecodeError) as error:
            print(f"okapi calibrate: {error}", file=sys.stderr)
            return 2
        lines = [summary(figures), "", *table_lines(rows)]
        for line in lines:
            print(line)
        if args.markdown:
            Path(args.markdown).write_text("\n".join(lines) + "\n", encoding="utf-8")
        if args.fitted_out:
            write_profile(fitted, args.fitted_out)
            Path(args.fitted_out).with_suffix(".rows.json").write_text(json.dumps(as_json(rows), indent=1) + "\n")
        print(f"validated in {time.perf_counter() - started:.0f} s")
        return 0
    profile, timings = calibrate(name=args.name, duration_s=args.duration_s, cores=args.cores)
    for line in summary_lines(timings):
        print(line)
    write_profile(profile, args.out)
    print(f"okapi calibrate: wrote {args.out} in {time.perf_counter() - started:.0f} s")
    return 0
