"""What encoding and decoding peer messages costs per client request, on a 2 DC x 2 partition cluster.

The question it answers: would moving the peer links off protobuf (to msgpack, as the native
client port is: ``okapikv.wire.packed``) save a worthwhile share of the servers' CPU? Three parts:

1. In isolation, the cost of one peer message through the links' real code, both ends:
   ``PeerEncoder.frames`` and ``encode_batch`` on the sender, ``PeerBatch.FromString`` and
   ``peer_message_from_pb`` on the receiver, for a heartbeat and replication batches of 1 and 16
   updates (so a per-message and a per-update cost); beside it the same round trip as msgpack
   (msgspec, arrays of the same fields, decoded into the same core messages): what msgpack could
   cost at best.
2. On an in-memory 2 DC x 2 partition cluster (realistic WAN delays, one ``okapi server`` process
   per partition), ``redis-benchmark -t set`` then ``-t get`` (``-c 50 -d 8 -r 10000``) against
   the RESP port of the first DC's partition 0, as ``scripts/resp_cluster_bench.py`` runs them. Per
   request: the servers' CPU (user + system of all four, ``/proc/PID/stat``), the peer messages
   and replicated updates the servers sent (their Stats: links' ``sent_messages``, wire
   ``replication_wire_updates``; of the messages, heartbeats and stabilization messages from the
   core's counters, the rest counted as replication batches), and the encoding's estimated cost:
   replication batches x a batch's own cost + updates x an update's + other messages x a
   heartbeat's (part 1), for protobuf and for msgpack, over the CPU per request. Every message is
   costed in a ``PeerBatch`` of its own (as part 1 frames it), so the estimates lean high.
3. With ``--profile`` (needs py-spy: ``pip install -e .[profile]``): one more SET run sampled by
   py-spy on every server; the share of the samples inside the peer encoding and decoding (the
   functions of part 1, and the acknowledgements' encoding and decoding).

    python scripts/measure_peer_wire.py [--rounds 3] [--requests 40000] [--clients 50] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import importlib
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import uvloop

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout: its benchmarks/ lab

from benchmarks.harness.clusters import RunningCluster, start_local
from benchmarks.harness.proc import total_cpu_seconds
from okapikv.bench.engine.generators import InsertSequence
from okapikv.bench.engine.workloads import READ, WorkloadConfig, make_source
from okapikv.client import AsyncClient
from okapikv.core.messages import Heartbeat, PeerMessage, ReplicateBatch, ServerId, Update
from okapikv.server.peer_encoding import PeerEncoder
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire.convert import batch_header, encode_batch, peer_message_from_pb

RUN_TIMEOUT_S = 300.0
_RATE = re.compile(r"([A-Z]+): ([\d.]+) requests per second")
SOURCE = ServerId(0, 0)
TIME = 3_995_883_309_601_521_664  # an HLC timestamp of 2026
REPEATS = 1000
RECORDS = 10_000


# ---------------------------------------------------------------- part 1: in isolation


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of the processes ``pids`` so far."""
    return total_cpu_seconds(pids) or 0.0


def _batch(updates: int) -> ReplicateBatch:
    return ReplicateBatch(SOURCE, tuple(Update(b"key:%012d" % i, b"x" * 8, TIME + i, 0, None) for i in range(updates)),
                          (TIME, TIME - 500))


def _protobuf_round_trip(message: PeerMessage) -> Callable[[], list[PeerMessage | None]]:
    """Sender and receiver of one message as the links run them; the call returns what arrived."""
    encoder = PeerEncoder("measure", 1 << 22, scalar=False)
    header = batch_header("okapi-measure", SOURCE, 12345)

    def once() -> list[PeerMessage | None]:
        encoder._last_sent = None  # a new message each time (the encoder reuses the last one's frames)
        frames = encoder.frames(message)
        batch = pb.PeerBatch.FromString(encode_batch(header, 1, [frame for frame, _ in frames]))
        return [peer_message_from_pb(element, SOURCE, 2) for element in batch.messages]
    return once


