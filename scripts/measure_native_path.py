"""The server's Python path per operation on the native port, without sockets: paired rounds of two trees.

One in-memory ``PartitionNode`` (1 DC x 1 partition) and one ``NativeConnection`` on a transport
that keeps nothing, in one process, fed version 2 frames of YCSB-A (GET and SWAP of 100-byte values
over 10,000 keys, 8 operations a frame) the way 64 sessions send them: 8 frames in one read
(``--frames-per-read``), the results of the read written once. What it times is exactly the Python
work of the server per operation (decode, core, results, framing) minus the event loop and the
system calls, so it moves with a change to that path alone and is far less noisy than a run with
sockets on a shared machine (``scripts/measure_server_cpu.py`` is that run).

    python scripts/measure_native_path.py --base DIR [--change DIR] [--rounds 4] [--ops 30000] [--instructions]
        [--durable]

Each round runs the base tree and the change tree once each, alternating which goes first, each in
a fresh process (``PYTHONPATH=DIR/src``) that warms up and then times three passes of ``--ops``
operations; a tree's figure is the fastest pass (process CPU time per operation). ``DIR`` holds
``src/okapikv`` (``git archive REV src | tar -x -C DIR`` makes one of a commit); ``--change``
defaults to this checkout. With ``--one`` it times only the tree it runs in (no pairing).

With ``--durable`` the node keeps its store in a data directory (a temporary one): after each read
the process waits, its event loop asleep, until the read's commit group is durable and its held
replies released, then writes the results, so every read of 64 operations is one group (about what
64 sessions' groups hold, 30-60 operations) and the figure is the Python path of a durable server:
the in-memory path plus staging, the group's record, the worker's hand-offs and the held replies.
The node's timer is off in this mode (no GC, no stabilization: the in-memory mode runs none
either), so a group holds the reads' inserts only, and the store closes without its final
checkpoint (a server's checkpoints run in a process of their own). ``--instructions --durable``
counts the storage worker's instructions too (valgrind runs every thread); the kernel's work (the
``fdatasync``, the threads' wake-ups) is not an instruction of the process and is measured by
``scripts/measure_server_cpu.py --durable`` and ``scripts/measure_log_writes.py``.

With ``--instructions`` each tree runs under ``valgrind --tool=cachegrind`` instead (a few minutes
a tree), twice, at ``--ops`` and three times ``--ops``: the difference of the two instruction counts
over the difference of the operations is the instructions per operation, the same in every run (the
hash seed fixed), however loaded the machine; from it the instructions of building the frames (the
load's side, the same in both trees) are taken off, measured the same way. It resolves a change of a
percent, which the timed rounds on a shared machine do not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout: its benchmarks/ lab

from benchmarks.harness.paired_trees import paired_parser

RECORDS = 10_000
VALUE = b"v" * 100


def _discard(data: bytes) -> None:
    """``write``: returns None, as a transport's does (a compiled caller checks the type it declares)."""


def _transport() -> Any:
    """A transport that keeps nothing (no socket): what the connection calls, doing nothing."""
    return SimpleNamespace(write=_discard, is_closing=lambda: False, close=lambda: None, pause_reading=lambda: None,
                           resume_reading=lambda: None,
                           get_extra_info=lambda name: None if name == "socket" else ("127.0.0.1", 1))


def _reads(operations: int, frames_per_read: int, seed: int) -> list[bytes]:
    """YCSB-A (half GET, half SWAP) as the bytes of each read: 8 operations a frame."""
    from okapikv.wire import packed

    draw = random.Random(seed)
    frames: list[bytes] = []
    batch: list[packed.Operation] = []
    for index in range(operations):
        key = b"user%06d" % draw.randrange(RECORDS)
        session = packed.Session((), 5, 0)
        batch.append(packed.Get(index + 1, key, session) if draw.random() < 0.5
                     else packed.Swap(index + 1, key, VALUE, session))
        if len(batch) == 8:
            frames.append(packed.encode_frame(packed.OperationBatch(batch)))
            batch = []
    return [b"".join(frames[start:start + frames_per_read]) for start in range(0, len(frames), frames_per_read)]


