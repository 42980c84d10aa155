"""CPU per operation of the protocol core alone: one ``PartitionServer`` in this process, fed
pre-built messages (no network, no gRPC, no encoding).

    python scripts/measure_core_ops.py [--ops 100000] [--rounds 5] [--only NAME] [--calls]

Each line: a scenario and the process CPU time per operation, best of ``--rounds`` runs of
``--ops``; with ``--calls``, the function calls per operation instead (cProfile's count, builtins
included), which is exact where the times move with whatever else the machine runs: a change that
keeps the hot paths as they are keeps these counts. The scenarios are the per-operation paths of the
core: ``handle`` of a GET / PUT / SWAP / DELETE (one DC; three DCs with one partition, where the DC's
GSV follows the vv at every step; three DCs with four partitions), ``handle_batch`` of 100 PUTs, a
replication batch of 100 updates arriving from another DC, a RO-TX slice of 4 keys served for
another partition, and a key examined by a GC pass that lags behind (100,000 keys queued).

On 2026-12-02, this 2-core VM (shared), Python 3.11.7, ``--calls --ops 20000``: GET 22 (1 DC) and
24 (3 DCs) calls, PUT 49.85 (1 DC), 76.85 (3 DCs x 1 partition) and 64.85 (3 DCs x 4 partitions),
a replicated update 10.94, a RO-TX slice 50.0.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from collections.abc import Callable

from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    DeleteRequest,
    GetRequest,
    Message,
    PutRequest,
    ReplicateBatch,
    ServerId,
    Session,
    SwapRequest,
    TxSlice,
    Update,
)
from okapikv.core.mvstore import Version
from okapikv.core.partitioning import partition_of
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import pack

KEYS = 1_000
#: keys waiting in the GC queue in the ``gc_queue`` scenario
GC_QUEUE_KEYS = 100_000
T0 = 1 << 45  # about two years after the timestamp epoch: 64-bit timestamps, as in service


def keys_of(config: CoreConfig) -> list[bytes]:
    """KEYS keys that ``config``'s partition owns."""
    found: list[bytes] = []
    index = 0
    while len(found) < KEYS:
        key = b"key%06d" % index
        if partition_of(key, config.num_partitions) == config.partition:
            found.append(key)
        index += 1
    return found


def loaded(config: CoreConfig, keys: list[bytes]) -> PartitionServer:
    server = PartitionServer(config)
    session = Session((0,) * config.num_dcs, 0)
    for index, key in enumerate(keys):
        server.handle(PutRequest(index, key, b"v" * 16, session), T0 + index)
    return server


Scenario = Callable[[CoreConfig, int], tuple[PartitionServer, Callable[[], None]]]


def client_ops(kind: str, batch: int = 1) -> Scenario:
    def build(config: CoreConfig, ops: int) -> tuple[PartitionServer, Callable[[], None]]:
        keys = keys_of(config)
        server = loaded(config, keys)
        session = Session((0,) * config.num_dcs, 0)
        messages: list[Message] = []
        for index in range(ops):
            key = keys[index % KEYS]
            if kind == "get":
                messages.append(GetRequest(index, key, session))
            elif kind == "put":
                messages.append(PutRequest(index, key, b"w" * 16, session))
            elif kind == "swap":
                messages.append(SwapRequest(index, key, b"s" * 16, session))
            else:
                messages.append(DeleteRequest(index, key, session))
        start = T0 + 10 * KEYS

        def run() -> None:
            handle = server.handle
            if batch == 1:
                for index, message in enumerate(messages):
                    handle(message, start + index)
            else:
                handle_batch = server.handle_batch
                for index in range(0, len(messages), batch):
                    handle_batch(messages[index : index + batch], start + index)

        return server, run

    return build


def replication(config: CoreConfig, ops: int) -> tuple[PartitionServer, Callable[[], None]]:
    keys = keys_of(config)
    server = loaded(config, keys)
    source = ServerId(1, config.partition)
    start = T0 + 10 * KEYS
    batches = [
        ReplicateBatch(source, tuple(Update(keys[(first + i) % KEYS], b"r" * 16, pack(start + first + i), 1, None)
                                     for i in range(100)))
        for first in range(0, ops, 100)
    ]

    def run() -> None:
        handle = server.handle
        for index, batch in enumerate(batches):
            handle(batch, start + 100 * index)

    return server, run