def _msgpack_round_trip(message: PeerMessage) -> Callable[[], list[PeerMessage | None]]:
    """The same round trip with the message's fields as msgpack arrays (a heartbeat or a batch)."""
    encode = msgspec.msgpack.Encoder().encode
    decode = msgspec.msgpack.Decoder().decode

    def once() -> list[PeerMessage | None]:
        if isinstance(message, ReplicateBatch):
            body: list[Any] = [1, [(u.key, u.value, u.timestamp, u.source_dc, u.dv) for u in message.updates],
                               message.gsv]
        else:
            assert isinstance(message, Heartbeat)
            body = [2, message.timestamp, message.gsv]
        batch = decode(encode(["okapi-measure", 0, 0, 12345, 1, [encode(body)]]))
        arrived: list[PeerMessage | None] = []
        for element in batch[5]:
            fields = decode(element)
            gsv = None if fields[2] is None else tuple(fields[2])
            if fields[0] == 1:
                arrived.append(ReplicateBatch(SOURCE, tuple([
                    Update(key, value, timestamp, dc, None if dv is None else tuple(dv))
                    for key, value, timestamp, dc, dv in fields[1]]), gsv))
            else:
                arrived.append(Heartbeat(SOURCE, fields[1], gsv))
        return arrived
    return once


def _cost_us(function: Callable[[], object]) -> float:
    """Microseconds of this process's CPU per call (``time.process_time``: a busy machine's other
    work is left out) over ``REPEATS`` calls."""
    start = time.process_time()
    for _ in range(REPEATS):
        function()
    return (time.process_time() - start) / REPEATS * 1e6


def isolated() -> dict[str, dict[str, float]]:
    """Encode + decode microseconds per message, both encodings (the least of 7 runs taken in
    turns, so that both see the same machine); and the per-message and per-update costs fitted
    from batches of 1 and 16 updates."""
    cases: dict[str, PeerMessage] = {"heartbeat_us": Heartbeat(SOURCE, TIME, None), "batch_1_us": _batch(1),
                                     "batch_16_us": _batch(16)}
    makers = {"protobuf": _protobuf_round_trip, "msgpack": _msgpack_round_trip}
    runs: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    calls = {(name, case): make(message) for name, make in makers.items() for case, message in cases.items()}
    for _ in range(7):
        for key, call in calls.items():
            runs[key].append(_cost_us(call))
    figures: dict[str, dict[str, float]] = {}
    for name in makers:
        costs = {case: min(runs[name, case]) for case in cases}
        per_update = (costs["batch_16_us"] - costs["batch_1_us"]) / 15
        costs["per_update_us"] = per_update
        costs["per_message_us"] = max(costs["heartbeat_us"], costs["batch_1_us"] - per_update)
        figures[name] = costs
        print(f"{name:>8}: heartbeat {costs['heartbeat_us']:.2f} us, batch of 1 {costs['batch_1_us']:.2f} us, "
              f"batch of 16 {costs['batch_16_us']:.2f} us: {costs['per_message_us']:.2f} us a message "
              f"+ {per_update:.2f} us an update", flush=True)
    return figures


# ---------------------------------------------------------------- part 2: on a cluster


def _sent(cluster: RunningCluster) -> tuple[int, int, int]:
    """Peer messages, of them heartbeats and stabilization messages, and replicated updates every
    server has sent so far."""
    messages = other = updates = 0
    for stats in cluster.fetch_stats().values():
        messages += sum(int(link["sent_messages"]) for link in stats.get("links", {}).values())
        core = stats.get("core", {})
        other += int(core.get("heartbeats_sent", 0)) + int(core.get("stabilization_messages_sent", 0))
        updates += int(stats.get("wire", {}).get("replication_wire_updates", 0))
    return messages, other, updates


def _estimate_us(costs: dict[str, float], replication: float, other: float, updates: float) -> float:
    """Encode + decode microseconds of ``replication`` batches holding ``updates`` updates and
    ``other`` messages (each counted at a heartbeat's cost)."""
    return (replication * (costs["batch_1_us"] - costs["per_update_us"]) + updates * costs["per_update_us"]
            + other * costs["heartbeat_us"])


def _redis_benchmark(port: int, test: str, requests: int, clients: int) -> float:
    command = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", test, "-n", str(requests),
               "-c", str(clients), "-d", "8", "-r", "10000", "-q"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=True)
    rates = _RATE.findall(done.stdout.replace("\r", "\n"))
    if not rates:
        raise SystemExit(f"{' '.join(command)}: unexpected output {done.stdout[-300:]!r}")
    return float(rates[-1][1])


