"""``okapi sim``: one seeded simulation (or a sweep of seeds), checked, summarised.

Exit status 0 when every run is free of anomalies, 1 otherwise (each failing run prints the exact
command that reproduces it), 2 on bad arguments. ``--clients`` is the total number of closed-loop
sessions, spread round-robin over the DCs. With ``--seeds``, ``--history`` may contain ``{seed}``
to keep one history file per seed (without it, sweeps keep none).

Counts: "workload operations" are the closed-loop clients' operations; the history the checkers
judge also holds the convergence reads made after the heal (every key, in every DC), so a run's
"checked N operations" is the sum of the two, which the sweep's line shows apart.

Every run prints each operation's latency (mean and p99) and the throughput over the fault phase
(after ``--warmup-s``). ``--workload paper`` is the paper's workload (a RO-TX over
``--rotx-partitions`` partitions then a PUT, strictly alternating per client); with
``--write-ratio W`` each operation is instead a PUT with probability W, else such a RO-TX.
``--cost PROFILE`` turns the cost model on (``okapikv.sim.cost``).

Knobs without a command-line flag (WAN matrix, workload mix, fault rates...) are ``SimConfig``
fields: use ``okapikv.sim.run_simulation(SimConfig(...))`` from Python.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

from okapikv.sim.config import COUNTERS_TTLS_MIX, SimConfig, WorkloadMix
from okapikv.sim.cost import CostProfile, load_profile
from okapikv.sim.runner import operation_counts, performance_line, reproduce_command, run_simulation, summary_lines


def parse_seeds(text: str) -> list[int]:
    """``A..B`` (inclusive) or a single seed."""
    if ".." in text:
        low, high = text.split("..", 1)
        first, last = int(low), int(high)
        if last < first:
            raise ValueError(f"empty seed range {text!r}")
        return list(range(first, last + 1))
    return [int(text)]


def cost_from_args(args: argparse.Namespace) -> CostProfile | None:
    """The cost profile ``--cost`` names, with ``--cores``, ``--blocking`` and ``--threads`` applied."""
    if args.cost is None:
        if args.cores is not None or args.blocking is not None or args.threads is not None:
            raise ValueError("--cores, --blocking and --threads need --cost")
        return None
    profile = load_profile(args.cost)
    changes: dict[str, object] = {}
    if args.cores is not None:
        changes["cores"] = args.cores
    if args.blocking is not None:
        changes["blocking"] = args.blocking
    if args.threads is not None:
        changes["threads"] = args.threads
    profile = replace(profile, **changes)  # type: ignore[arg-type]
    profile.validate()
    return profile


def config_from_args(args: argparse.Namespace, seed: int, cost: CostProfile | None = None) -> SimConfig:
    workload = args.workload
    if args.write_ratio is not None:
        if workload == "mix":
            raise ValueError("--write-ratio goes with --workload paper (or write-ratio)")
        workload = "write-ratio"
    elif workload == "write-ratio":
        raise ValueError("--workload write-ratio needs --write-ratio")
    return SimConfig(
        seed=seed,
        protocol=args.protocol,
        num_dcs=args.dcs,
        num_partitions=args.partitions,
        num_clients=args.clients,
        duration_s=args.duration_s,
        faults=args.faults,
        clock_skew_ms=args.clock_skew_ms,
        clock_skew_model=args.clock_skew_model,
        clock_jumps=args.clock_jumps,
        silent_links=args.silent_links,
        large_scans=args.large_scans,
        membership=getattr(args, "membership", False),
        new_dc=getattr(args, "new_dc", False),
        **({"keys_per_partition": args.keys_per_partition} if args.keys_per_partition else {}),
        liveness_s=args.liveness_s,
        workload=workload,
        rotx_partitions=args.rotx_partitions,
        write_ratio=args.write_ratio if args.write_ratio is not None else 0.5,
        think_us_max=args.think_us,
        warmup_s=args.warmup_s,
        cost=cost,
        mix=COUNTERS_TTLS_MIX if getattr(args, "counters_ttls", False) else WorkloadMix(),
    )


def run_sim(args: argparse.Namespace) -> int:
    try:
        seeds = parse_seeds(args.seeds) if args.seeds else [args.seed]
        cost = cost_from_args(args)
        configs = [config_from_args(args, seed, cost) for seed in seeds]
        for config in configs:
            config.validate()
        from okapikv.core.config import CoreConfig

        CoreConfig(dc=0, partition=0, num_dcs=args.dcs, num_partitions=args.partitions, protocol=args.protocol)
    except ValueError as error:
        print(f"okapi sim: {error}", file=sys.stderr)
        return 2
    if len(configs) == 1:
        outcome = run_simulation(configs[0], history_path=args.history)
        for line in summary_lines(outcome):
            print(line)
        if args.history:
            print(f"history: {args.history}")
        return 0 if outcome.ok else 1
    started = time.perf_counter()
    failures: list[str] = []
    for config in configs:
        path = None
        if args.history:
            path = args.history.replace("{seed}", str(config.seed)) if "{seed}" in args.history else None
        outcome = run_simulation(config, history_path=path)
        result = outcome.result
        issued, final = operation_counts(outcome)
        waits = sum(w.count for w in result.waits.values())
        status = "ok" if outcome.ok else f"FAIL ({len(outcome.anomalies)} anomalies)"
        print(f"seed {config.seed}: {issued} workload ops + {final} convergence reads checked, {waits} waits, "
              f"{result.events} events, {result.wall_s:.1f} s: {status}", flush=True)
        print(f"    {performance_line(result)}")
        if not outcome.ok:
            for line in summary_lines(outcome, max_anomalies=3)[-5:]:
                print(f"    {line}")
            failures.append(reproduce_command(config))
    elapsed = time.perf_counter() - started
    print(f"{len(configs)} seeds in {elapsed:.1f} s: {len(configs) - len(failures)} passed, {len(failures)} failed")
    for command in failures:
        print(f"reproduce: {command}")
    return 0 if not failures else 1
