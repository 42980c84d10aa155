"""The benchmark lab from the ``okapi`` command: `okapi bench`, `okapi calibrate` and
`okapi sim --experiment` run code of the repository's top-level ``benchmarks/`` package (the
suites, the paper claims, the acceptance targets, calibration, the harness that starts clusters),
which an installed okapikv does not carry (docs/benchmarks.md, "Where the benchmarks live").

Where it is looked for, first found wins: the checkout this okapikv's source lies in (an editable
install, or ``PYTHONPATH=src``), then the working directory, then anything already importable as
``benchmarks``. Without one the command says in one line how to get it and exits 2.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import okapikv

PACKAGE = "benchmarks"
HINT = ("it lives in the repository's benchmarks/ directory, which an installed okapikv does not carry: "
        "run it in a checkout (git clone the okapikv repository; pip install -e '.[bench]' there)")


class LabMissing(RuntimeError):
    """No ``benchmarks/`` package is reachable from here."""


def lab_root() -> Path | None:
    """The directory holding ``benchmarks/`` (None: only an importable ``benchmarks``, or none)."""
    checkout = Path(okapikv.__file__).resolve().parents[2]
    for root in (checkout, Path.cwd()):
        if (root / PACKAGE / "__init__.py").is_file():
            return root
    return None


def load(module: str) -> ModuleType:
    """``benchmarks.<module>``, or ``LabMissing`` (with ``HINT``) when there is no lab."""
    root = lab_root()
    if root is not None and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    if root is None and importlib.util.find_spec(PACKAGE) is None:
        raise LabMissing(HINT)
    return importlib.import_module(f"{PACKAGE}.{module}")


def _run(command: str, module: str, function: str, args: argparse.Namespace) -> int:
    try:
        lab = load(module)
    except LabMissing as error:
        print(f"okapi {command}: the benchmark lab is not here: {error}", file=sys.stderr)
        return 2
    result: int = getattr(lab, function)(args)
    return result


def run_bench(args: argparse.Namespace) -> int:
    """`okapi bench` (``benchmarks.cli``)."""
    return _run("bench", "cli", "run_bench", args)


def run_calibrate(args: argparse.Namespace) -> int:
    """`okapi calibrate` (``benchmarks.calibrate_command``)."""
    return _run("calibrate", "calibrate_command", "run_calibrate", args)


def run_experiment(args: argparse.Namespace) -> int:
    """`okapi sim --experiment NAME` (``benchmarks.sim_experiments``)."""
    return _run("sim", "sim_experiments", "run_experiment_command", args)
