"""``okapi fuzz``: the command (arguments defined in ``okapikv.cli``), its summary and exit status.

Exit status: 0 when the history checks clean, 1 on an anomaly or when a client misbehaved (exited
early, answered out of format, hung), 2 when the run could not start (bad arguments, no cluster),
130 after Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from okapikv.core.deployment import PAPER_DC_NAMES
from okapikv.fuzz.cluster import Target, connected_cluster, local_cluster
from okapikv.fuzz.errors import FuzzError
from okapikv.fuzz.kill import KILL_AT_FRACTION, KILL_DOWN_S, PartitionKiller, kill_lines, parse_partitions
from okapikv.fuzz.plan import KEYS_PER_CLIENT, MIX, Plan, make_plan
from okapikv.fuzz.run import Outcome, run_plan

DEFAULT_DCS = PAPER_DC_NAMES
DEFAULT_PARTITIONS = 2


def _client_dcs(args: argparse.Namespace, cluster_dcs: Sequence[str]) -> list[str]:
    """Round-robin over ``--dcs`` (names checked against the cluster), else the cluster's first DC."""
    if not args.dcs:
        return [cluster_dcs[0]] * args.clients
    names = _names(args.dcs)
    unknown = [name for name in names if name not in cluster_dcs]
    if unknown:
        raise FuzzError(f"unknown DC(s) {', '.join(unknown)}; the cluster has {', '.join(cluster_dcs)}")
    return [names[number % len(names)] for number in range(args.clients)]


def _names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise FuzzError("--dcs must name at least one DC")
    return names


def reproduce_command(args: argparse.Namespace) -> str:
    words = ["okapi", "fuzz", "--clients", str(args.clients), "--ops", str(args.ops), "--seed", str(args.seed)]
    if args.conflict:
        words.append("--conflict")
    if args.dcs:
        words += ["--dcs", args.dcs]
    if args.connect:
        words += ["--connect", args.connect]
    for name in ("protocol", "partitions"):
        value = getattr(args, name, None)
        if value is not None:
            words += [f"--{name}", str(value)]
    if getattr(args, "counters_ttls", False):
        words.append("--counters-ttls")
    if getattr(args, "kill_partitions", None):
        words += ["--kill-partitions", args.kill_partitions]
    return shlex.join(words)


def summary_lines(plan: Plan, target: Target, outcome: Outcome, args: argparse.Namespace) -> list[str]:
    history = outcome.report
    operations = [op for op in outcome.operations if not op.final]
    by_function = Counter(op.f for op in operations)
    errors = Counter(op.status for op in operations if op.status != "ok")
    total = len(operations)
    rate = total / outcome.elapsed_s if outcome.elapsed_s > 0 else 0.0
    lines = [
        f"ran {total} operations in {outcome.elapsed_s:.1f} s ({rate:.0f} ops/s): "
        + ", ".join(f"{f} {by_function[f]}" for f, _ in MIX)
        + (f"; not ok: {', '.join(f'{k} {v}' for k, v in sorted(errors.items()))}" if errors else "; all ok"),
    ]
    side = outcome.side
    if side is not None:
        lines.append(f"counters and expiry (checked apart from the history): {sum(side.acked.values())} INCRs "
                     f"acknowledged over {len(side.acked)} counter(s), {len(side.expiring)} key(s) PUT expiring")
    if outcome.converged is not None:
        finals = sum(1 for op in outcome.operations if op.final)
        state = "agreed" if outcome.converged else "still disagreed"
        lines.append(f"final reads: {finals} in {outcome.final_rounds} round(s), after which every DC {state}")
    lines += history.summary_lines(max_anomalies=20)
    unranked = sum(1 for op in outcome.operations if op.is_write and op.ok and op.timestamp is None)
    if unranked and len(set(plan.client_dcs)) > 1:
        lines.append(f"note: {unranked} successful write(s) came without a timestamp (a client that does not "
                     "print them), so the checkers do not know their place in the store's last-writer-wins order: "
                     "reads of them are checked for thin-air values and causal cycles only, and convergence "
                     "is agreement between DCs")
    elif unranked:
        lines.append(f"note: {unranked} successful write(s) came without a timestamp: single-key operations were "
                     "checked for linearizability (which needs none), scans for thin-air values, range and order "
                     "only")
    if outcome.kill is not None:
        lines += kill_lines(outcome.kill, outcome.operations, total)
    for problem in outcome.problems:
        lines.append(f"client problem: {problem}" if not problem.startswith("--kill-partitions") else problem)
    lines.append(f"history: {outcome.history_path} (re-check with: okapi check {outcome.history_path})")
    lines.append(f"reproduce: {reproduce_command(args)}")
    return lines


