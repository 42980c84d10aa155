"""The fast suite's durable data-size row alone, paired: a tree's servers measured as the suite did
before against this checkout's, round by round in the same minutes.

Each round runs, for ``base`` and then ``change`` (the order alternating from round to round), the
row's two partitions: a fresh durable partition bulk-loaded with ``--large`` records and one with
``--small``, both running at once and measured under YCSB-A with 64 sessions back to back, the
large one first in odd rounds and second in even ones (``suites.fast.durable_size_pair``, what
``okapi bench --suite fast`` runs). ``base`` runs ``--base``'s servers and measures right
after the load (``--base`` defaults to this checkout: the same servers, only the wait differs);
``change`` runs this checkout's and waits for the load's checkpoints first
(``Bench.settle_checkpoints``); with ``--settle-base`` ``base`` waits too, so the two trees' servers
are measured alike (a change to the serving path, not to the load's aftermath). Prints each round's
YCSB-A ops/s at ``--large`` over ``--small`` for both (with each window's server CPU per operation
and the seconds of CPython's collector in it), and the medians.

    python scripts/measure_durable_scale.py [--base DIR] [--settle-base] [--rounds 3] [--large 1000000] [--small 10000]

``DIR``: a tree holding ``src/okapikv`` (``git archive REV src | tar -x -C DIR`` makes one of a
commit).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout: its benchmarks/ lab
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")  # as benchmarks.cli: the harness forks

from benchmarks.harness.harness import Bench, open_bench
from benchmarks.harness.options import BenchOptions
from benchmarks.suites.fast import durable_size_pair
from okapikv.bench.engine.results import Results


@contextlib.contextmanager
def _servers_of(tree: Path) -> Iterator[None]:
    """Servers started meanwhile run ``tree``'s ``okapikv`` (they take this process's environment)."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tree / "src")
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


def _ratio(bench: Bench, tree: Path, sizes: tuple[int, int], settle: bool,
           first: str) -> tuple[float | None, float | None, str]:
    """YCSB-A ops/s at the large size over the small one, the server CPU per operation at the large
    size over the small one, and a line saying what was measured."""
    with _servers_of(tree):
        found = durable_size_pair(bench, {"large": sizes[0], "small": sizes[1]}, "durable data size, paired",
                                  first=first, settle=settle)
    large, small = (found[name].run for name in ("large", "small"))
    figures = [run.throughput_ops_s if run is not None else 0.0 for run in (large, small)]
    waits = [f"{found[name].checkpoint_s:.1f}" for name in ("large", "small") if found[name].checkpoint_s is not None]
    collector = [f"{run.cpu.server_collector_s * 1e3:.1f}" if run is not None and run.cpu.server_collector_s is not None
                 else "?" for run in (large, small)]
    cpu = [f"{run.cpu.server_cpu_us_per_op:.1f}" if run is not None and run.cpu.server_cpu_us_per_op is not None
           else "?" for run in (large, small)]
    ratio = figures[0] / figures[1] if figures[0] and figures[1] else None
    per_op = [run.cpu.server_cpu_us_per_op if run is not None else None for run in (large, small)]
    cpu_ratio = per_op[0] / per_op[1] if per_op[0] and per_op[1] else None
    return ratio, cpu_ratio, (f"{figures[0]:,.0f} / {figures[1]:,.0f} ops/s, server CPU {' / '.join(cpu)} us "
                              f"per operation, {first} first, collector {' / '.join(collector)} ms in the windows"
                              + (f", checkpoints waited for {' / '.join(waits)} s" if waits else ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, default=ROOT)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--settle-base", action="store_true",
                        help="the base tree waits for the load's checkpoints too (both measured alike)")
    args = parser.parse_args()
    if args.rounds < 1 or args.small < 1 or args.large < 1:
        parser.error("--rounds, --large and --small must be positive")
    sizes = (args.large, args.small)
    ratios: dict[str, list[float]] = {"base": [], "change": []}
    cpu_ratios: dict[str, list[float]] = {"base": [], "change": []}
    options = BenchOptions(progress=False, redis=False, processes=1, records=args.small)
    with open_bench(options, Results(config={}), 4 * args.rounds) as bench:
        for index in range(args.rounds):
            order = ("base", "change") if index % 2 == 0 else ("change", "base")
            for name in order:
                tree, settle = (args.base, args.settle_base) if name == "base" else (ROOT, True)
                ratio, cpu_ratio, line = _ratio(bench, tree, sizes, settle, ("large", "small")[index % 2])
                if ratio is not None:
                    ratios[name].append(ratio)
                if cpu_ratio is not None:
                    cpu_ratios[name].append(cpu_ratio)
                shown = f"x{ratio:.3f}" if ratio is not None else "failed"
                print(f"round {index + 1} {name:<6} {args.large:,} / {args.small:,} records: {shown} ({line}; "
                      f"load average {os.getloadavg()[0]:.1f})", flush=True)
    for name, found in ratios.items():
        if found:
            print(f"{name}: median x{statistics.median(found):.3f} over {len(found)} rounds "
                  f"({min(found):.3f}-{max(found):.3f})")
        cpu = cpu_ratios[name]
        if cpu:
            print(f"{name}: server CPU per operation, large over small: median x{statistics.median(cpu):.3f} "
                  f"({min(cpu):.3f}-{max(cpu):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
