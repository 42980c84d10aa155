"""The command line every paired base/change script shares (``scripts/measure_*_path.py``).

A script compares two checkouts of the repository in alternating rounds of the same minutes (the
only comparison a shared, loaded machine supports: ratios of runs side by side, never absolute times):
``--base`` and ``--change`` name the trees, ``--rounds`` the pairs, and ``--one`` is how the script
runs itself in a subprocess whose ``PYTHONPATH`` selects one tree's ``src/``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def paired_parser(doc: str, *, rounds: int = 4) -> argparse.ArgumentParser:
    """A parser with ``--base``, ``--change`` (this checkout by default), ``--rounds`` and ``--one``;
    its description is ``doc``'s first line."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--base", type=Path, help="the tree to compare against (a checkout)")
    parser.add_argument("--change", type=Path, default=ROOT, help="the tree measured (default: this checkout)")
    parser.add_argument("--rounds", type=int, default=rounds, help="alternating pairs of runs")
    parser.add_argument("--one", action="store_true", help="time the tree this process imports, print JSON")
    return parser
