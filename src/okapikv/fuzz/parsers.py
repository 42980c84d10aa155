"""Fuzz targets for every parser of untrusted input, and the bounds each call must keep.

Each target takes bytes, runs one parser on them and returns; it may raise only the parser's
documented error (``ALLOWED``). ``check`` runs a target under the bounds every parser owes (docs/design.md:
work and memory in proportion to the bytes received, never to a count or a length the input
announced):

- no exception but the documented one;
- memory: the peak ``tracemalloc`` sees (which includes what C extensions allocate through Python's
  allocator, as hiredis does for an array's element slots) at most ``MEMORY_PER_BYTE`` times the
  bytes fed plus ``MEMORY_SLACK_BYTES``;
- time: at most ``TIME_BASE_S`` plus ``TIME_PER_KIB_S`` per KiB fed, generous enough for a loaded
  machine and tracemalloc's overhead, and orders of magnitude below what a count-proportional bug
  costs (``*2147483647`` took hiredis seconds; ``partitions = 100000000`` took the config 107 s);
- for the RESP target, hiredis's work counted exactly: ``Reader.gets`` calls at most a fixed number
  per byte and per read (each call returns a frame of several bytes, or ends a read).

The targets (``TARGETS``): ``resp`` (both RESP parsers on the same reads, alone and behind the
canonical-frame fast path, which must all agree with the pure one alone), ``frames`` (the native
port's framing and the protobuf messages of client, result and peer frames), ``packed`` (the
native port's version 2: framing, then the msgpack operation batches a server decodes and turns
into core requests, and the result batches a client decodes), ``stdio`` (``okapi client``'s command lines),
``config`` (cluster config TOML), ``load`` (``okapi load`` files, both formats), ``history`` (history
files, and the checkers run on what parses). The first byte of an input picks how it is split into
reads (``split``), so one input exercises a parser's resumption too.

Two drivers: the suite's hypothesis tests (``tests/property/test_prop_parsers.py``: random bytes and
mutated valid inputs, seconds in all, no atheris needed) and the coverage-guided run of
``scripts/fuzz_parsers.py`` with atheris (``pip install 'okapikv[fuzz]'``), which instruments
okapikv, starts from ``seeds(target)`` and prints libFuzzer's execution count (docs/testing.md
records runs and says how to replay a failing input).
"""

from __future__ import annotations

import contextlib
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

import msgspec
from google.protobuf.message import DecodeError

from okapikv.check.history import HistoryError, HistoryRecorder, history_events, parse_events
from okapikv.check.report import check_history
from okapikv.client.commands import CommandError, parse
from okapikv.client.load_file import LoadInputError, records
from okapikv.cluster.config import ClusterConfig, local_cluster
from okapikv.resp import parser as resp_parser
from okapikv.resp.limits import RespLimits
from okapikv.wire import encoding
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import packed as packed_wire
from okapikv.wire.frames import MAGIC, MAGIC_V2, PEER_MAGIC, FrameDecoder, FrameError, encode_frame

MEMORY_PER_BYTE = 64
MEMORY_SLACK_BYTES = 1 << 20
TIME_BASE_S = 0.5
TIME_PER_KIB_S = 0.05
#: hiredis ``Reader.gets`` calls allowed per byte fed and per read
GETS_PER_BYTE = 1
GETS_PER_READ = 4
#: the RESP target's bounds: small, so that inputs of a few KiB reach every one of them
RESP_LIMITS = RespLimits(max_bulk_bytes=4096, max_arguments=64, max_inline_bytes=1024, max_request_bytes=16384)
FRAME_LIMIT_BYTES = 1 << 20


class BoundBroken(AssertionError):
    """A target broke a bound: an undocumented exception, memory, time or work out of proportion."""


def split(data: bytes) -> list[bytes]:
    """The reads an input stands for: its first byte is the read size (0: one read of the rest)."""
    if not data:
        return []
    size, payload = data[0], data[1:]
    if size == 0 or not payload:
        return [payload] if payload else []
    return [payload[index:index + size] for index in range(0, len(payload), size)]


# ------------------------------------------------------------------------------------ the targets


class _CountingReader:
    """hiredis's Reader with its ``gets`` calls counted (the RESP target's exact work measure)."""

    calls = 0

    def __init__(self) -> None:
        import hiredis

        self._reader = hiredis.Reader()

    def feed(self, data: bytes) -> None:
        self._reader.feed(data)

    def gets(self) -> object:
        _CountingReader.calls += 1
        return self._reader.gets()


class _CountingHiredis:
    """Stands in for the ``hiredis`` module inside a ``HiredisParser``."""

    Reader = _CountingReader

    def __init__(self) -> None:
        import hiredis

        self.ProtocolError = hiredis.ProtocolError