def slices(config: CoreConfig, ops: int) -> tuple[PartitionServer, Callable[[], None]]:
    keys = keys_of(config)
    server = loaded(config, keys)
    source = ServerId(config.dc, (config.partition + 1) % config.num_partitions)
    start = T0 + 10 * KEYS
    messages = [TxSlice(source, index + 1, (pack(T0),) * config.num_dcs, tuple(keys[(4 * index + i) % KEYS]
                                                                              for i in range(4)))
                for index in range(ops)]

    def run() -> None:
        handle = server.handle
        for index, message in enumerate(messages):
            handle(message, start + index)

    return server, run


def gc_queue(config: CoreConfig, ops: int) -> tuple[PartitionServer, Callable[[], None]]:
    """A GC lagging behind: ``GC_QUEUE_KEYS`` keys each holding two versions, none universally
    visible yet, so every key a pass examines goes to the back of the queue (one op: one key)."""
    server = PartitionServer(config)
    store = server.store
    for index in range(GC_QUEUE_KEYS):
        key = b"key%07d" % index
        store.insert(key, Version(b"v" * 16, T0 + 2 * index, 0, None))
        store.insert(key, Version(b"w" * 16, T0 + 2 * index + 1, 0, None))

    def run() -> None:
        store.collect_some(lambda version: False, ops)

    return server, run


SCENARIOS: list[tuple[str, CoreConfig, Scenario]] = [
    ("GET    1 DC x 1 p     okapi", CoreConfig(0, 0, 1, 1), client_ops("get")),
    ("PUT    1 DC x 1 p     okapi", CoreConfig(0, 0, 1, 1), client_ops("put")),
    ("GET    3 DCs x 1 p    okapi", CoreConfig(0, 0, 3, 1), client_ops("get")),
    ("PUT    3 DCs x 1 p    okapi", CoreConfig(0, 0, 3, 1), client_ops("put")),
    ("PUT    3 DCs x 4 p    okapi", CoreConfig(0, 0, 3, 4), client_ops("put")),
    ("SWAP   3 DCs x 4 p    okapi", CoreConfig(0, 0, 3, 4), client_ops("swap")),
    ("DELETE 3 DCs x 4 p    okapi", CoreConfig(0, 0, 3, 4), client_ops("delete")),
    ("GET    3 DCs x 4 p    cure", CoreConfig(0, 0, 3, 4, protocol="cure"), client_ops("get")),
    ("PUT    3 DCs x 4 p    gentlerain", CoreConfig(0, 0, 3, 4, protocol="gentlerain"), client_ops("put")),
    ("PUT    3 DCs x 4 p    eventual", CoreConfig(0, 0, 3, 4, protocol="eventual"), client_ops("put")),
    ("PUT x100 batch 3 DCs x 1 p okapi", CoreConfig(0, 0, 3, 1), client_ops("put", batch=100)),
    ("replicated update 3 DCs x 4 p okapi", CoreConfig(0, 0, 3, 4), replication),
    ("RO-TX slice of 4 keys 3 DCs x 4 p okapi", CoreConfig(0, 0, 3, 4), slices),
    ("GC key examined, 100,000 queued 1 DC okapi", CoreConfig(0, 0, 1, 1), gc_queue),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="", help="run only the scenarios whose name contains this")
    parser.add_argument("--calls", action="store_true", help="count function calls per operation (cProfile)")
    args = parser.parse_args()
    for name, config, build in SCENARIOS:
        if args.only not in name:
            continue
        if args.calls:
            _, run = build(config, args.ops)
            profiler = cProfile.Profile()
            profiler.runcall(run)
            calls = pstats.Stats(profiler).total_calls  # type: ignore[attr-defined]
            print(f"{name:42s} {calls / args.ops:7.2f} calls/op", flush=True)
            continue
        best = float("inf")
        for _ in range(args.rounds):
            _, run = build(config, args.ops)
            started = time.process_time()
            run()
            best = min(best, time.process_time() - started)
        print(f"{name:42s} {best / args.ops * 1e6:7.2f} us/op", flush=True)


if __name__ == "__main__":
    main()
