"""``scripts/measure_collapse_stall.py`` (docs/benchmarks.md, "The heap's collapse and the serving
thread"): it times reads alone, during a collapse and after, in both modes, on a small store."""

from __future__ import annotations

import subprocess
import sys

from scripts_support import ROOT


def test_the_collapse_stall_script_reads_before_during_and_after_in_both_modes() -> None:
    for mode in ("blocks", "range"):
        done = subprocess.run([sys.executable, str(ROOT / "scripts" / "measure_collapse_stall.py"), "--keys", "20000",
                               "--seconds", "0.2", "--mode", mode], capture_output=True, text=True, timeout=120,
                              check=True)
        lines = done.stdout.splitlines()
        heads = [line.split(":")[0] for line in lines[1:]]
        assert heads[:2] == ["alone", f"while collapsing ({mode})"] and heads[3] == "after"
        assert lines[3].startswith("collapsed ") and "chunks over 2 ms" in lines[4]