def _feed(parser: resp_parser.Parser, reads: list[bytes]) -> tuple[list[list[bytes]], str | None]:
    commands: list[list[bytes]] = []
    for data in reads:
        parsed, error = parser.feed(data)
        commands += parsed
        if error is not None:
            return commands, error
    return commands, None


def resp(data: bytes) -> None:
    """Both RESP parsers on the same reads, each alone and behind ``CanonicalFrames``: the same
    commands and the same error, every error a protocol error, and hiredis's calls within their
    bound."""
    reads = split(data)
    expected = _feed(resp_parser.PythonParser(RESP_LIMITS), reads)
    if expected[1] is not None and not expected[1].startswith("Protocol error: "):
        raise BoundBroken(f"not a protocol error: {expected[1]!r}")
    fast = _feed(resp_parser.CanonicalFrames(resp_parser.PythonParser(RESP_LIMITS), RESP_LIMITS), reads)
    if fast != expected:
        raise BoundBroken(f"the fast path disagrees: {fast!r}, python {expected!r}")
    if not resp_parser.hiredis_available():
        return
    parser = resp_parser.HiredisParser(RESP_LIMITS)
    parser._hiredis = _CountingHiredis()  # type: ignore[assignment]
    parser._reader = _CountingReader()  # type: ignore[assignment]
    _CountingReader.calls = 0
    got = _feed(parser, reads)
    if got != expected:
        raise BoundBroken(f"the parsers disagree: hiredis {got!r}, python {expected!r}")
    fast = _feed(resp_parser.CanonicalFrames(resp_parser.HiredisParser(RESP_LIMITS), RESP_LIMITS), reads)
    if fast != expected:
        raise BoundBroken(f"the fast path disagrees: hiredis {fast!r}, python {expected!r}")
    allowed = GETS_PER_BYTE * len(data) + GETS_PER_READ * len(reads)
    if _CountingReader.calls > allowed:
        raise BoundBroken(f"{_CountingReader.calls} hiredis calls for {len(data)} bytes in {len(reads)} reads")


def frames(data: bytes) -> None:
    """The native port's framing (a server's decoder: preamble, limit), then each frame as the
    messages the two ends decode: an operation batch and a peer batch (server), a result batch
    (client)."""
    decoder = FrameDecoder(max_frame_bytes=FRAME_LIMIT_BYTES, expect_magic=True, preambles=(MAGIC, PEER_MAGIC))
    try:
        payloads = [payload for read in split(data) for payload in decoder.feed(read)]
    except FrameError:
        return
    for payload in payloads:
        for message in (pb.OperationBatch, pb.PeerBatch, pb.ResultBatch):
            with contextlib.suppress(DecodeError):
                message.FromString(payload)


def packed(data: bytes) -> None:
    """The native port's version 2 (``okapikv.wire.packed``): a server's framing, each frame as an
    operation batch whose operations become core requests (as ``NativeConnection`` hands them to
    the node), and as a result batch (what a client decodes)."""
    decoder = FrameDecoder(max_frame_bytes=FRAME_LIMIT_BYTES, expect_magic=True, preambles=(MAGIC_V2, MAGIC))
    try:
        payloads = [payload for read in split(data) for payload in decoder.feed(read)]
    except FrameError:
        return
    for payload in payloads:
        with contextlib.suppress(msgspec.DecodeError):
            for operation in packed_wire.decode_operations(payload).operations:
                packed_wire.operation_request(operation, 1, 3)
        with contextlib.suppress(msgspec.DecodeError):
            packed_wire.decode_results(payload)


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def stdio(data: bytes) -> None:
    """``okapi client``'s parsing of each line (as it reads stdin: UTF-8, errors replaced)."""
    for line in data.decode("utf-8", errors="replace").splitlines():
        with contextlib.suppress(CommandError):
            parse(line)


def config(data: bytes) -> None:
    with contextlib.suppress(ValueError):
        ClusterConfig.from_toml(data.decode("utf-8", errors="replace"), source="fuzz.toml")


def load(data: bytes) -> None:
    """``okapi load``'s records, in both formats, in chunks of 3 records."""
    for input_format in ("tsv", "put"):
        try:
            for _ in records(_lines(data), input_format, chunk=3):
                pass
        except LoadInputError:
            pass


def history(data: bytes) -> None:
    """A history file, then every checker on what parses."""
    try:
        parsed = parse_events(data.decode("utf-8", errors="replace").splitlines(), "fuzz.jsonl")
    except HistoryError:
        return
    check_history(parsed)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "resp": resp, "frames": frames, "packed": packed, "stdio": stdio, "config": config, "load": load,
    "history": history,
}


@dataclass(frozen=True, slots=True)
class Cost:
    seconds: float
    peak_bytes: int


