"""`okapi bench`: turn the parsed command line into ``BenchOptions``, run the suite, write outputs.

The arguments themselves are defined in ``okapikv.cli._add_bench`` (the command's documented
interface); this module only interprets them. It is the one place that knows both the engine and
the suites (``suites.registry``).

The plots and latency histograms need the ``bench`` extra (matplotlib, hdrhistogram), which a
server install leaves out: ``run_bench`` checks for it first and says what to install.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

# This process talks gRPC (stats, probes) *and* forks server processes (the launcher sets a
# parent-death signal in the child, so it cannot use vfork). gRPC's fork handlers then run in a
# process whose gRPC threads are busy and can abort the child; nothing here needs gRPC in a forked
# child (every child execs at once), so they are turned off, before gRPC is loaded: it reads the
# variable once, at import (set later, it left the handlers on and logged "skipping fork() handlers").
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from benchmarks.harness.harness import open_bench
from benchmarks.harness.options import LEAN_WORKLOADS, MEMORY, BenchOptions
from benchmarks.harness.systems import parse_systems
from benchmarks.suites.registry import SUITES, planned_runs, write_outputs
from okapikv.bench.engine.errors import BenchError
from okapikv.bench.engine.results import Results
from okapikv.bench.engine.workloads import YCSB

#: The modules of the ``bench`` extra (pyproject.toml) that `okapi bench` cannot run without.
EXTRA_MODULES = ("numpy", "matplotlib", "hdrh")
EXTRA_HINT = "pip install '.[bench]' in the repository"


def missing_extra() -> list[str]:
    """The modules of the ``bench`` extra that cannot be imported here."""
    missing = []
    for name in EXTRA_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def _int_list(text: str, what: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"{what} must be comma-separated integers, not {text!r}") from None
    if not values or any(value < 1 for value in values):
        raise ValueError(f"{what} must be positive integers")
    return values


def options_from_args(args: argparse.Namespace) -> BenchOptions:
    """Validate and resolve the command line; ``ValueError`` with a clear message otherwise."""
    suite = getattr(args, "suite", None)
    systems = parse_systems(args.protocols if args.protocols is not None else SUITES[suite].default_protocols)
    workload = args.workload.lower()
    if workload not in ("rotx", MEMORY) and workload not in YCSB:
        raise ValueError(f"unknown workload {args.workload!r}: choose one of a-f, rotx or memory")
    single = (args.partitions or 1) == 1 and (not args.dcs or len(args.dcs.split(",")) == 1)
    if workload == MEMORY and suite is None and (args.connect or not single):
        raise ValueError("--workload memory measures one server process it starts itself: "
                         "no --connect, one DC, one partition")
    clients = _int_list(args.clients, "--clients") if args.clients is not None else (1,)
    dcs = tuple(name.strip() for name in args.dcs.split(",") if name.strip()) if args.dcs else None
    if args.partitions is not None:
        partitions = args.partitions
    else:  # a RO-TX over p partitions needs p of them
        partitions = args.rotx_partitions if workload == "rotx" and suite is None else 1
    if partitions < 1:
        raise ValueError("--partitions must be at least 1")
    if args.write_ratio is not None and not 0 <= args.write_ratio <= 1:
        raise ValueError("--write-ratio must be within [0, 1]")
    incr_ratio, ttl_ms = getattr(args, "incr_ratio", 0.0), getattr(args, "ttl_ms", 0)
    if not 0 <= incr_ratio <= 1 or ttl_ms < 0:
        raise ValueError("--incr-ratio must be within [0, 1] and --ttl-ms not negative")
    if (incr_ratio or ttl_ms) and workload == MEMORY:
        raise ValueError("--incr-ratio and --ttl-ms mix into a workload's operations; --workload memory has none")
    if args.duration_s <= 0 or args.warmup_s < 0:
        raise ValueError("--duration-s must be positive and --warmup-s not negative")
    if args.clock_skew_ms is not None and args.clock_skew_ms < 0:
        raise ValueError("--clock-skew-ms must not be negative")
    max_sessions, latency_cap_ms = getattr(args, "max_sessions", None), getattr(args, "latency_cap_ms", None)
    if max_sessions is not None and max_sessions < 1:
        raise ValueError("--max-sessions must be at least 1")
    if latency_cap_ms is not None and latency_cap_ms <= 0:
        raise ValueError("--latency-cap-ms must be positive")
    wan: str | float = args.wan
    if wan not in ("realistic", "off"):
        try:
            wan = float(wan)
        except ValueError:
            raise ValueError(f"--wan must be 'realistic', 'off' or a one-way delay in ms, not {args.wan!r}") from None
    if workload == "rotx" and suite is None and args.rotx_partitions > partitions:
        raise ValueError(f"--rotx-partitions {args.rotx_partitions} needs --partitions of at least that")
    options = BenchOptions(
        suite=suite, workload=workload, systems=systems, clients=clients, clients_given=args.clients is not None,
        duration_s=args.duration_s, warmup_s=args.warmup_s, dcs=dcs, partitions=partitions,
        partitions_given=args.partitions is not None, clock_skew_ms=args.clock_skew_ms,
        rotx_partitions=args.rotx_partitions, write_ratio=args.write_ratio, records=args.records,
        key_bytes=args.key_bytes, value_bytes=args.value_bytes, connect=args.connect, quick=args.quick,
        out=Path(args.out), processes=args.processes, wan=wan, seed=args.seed, timeout_s=args.timeout_s,
        visibility_samples=args.visibility_samples, redis=not args.no_redis, progress=not args.no_progress,
        keep_cpus_busy=getattr(args, "keep_cpus_busy", False), grpc_only=getattr(args, "grpc_only", False),
        load=getattr(args, "load", "client"), durable=getattr(args, "durable", False),
        max_sessions=max_sessions, latency_cap_ms=latency_cap_ms,
        clock_skew_model=getattr(args, "clock_skew_model", "uniform"),
        coordinator=getattr(args, "coordinator", "session"), incr_ratio=incr_ratio, ttl_ms=ttl_ms,
    )
    if options.load == "lean" and (options.grpc_only or incr_ratio or ttl_ms or suite not in (None, "scaling")
                                   or (suite is None and workload not in LEAN_WORKLOADS)):
        raise ValueError("--load lean sends single-key GET, SWAP and PUT on the native ports: YCSB a-c or "
                         "the scaling suite's YCSB-A, without --grpc-only, --incr-ratio or --ttl-ms")
    if options.records < 1 or options.key_bytes < 1 or options.value_bytes < 1:
        raise ValueError("--records, --key-bytes and --value-bytes must be positive")
    if len(str(options.records * 2)) > options.key_bytes:
        raise ValueError(f"--key-bytes {options.key_bytes} is too short for {options.records} records and inserts")
    return options.scaled()


#: What a ``--quick`` run is, said in its output and its report: short windows and few clients on a
#: small load, to check that every part of a suite runs; its figures (which system leads, by how
#: much) are noise, not measurements.
QUICK_NOTE = ("--quick is a smoke test: short windows, few clients and a small load check that the suite runs; "
              "its figures are not measurements (run without --quick to compare systems)")


def _config(options: BenchOptions) -> dict[str, Any]:
    config = options.to_config()
    config["command"] = "okapi " + " ".join(shlex.quote(part) for part in sys.argv[1:]) if sys.argv else "okapi bench"
    return config


def run_bench(args: argparse.Namespace) -> int:
    missing = missing_extra()
    if missing:
        print(f"okapi bench: the bench extra is not installed (no {', '.join(missing)}): {EXTRA_HINT}",
              file=sys.stderr)
        return 2
    try:
        options = options_from_args(args)
    except ValueError as error:
        print(f"okapi bench: {error}", file=sys.stderr)
        return 2
    results = Results(config=_config(options))
    if options.quick:
        results.note(QUICK_NOTE)
    started = time.monotonic()
    interrupted = False
    with open_bench(options, results, planned_runs(options)) as bench:
        if options.quick:
            bench.ui.message(f"okapi bench: {QUICK_NOTE}", style="yellow")
        try:
            SUITES[options.suite].run(bench)
        except KeyboardInterrupt:
            interrupted = True
            results.note(f"interrupted (Ctrl-C): partial results, {results.completed_runs()} run(s) completed")
        except BenchError as error:
            bench.failures += 1
            results.note(f"aborted: {error}")
            bench.ui.message(f"aborted: {error}", style="red")
    results.timings["total_s"] = round(time.monotonic() - started, 2)
    files = write_outputs(results.to_dict(), options.out)
    if interrupted:
        print(f"okapi bench: interrupted; kept the {results.completed_runs()} run(s) that completed", file=sys.stderr)
    print(f"okapi bench: wrote {options.out}/results.json, report.md, {len(files['csv'])} CSV and "
          f"{len(files['png'])} PNG files in {time.monotonic() - started:.1f} s")
    if interrupted:
        return 130
    return 1 if bench.failures else 0
