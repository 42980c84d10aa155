"""``okapi check HISTORY.jsonl``: run the checkers on a recorded history (simulated, real or fuzz)."""

from __future__ import annotations

import argparse
import sys

from okapikv.check.history import HistoryError, load_history
from okapikv.check.report import check_history


def run_check(args: argparse.Namespace) -> int:
    """Exit 0 when no anomaly is found, 1 when some are, 2 when the file cannot be read or holds no
    operation."""
    try:
        history = load_history(args.history)
    except (OSError, HistoryError) as error:
        print(f"okapi check: {error}", file=sys.stderr)
        return 2
    if not history.operations:  # an empty file, or a run that recorded nothing: no evidence of anything
        print(f"okapi check: {args.history} holds no operations: nothing to check", file=sys.stderr)
        return 2
    report = check_history(history)
    source = history.meta.get("source", "unknown source")
    print(f"{args.history}: {source}, {len(history.dcs)} DC(s)")
    for line in report.summary_lines(max_anomalies=20):
        print(line)
    return 0 if report.ok else 1
