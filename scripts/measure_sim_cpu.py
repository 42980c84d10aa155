"""CPU seconds per simulated operation of the paper experiments' runs (docs/simulated.md, "Running them").

Runs one unchecked fig3 step (``okapikv.sim.experiments.config_of``: the paper workload, RO-TX over
2 partitions + PUT, 10 ms clock offsets, the python-quiet profile) at each ``--shape``
(partitions:clients) ``--rounds`` times, and prints the process CPU time per operation completed
(warm-up included) and a digest of the run's record: the same digest from two trees means the
same results. To compare two trees, run it under each in the same minutes, alternating:

    python scripts/measure_sim_cpu.py --shape 2:96 --shape 8:384 --rounds 3
    PYTHONPATH=/path/to/other/src python scripts/measure_sim_cpu.py --shape 2:96 --rounds 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

from okapikv.sim.cost import load_profile
from okapikv.sim.experiments import Plan, Point, config_of, record
from okapikv.sim.runner import run_simulation


def measure(partitions: int, clients: int, duration_s: float, system: str) -> tuple[int, float, str]:
    """Operations completed, CPU seconds, and the record's digest of one run."""
    plan = Plan(partitions=partitions, duration_s=duration_s, warmup_s=min(0.05, duration_s / 2))
    point = Point("measure", "partitions", "", system, partitions, min(2, partitions), keep="peak")
    config = config_of(point, plan, load_profile("python-quiet"), clients, checked=False)
    started = time.process_time()
    outcome = run_simulation(config, check=False)
    cpu_s = time.process_time() - started
    data = record(point, outcome.result, checked=False, anomalies=0, cpu_s=0.0)
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
    return sum(outcome.result.completed.values()), cpu_s, digest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append", default=None, metavar="PARTITIONS:CLIENTS",
                        help="partitions per DC (3 DCs) and clients in all (default 2:96 and 8:384)")
    parser.add_argument("--duration-s", type=float, default=0.2, help="simulated seconds per run (default 0.2)")
    parser.add_argument("--system", default="okapi")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    shapes = [tuple(int(part) for part in shape.split(":")) for shape in (args.shape or ["2:96", "8:384"])]
    for round_number in range(1, args.rounds + 1):
        for partitions, clients in shapes:
            operations, cpu_s, digest = measure(partitions, clients, args.duration_s, args.system)
            print(f"round {round_number}: {args.system} 3 DCs x {partitions} partitions, {clients} clients: "
                  f"{operations} operations, {cpu_s:.2f} s CPU, {cpu_s / operations * 1e6:.1f} us CPU per operation, "
                  f"record {digest}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