def _row(number: int, test: str, rate: float, cpu_us: float, messages: float, other: float, updates: float,
         costs: dict[str, dict[str, float]]) -> dict[str, Any]:
    """One run's figures per request, printed."""
    replication = max(0.0, messages - other)
    protobuf = _estimate_us(costs["protobuf"], replication, other, updates)
    msgpack = _estimate_us(costs["msgpack"], replication, other, updates)
    row: dict[str, Any] = {"round": number + 1, "test": test, "rate": round(rate), "cpu_us": round(cpu_us, 1),
           "messages": round(messages, 3), "replication_messages": round(replication, 3),
           "updates": round(updates, 3), "protobuf_us": round(protobuf, 2),
           "msgpack_us": round(msgpack, 2), "share": round(protobuf / cpu_us, 4),
           "saving": round((protobuf - msgpack) / cpu_us, 4)}
    print(f"round {row['round']} {test}: {row['rate']:,}/s, servers' CPU {cpu_us:.1f} us/request; "
          f"per request {messages:.3f} peer messages ({replication:.3f} replication), {updates:.3f} "
          f"updates: ~{protobuf:.2f} us in protobuf ({100 * protobuf / cpu_us:.1f}% of the CPU), "
          f"~{msgpack:.2f} us as msgpack (saving {100 * row['saving']:.1f}%)", flush=True)
    return row