def check(target: str, data: bytes) -> Cost:
    """Run ``target`` on ``data`` under the module's bounds; ``BoundBroken`` when one is broken
    (an exception other than the documented error propagates as it is)."""
    run = TARGETS[target]
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    try:
        run(data)
    finally:
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1] - base
        if not tracing:
            tracemalloc.stop()
    if peak > MEMORY_PER_BYTE * len(data) + MEMORY_SLACK_BYTES:
        raise BoundBroken(f"{target}: {peak} bytes allocated for {len(data)} bytes fed")
    if seconds > TIME_BASE_S + TIME_PER_KIB_S * len(data) / 1024:
        raise BoundBroken(f"{target}: {seconds:.3f} s for {len(data)} bytes fed")
    return Cost(seconds, peak)


# ------------------------------------------------------------------------------------ seeds


def _resp_request(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(arg), arg) for arg in args)


def seeds(target: str) -> list[bytes]:
    """Valid inputs of each target (the split byte first), for the fuzzer to mutate from."""
    if target == "resp":
        stream = (_resp_request(b"SET", b"k", b"v") + _resp_request(b"MGET", *(b"k%d" % i for i in range(12)))
                  + b"PING\r\n" + b"*0\r\n" + b'ECHO "a b" \'c\'\r\n')
        return [b"\x00" + stream, b"\x03" + stream, b"\x00*2147483647\r\n", b"\x00*1\r\n~20\r\n"]
    if target == "frames":
        session = encoding.session_field(encoding.session((0, 0), 0))
        batch = encoding.batch_element(encoding.operation(1, b"\x1a", encoding.write_request(b"k", b"v", session)))
        peer = pb.PeerBatch(cluster_id="c", incarnation=1, first_sequence=1).SerializeToString()
        return [b"\x00" + MAGIC + encode_frame(batch), b"\x05" + PEER_MAGIC + encode_frame(peer),
                b"\x00" + MAGIC + b"\xff\xff\xff\xff"]
    if target == "packed":
        wire_session = packed_wire.Session((5, 7), 3)
        operation_batch = packed_wire.OperationBatch([
            packed_wire.Get(1, b"k", wire_session), packed_wire.Put(2, b"k", b"v", wire_session, 100),
            packed_wire.Swap(3, b"k", b"w"), packed_wire.Delete(4, b"k"),
            packed_wire.Scan(5, b"a", b"z", 10, wire_session, packed_wire.ScanSnapshot(0, (5, 7))),
            packed_wire.ReadTx(6, (b"a", b"b"), wire_session), packed_wire.PutMany(7, (b"a",), (b"1",), wire_session),
            packed_wire.Incr(8, b"c", -2, wire_session), packed_wire.Expire(9, b"k", 0, 0, True, wire_session)])
        result_batch = packed_wire.ResultBatch([
            packed_wire.GetResult(1, True, b"v", wire_session), packed_wire.Error(2, "INVALID_ARGUMENT", "no"),
            packed_wire.ScanResult(5, (packed_wire.KeyValuePair(b"a", b"1"),), wire_session, b"b",
                                   packed_wire.ScanSnapshot(0, (5, 7))),
            packed_wire.ReadTxResult(6, (packed_wire.MaybeValue(), packed_wire.MaybeValue(True, b"1")), wire_session)])
        operations = MAGIC_V2 + packed_wire.encode_frame(operation_batch)
        return [b"\x00" + operations, b"\x07" + operations,
                b"\x00" + MAGIC_V2 + packed_wire.encode_frame(result_batch), b"\x00" + MAGIC_V2 + b"\xff\xff\xff\xff",
                b"\x00" + MAGIC_V2 + encode_frame(b"\x91\xdd\xff\xff\xff\xff"),
                b"\x00" + MAGIC_V2 + encode_frame(b"\x91\x91\x94\x02\x01\xc6\xff\xff\xff\xff")]
    if target == "stdio":
        return [b"\x00PUT k v\nGET k\nSWAP k w\nDELETE k\nSCAN a z\nTX a b c\nSTOP\n"]
    if target == "config":
        text = local_cluster(dcs=("a", "b"), partitions=2, base_port=7100).to_toml()
        many = local_cluster(dcs=tuple(f"d{index}" for index in range(40)), partitions=1, wan="off",
                             base_port=7100).to_toml()
        return [b"\x00" + text.encode(), b"\x00" + text.replace("partitions = 2", "partitions = 10000000").encode(),
                b"\x00" + many.encode()]
    if target == "load":
        return [b"\x00k1\tv1\nk2\tv\t2\r\n\nPUT k3 v3\n"]
    if target == "history":
        recorder = HistoryRecorder({"source": "fuzz", "dcs": 2})
        put = recorder.invoke("c1", 0, "put", 1, key="x", value="v1")
        recorder.complete(put, "ok", 2, found=False, timestamp=5)
        get = recorder.invoke("c2", 1, "get", 3, key="x")
        recorder.complete(get, "ok", 4, value="v1")
        import json

        return [b"\x00" + "".join(json.dumps(event) + "\n" for event in history_events(recorder.history())).encode()]
    raise ValueError(f"unknown target {target!r}")
