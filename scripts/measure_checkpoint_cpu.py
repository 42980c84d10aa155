"""What a checkpoint costs the server process: folded on its own thread against in a checkpoint process.

Logs ``--rows`` inserts into a fresh store (``benchmarks.harness.storage_costs.log_inserts``), then
checkpoints them either in process (``LoggedStore.checkpoint()``, as a clean shutdown does) or in a
checkpoint process (``checkpoint(in_process=False)``, as a server's background checkpoints do), in
paired rounds, and prints each one's wall time, the CPU it took in this process (what a server's
event loop would have to share the interpreter with) and in its child processes. CPU seconds, unlike
wall time, hardly move with the load of a shared machine (docs/benchmarks.md, "Checkpoints out of the
server process").

    python scripts/measure_checkpoint_cpu.py --rows 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: its benchmarks/ lab

from benchmarks.harness.storage_costs import log_inserts


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go (default: $TMPDIR)")
    args = parser.parse_args(argv)
    if args.rows <= 0 or args.rounds <= 0:
        parser.error("--rows and --rounds must be positive")
    for round_number in range(1, args.rounds + 1):
        for in_process in (True, False):
            with tempfile.TemporaryDirectory(prefix="okapi-checkpoint-cpu-", dir=args.dir) as directory:
                store = log_inserts(Path(directory), args.rows)
                cpu, children, wall = time.process_time(), _children_cpu_s(), time.perf_counter()
                store.checkpoint(in_process=in_process)
                cpu, children, wall = (time.process_time() - cpu, _children_cpu_s() - children,
                                       time.perf_counter() - wall)
                store.close()
            where = "in process        " if in_process else "checkpoint process"
            print(f"round {round_number} {where}: {args.rows:,} versions, wall {wall:.2f} s, CPU of this process "
                  f"{cpu:.2f} s, of the checkpoint process {children:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