def on_cluster(args: argparse.Namespace, costs: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    cluster = start_local(protocol="okapi", dcs=("oregon", "virginia"), partitions=2, wan="realistic")
    rows: list[dict[str, Any]] = []
    try:
        first = next(server for server in cluster.servers if server.dc == 0 and server.partition == 0)
        port = int(cluster.fetch_stats()[first.address]["driver"]["resp_port"])
        pids = cluster.pids()
        _redis_benchmark(port, "set", args.requests // 4, args.clients)  # warm up, fill the keyspace
        for number in range(args.rounds):
            for test in ("set", "get"):
                before = _sent(cluster)
                cpu_before = _cpu_seconds(pids)
                rate = _redis_benchmark(port, test, args.requests, args.clients)
                cpu_us = (_cpu_seconds(pids) - cpu_before) * 1e6 / args.requests
                messages, other, updates = [(after - earlier) / args.requests
                                            for after, earlier in zip(_sent(cluster), before, strict=True)]
                rows.append(_row(number, test.upper(), rate, cpu_us, messages, other, updates, costs))
        rows.extend(ycsb_rounds(cluster, args, costs))
        if args.profile:
            rows.append({"profile": profile(cluster, port, args)})
    finally:
        cluster.stop()
    return rows


async def _ycsb_a(address: str, sessions: int, warmup_s: float, duration_s: float, seed: int,
                 opened: Callable[[], tuple[float, ...]], closed: Callable[[], tuple[float, ...]],
                 ) -> tuple[int, tuple[float, ...], tuple[float, ...]]:
    """YCSB-A (reads and updates, half each) from ``sessions`` forks of one ``AsyncClient`` bootstrapped
    at ``address`` (it routes each key to its partition), a closed loop each; the operations of the
    window after ``warmup_s``, and what ``opened()`` and ``closed()`` measure at its ends."""
    config = WorkloadConfig("a", records=RECORDS)
    inserts = InsertSequence(RECORDS, 0, 1)
    sources = [make_source(config, random.Random(f"{seed}/{number}"), inserts, None) for number in range(sessions)]
    loop = asyncio.get_running_loop()
    counted = [0, 0]  # operations, and whether the window is open
    async with AsyncClient(address, timeout_s=10) as client:
        stop_at = loop.time() + warmup_s + duration_s

        async def session(fork: AsyncClient, source: Any) -> None:
            while loop.time() < stop_at:
                operation = source.next()
                if operation.kind == READ:
                    await fork.get(operation.key)
                else:
                    await fork.swap(operation.key, operation.value)
                counted[0] += counted[1]

        async def window() -> tuple[tuple[float, ...], tuple[float, ...]]:
            await asyncio.sleep(warmup_s)
            start = opened()
            counted[0], counted[1] = 0, 1
            await asyncio.sleep(duration_s)
            counted[1] = 0
            return start, closed()

        sampler = asyncio.create_task(window())
        await asyncio.gather(*(session(client.fork(), source) for source in sources))
        start, end = await sampler
    return max(counted[0], 1), start, end


def ycsb_rounds(cluster: RunningCluster, args: argparse.Namespace,
                costs: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    """YCSB-A through the native port (the client routes keys: no forwarding), per operation as
    ``on_cluster`` measures the RESP runs. The window's CPU is read inside the reads of its stats."""
    address = cluster.dc_addresses()[0]
    pids = cluster.pids()
    rows: list[dict[str, Any]] = []
    for number in range(args.rounds):
        operations, start, end = uvloop.run(_ycsb_a(
            address, 64, 1.0, args.duration_s, number,
            opened=lambda: (*_sent(cluster), _cpu_seconds(pids)),
            closed=lambda: (_cpu_seconds(pids), *_sent(cluster))))
        cpu_us = (end[0] - start[-1]) * 1e6 / operations
        messages, other, updates = [(later - earlier) / operations
                                    for later, earlier in zip(end[1:], start[:-1], strict=True)]
        rows.append(_row(number, "YCSB-A", operations / args.duration_s, cpu_us, messages, other, updates, costs))
    return rows


# ---------------------------------------------------------------- part 3: sampled


#: what a sample is counted as peer encoding for: its innermost frame of these files or functions
_ENCODING_FILES = ("peer_encoding.py", "wire_bytes.py")
_ENCODING_FUNCTIONS = {"peer_message_to_pb", "_fill_vector", "_fill_updates", "_fill_items", "encode_peer_message",
                       "encode_replicate_batch", "approximate_size", "frame_peer_message", "encode_batch",
                       "peer_message_from_pb", "_updates", "_vector", "_snapshot"}


def _lines(module: str, text: str) -> set[str]:
    """``file:line`` of each line of ``module``'s source holding ``text``."""
    # the .py, also where the module runs compiled (scripts/build_compiled.py: an extension beside it)
    path = Path(importlib.import_module(module).__file__ or "").with_name(module.rpartition(".")[2] + ".py")
    return {f"{path.name}:{number}" for number, line in enumerate(path.read_text().splitlines(), 1) if text in line}


#: leaf frames whose line is a protobuf call of the links: decoding a batch (native port and
#: ``Peer.Link``), decoding an acknowledgement (the sender); not the lines that also write to a socket
_ENCODING_LEAVES = (_lines("okapikv.server.native", "PeerBatch.FromString")
                    | _lines("okapikv.server.links", "LinkAck.FromString"))
_FRAME = re.compile(r"(?:\w+\.)?(\w+|<\w+>) \((.*?):\d+\)")


def _encoding_frame(stack: list[str]) -> str | None:
    for frame in stack:
        match = _FRAME.match(frame.strip())
        if match is None:
            continue
        function, path = match.groups()
        base = path.rsplit("/", 1)[-1]
        if base in _ENCODING_FILES or (base == "convert.py" and function in _ENCODING_FUNCTIONS):
            return f"{base}:{function}"
    leaf = _FRAME.match(stack[-1].strip()) if stack else None
    if leaf is not None:
        where = leaf.group(2).rsplit("/", 1)[-1] + ":" + stack[-1].strip().rsplit(":", 1)[-1].rstrip(")")
        if where in _ENCODING_LEAVES:
            return where
    return None


def profile(cluster: RunningCluster, port: int, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="okapi-peer-wire-") as folder:
        bench = subprocess.Popen(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", "set",
                                  "-n", str(args.requests * 4), "-c", str(args.clients), "-d", "8", "-r", "10000",
                                  "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1.0)
            spies = [subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--rate", "200", "--duration", "8",
                                       "--nonblocking", "--format", "raw", "-o", f"{folder}/{pid}.txt"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for pid in cluster.pids()]
            for spy in spies:
                spy.wait(timeout=60)
        finally:
            bench.kill()
            bench.wait()
        total = 0
        kinds: collections.Counter[str] = collections.Counter()
        for path in Path(folder).glob("*.txt"):
            for line in path.read_text().splitlines():
                stack, _, samples = line.rpartition(" ")
                total += int(samples)
                found = _encoding_frame(stack.split(";"))
                if found is not None:
                    kinds[found] += int(samples)
    share = sum(kinds.values()) / max(total, 1)
    print(f"sampled (py-spy, SET): {total} samples, {100 * share:.1f}% in peer encoding and decoding", flush=True)
    for kind, count in kinds.most_common(8):
        print(f"    {100 * count / total:5.2f}%  {kind}")
    return {"samples": total, "share": round(share, 4), "kinds": dict(kinds.most_common(8))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=40_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--duration-s", type=float, default=4.0, help="of each YCSB-A run")
    parser.add_argument("--profile", action="store_true", help="also sample the servers with py-spy")
    args = parser.parse_args()
    if shutil.which("redis-benchmark") is None:
        raise SystemExit("needs redis-benchmark (Debian: redis-tools)")
    if args.profile and shutil.which("py-spy") is None:
        raise SystemExit("--profile needs py-spy")
    figures = isolated()
    rows = on_cluster(args, figures)
    for test in ("SET", "GET", "YCSB-A"):
        measured = [row for row in rows if row.get("test") == test]
        if measured:
            share = statistics.median([row["share"] for row in measured])
            saving = statistics.median([row["saving"] for row in measured])
            print(f"{test}: median estimated share of the peer encoding {100 * share:.1f}% of the servers' CPU per "
                  f"request; msgpack would save {100 * saving:.1f}%", flush=True)
    print(json.dumps({"isolated": figures, "cluster": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