async def _time_one(operations: int, frames_per_read: int, data_dir: str | None = None) -> list[float]:
    from okapikv.cluster.config.local import local_cluster
    from okapikv.server.inbound import PeerIntake
    from okapikv.server.native import NativeConnection
    from okapikv.server.node import PartitionNode
    from okapikv.wire.frames import MAGIC_V2

    config = local_cluster(dcs=("solo",), partitions=1, protocol="okapi", wan="off", base_port=1, host="127.0.0.1")
    node = PartitionNode(config, 0, 0, data_dir=data_dir)
    node.start()
    committer = node.committer
    durable = asyncio.Event()
    if committer is not None:  # --durable: reads wait for their group (module docstring)
        assert node._timer is not None
        node._timer.cancel()
        node._timer = None  # the core's timer is not armed again (``PartitionNode._carry_out``)
        released = committer._on_durable

        def on_durable() -> None:
            released()
            durable.set()

        committer._on_durable = on_durable
        # A clean close folds the whole log into SQLite (a checkpoint process's work in a server,
        # and proportional to the operations run): closed without it, so it is not counted here.
        close = committer.store.close
        setattr(committer.store, "close", lambda: close(checkpoint=False))  # noqa: B010
    connection = NativeConnection(node, PeerIntake(node))
    connection.connection_made(_transport())
    connection.data_received(MAGIC_V2)

    async def drive(reads: list[bytes]) -> None:
        for data in reads:
            connection.data_received(data)
            while committer is not None and (committer.pending or node.host.held_effect_groups):
                durable.clear()
                await durable.wait()
            connection._flush()  # the write at the end of the event-loop turn

    await drive(_reads(20_000, frames_per_read, seed=0))  # fills the keyspace, warms every path
    import gc
    gc.freeze()  # as the server does once it serves
    passes = []
    for seed in (1, 2, 3):
        reads = _reads(operations, frames_per_read, seed)
        started = time.process_time()
        await drive(reads)
        passes.append((time.process_time() - started) * 1e6 / operations)
    await node.close()
    return passes


async def _time_durable(operations: int, frames_per_read: int) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="okapi-native-path-") as directory:
        return await _time_one(operations, frames_per_read, directory)


def _instructions(tree: Path, arguments: list[str]) -> int:
    """The instructions a run of this script with ``arguments`` executes under cachegrind."""
    environment = {**os.environ, "PYTHONPATH": str(tree / "src"), "PYTHONHASHSEED": "0"}
    result = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                             sys.executable, __file__, *arguments], env=environment, check=True,
                            capture_output=True, text=True)
    counts = re.search(r"I\s+refs:\s+([\d,]+)", result.stderr)
    if counts is None:
        raise SystemExit(f"no instruction count from valgrind: {result.stderr[-500:]}")
    return int(counts.group(1).replace(",", ""))


def _mode(args: argparse.Namespace) -> list[str]:
    return ["--frames-per-read", str(args.frames_per_read)] + (["--durable"] if args.durable else [])


def _instructions_per_op(tree: Path, args: argparse.Namespace, *, frames_only: bool = False) -> float:
    """Instructions per operation of ``tree``'s path (or, ``frames_only``, of building the frames)."""
    common = _mode(args) + (["--frames-only"] if frames_only else ["--one"])
    low = _instructions(tree, [*common, "--ops", str(args.ops)])
    high = _instructions(tree, [*common, "--ops", str(3 * args.ops)])
    return (high - low) / (3 * 2 * int(args.ops))  # three passes each


def _run_tree(tree: Path, args: argparse.Namespace) -> float:
    environment = {**os.environ, "PYTHONPATH": str(tree / "src")}
    output = subprocess.run([sys.executable, __file__, "--one", "--ops", str(args.ops), *_mode(args)],
                            env=environment, check=True, capture_output=True, text=True).stdout
    return float(min(json.loads(output)["us_per_op"]))


def main() -> int:
    parser = paired_parser(__doc__, rounds=4)
    parser.add_argument("--ops", type=int, default=30_000)
    parser.add_argument("--frames-per-read", type=int, default=8)
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions per operation under valgrind instead of timing (--ops 2000 is enough)")
    parser.add_argument("--durable", action="store_true",
                        help="the node keeps its store in a data directory; each read waits for its group")
    parser.add_argument("--frames-only", action="store_true", help=argparse.SUPPRESS)  # --instructions' baseline
    args = parser.parse_args()
    if args.one:
        timed = _time_durable if args.durable else _time_one
        print(json.dumps({"us_per_op": asyncio.run(timed(args.ops, args.frames_per_read))}))
        return 0
    if args.frames_only:
        for seed in (1, 2, 3):
            _reads(args.ops, args.frames_per_read, seed)
        return 0
    if args.base is None:
        parser.error("--base is required (or --one)")
    if args.instructions:
        if shutil.which("valgrind") is None:
            parser.error("--instructions needs valgrind on the PATH (apt-get install valgrind)")
        frames = _instructions_per_op(args.change, args, frames_only=True)
        figures = {name: _instructions_per_op(tree, args) - frames
                   for name, tree in (("base", args.base), ("change", args.change))}
        print(f"instructions/op base {figures['base']:,.0f} change {figures['change']:,.0f} "
              f"(x{figures['change'] / figures['base']:.3f}; the frames' {frames:,.0f} taken off)")
        return 0
    ratios = []
    for index in range(args.rounds):
        order = ("base", "change") if index % 2 == 0 else ("change", "base")
        figures = {name: _run_tree(args.base if name == "base" else args.change, args) for name in order}
        ratios.append(figures["change"] / figures["base"])
        print(f"round {index + 1}: us/op base {figures['base']:.2f} change {figures['change']:.2f} "
              f"(x{ratios[-1]:.3f})", flush=True)
    print(f"median change / base: x{statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