def _validate(args: argparse.Namespace) -> None:
    if args.clients < 1 or args.clients > 999:
        raise FuzzError("--clients must be between 1 and 999")
    if args.ops < 0:
        raise FuzzError("--ops must not be negative")
    partitions = getattr(args, "partitions", None)
    if partitions is not None and partitions < 1:
        raise FuzzError("--partitions must be at least 1")
    if getattr(args, "kill_partitions", None) and args.connect:
        raise FuzzError("--kill-partitions needs the local cluster the fuzzer starts (not --connect)")
    if getattr(args, "base_port", None) is not None and args.connect:
        raise FuzzError("--base-port places the local cluster the fuzzer starts (not --connect)")


def default_history_path(seed: int) -> Path:
    """Where a run keeps its history without ``--history``: ``$OKAPI_HOME/fuzz/seed<S>.jsonl`` (or
    ``~/.okapi/fuzz/...``), beside the cluster config, so it outlives the run for ``okapi check``
    (a temporary folder may be emptied at the next boot); a later run of the same seed replaces it."""
    from okapikv.cluster.config import okapi_home

    return okapi_home() / "fuzz" / f"seed{seed}.jsonl"


def _history_path(args: argparse.Namespace) -> Path:
    path = Path(args.history) if args.history else default_history_path(args.seed)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise FuzzError(f"cannot write the history in {path.parent}: {error.strerror or error}") from None
    return path


def run_fuzz(args: argparse.Namespace) -> int:
    """Entry point of ``okapi fuzz`` (arguments defined in ``okapikv.cli``)."""
    protocol = getattr(args, "protocol", None) or "okapi"
    partitions = getattr(args, "partitions", None) or DEFAULT_PARTITIONS
    try:
        _validate(args)
        kill_partitions = parse_partitions(getattr(args, "kill_partitions", None), partitions)
        killer: PartitionKiller | None = None
        with contextlib.ExitStack() as stack:
            if args.connect:
                target = connected_cluster(args.connect)
            else:
                dcs = _names(args.dcs) if args.dcs else list(DEFAULT_DCS)
                directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="okapi-fuzz-")))
                durable = bool(kill_partitions)
                print(f"okapi fuzz: starting a local cluster: {', '.join(dcs)} x {partitions} partition(s), "
                      f"protocol {protocol}{', durable' if durable else ''}", flush=True)
                cluster = stack.enter_context(local_cluster(dcs, partitions, protocol, directory, durable,
                                                            getattr(args, "base_port", None)))
                target = cluster.target
                servers = cluster.config.servers
                print(f"okapi fuzz: local cluster on {servers[0].address} .. {servers[-1].address}", flush=True)
                if kill_partitions:
                    at_operations = int(args.clients * args.ops * KILL_AT_FRACTION)
                    killer = PartitionKiller(cluster, kill_partitions, at_operations)
                    print(f"okapi fuzz: will kill -9 partition(s) {', '.join(map(str, kill_partitions))} in every DC "
                          f"after {at_operations} operations and restart them {KILL_DOWN_S:g} s later", flush=True)
            plan = make_plan(args, _client_dcs(args, target.dcs), fresh_prefix=bool(args.connect))
            mode = "one shared set of" if plan.conflict else "disjoint sets of"
            print(f"okapi fuzz: seed {plan.seed}: {plan.clients} client(s) x {plan.operations_per_client} ops, "
                  f"{mode} {KEYS_PER_CLIENT} keys (prefix {plan.key_prefix}), in DC(s) "
                  f"{', '.join(dict.fromkeys(plan.client_dcs))} of {target.description}, protocol {target.protocol}",
                  flush=True)
            outcome = run_plan(plan, target, _history_path(args), meta={"command": reproduce_command(args)},
                               killer=killer)
    except FuzzError as error:
        print(f"okapi fuzz: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("okapi fuzz: interrupted", file=sys.stderr)
        return 130
    for line in summary_lines(plan, target, outcome, args):
        print(line)
    print("PASS" if outcome.ok else "FAIL", flush=True)
    return 0 if outcome.ok else 1
