"""The operation history format shared by simulated runs, real-cluster runs and fuzz runs.

Every client operation is recorded Jepsen/Maelstrom style as an *invoke* event when the client
issues it and one completion event when it learns the outcome: *ok* (it happened, with its
result), *fail* (it certainly did not happen: the server refused it) or *info* (unknown: a timeout,
a lost connection; it may or may not have taken effect). The checkers in ``okapikv.check`` are pure
functions of such a history.

On disk a history is JSON lines, one event per line, in the order the recorder saw them (for a
simulation: virtual time order). Keys and values are strings: the ASCII tokens of the service's
stdin/stdout protocol; arbitrary bytes are decoded as UTF-8 with ``surrogateescape`` so that every
byte string round-trips (``encode_bytes`` / ``decode_bytes``).

Schema (``format``: ``okapikv-history/1``)::

    {"type": "meta", "format": "okapikv-history/1", "source": "sim" | "cluster" | "fuzz",
     "dcs": 3, ...free-form run description: seed, protocol, partitions, command...}   optional, first

    {"type": "invoke", "op": 17, "process": "c5", "dc": 0, "f": F, "time_us": 1234, ...request}
    {"type": "ok" | "fail" | "info", "op": 17, "process": "c5", "dc": 0, "f": F, "time_us": 1900,
     ...result}
    {"type": "visible", "op": 17, "dc": 1, "time_us": 2400}                             optional

- ``op``: an integer unique in the history; pairs the invoke with its completion.
- ``process``: the session (client) that issued the operation. A process issues one operation at a
  time; its operations in invoke order are its *session order*.
- ``dc``: the index of the data center the session is attached to. Writes take that DC as their
  source replica, which together with the timestamp gives the last-writer-wins arbitration order.
- ``time_us``: microseconds: virtual true time in a simulation, wall-clock time in a real run. Only
  the linearizability checker uses times (real-time order); causal checks use none.
- optional on invoke: ``"final": true`` marks the convergence reads issued after quiescence;
  ``"server": [dc, partition]`` the server the request went to.

Requests (invoke fields) and results (ok fields) by ``f``:

==========  =====================================  ====================================================
f           invoke                                 ok
==========  =====================================  ====================================================
``get``     ``key``                                ``value``: string or null (missing or deleted)
``put``     ``key``, ``value``                     ``found``: bool, ``timestamp``: int
``swap``    ``key``, ``value``                     ``old``: string or null, ``timestamp``: int
``delete``  ``key``                                ``found``: bool, ``timestamp``: int
``rotx``    ``keys``: [string]                     ``values``: [string or null], aligned with keys
``scan``    ``start``, ``end`` (inclusive),         ``items``: [[key, value], ...] in key order
            ``limit``: int or null
==========  =====================================  ====================================================

Liveness (``okapikv.check.liveness``; recorded by the simulator): meta ``liveness`` holds
``heal_us`` (when every fault was repaired) and the bounds; a ``visible`` event says when write ``op``
became visible in DC ``dc`` (at the server of its key there), and a write's ``ok`` event may carry
``held_until_us``: the earliest time the protocol may make it visible in every other DC, later than
its completion because its timestamp is legitimately ahead of other servers' clocks (the server's
own clock, or a clock bound it restarted above, is ahead: docs/operations.md, "Clocks: the maximum
offset"). The liveness and convergence checkers count such a write's deadlines from then.

``timestamp`` is the write's 64-bit timestamp returned by the server (``WriteReply.timestamp`` /
``SwapReply.timestamp``); with the writer's ``dc`` it is the store's arbitration order
(``(timestamp, dc)``: last writer wins), which the causal checker needs to stay sound for LWW
registers. ``fail`` and ``info`` carry ``error``: a short reason.

Histories are *differentiated*: every write of a key writes a value never written to that key
before, so a read identifies the write it read from (a recorder that retries a write after a timeout
records the retry as a new operation with a new value, or the attempts as one operation). DELETE
writes a tombstone; a read that returns null read either the initial state or some tombstone. The
store is empty when the history starts: data loaded beforehand must be recorded as writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from okapikv.core.config import MAX_DCS

FORMAT = "okapikv-history/1"
FUNCTIONS = ("get", "put", "swap", "delete", "rotx", "scan")
WRITE_FUNCTIONS = frozenset({"put", "swap", "delete"})
COMPLETIONS = ("ok", "fail", "info")


def decode_bytes(data: bytes) -> str:
    """Bytes to the history's string form (lossless for any bytes)."""
    return data.decode("utf-8", "surrogateescape")


def encode_bytes(text: str) -> bytes:
    """The inverse of ``decode_bytes``."""
    return text.encode("utf-8", "surrogateescape")


class HistoryError(ValueError):
    """A history file that does not follow the schema."""


@dataclass(slots=True, eq=False)
class Operation:
    """One client operation: its request, and its outcome once known.

    ``status`` is ``None`` while no completion was recorded (a history cut short): checkers treat
    it like ``info``.
    """

    id: int
    process: str
    dc: int
    f: str
    invoke_us: int
    key: str | None = None  # get, put, swap, delete
    keys: tuple[str, ...] = ()  # rotx
    start: str | None = None  # scan
    end: str | None = None
    limit: int | None = None
    value: str | None = None  # value written by put / swap
    final: bool = False
    server: tuple[int, int] | None = None
    status: str | None = None
    complete_us: int | None = None
    read: str | None = None  # get result
    found: bool | None = None  # put / delete result
    old: str | None = None  # swap result
    values: tuple[str | None, ...] = ()  # rotx result
    items: tuple[tuple[str, str], ...] = ()  # scan result
    timestamp: int | None = None  # write timestamp
    error: str | None = None
    held_until_us: int | None = None  # write: not visible elsewhere before this (module docstring)
    visible: dict[int, int] | None = None  # write: DC -> time it became visible there

    @property
    def is_write(self) -> bool:
        return self.f in WRITE_FUNCTIONS

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def written(self) -> str | None:
        """The value this operation writes (None: a tombstone, or not a write)."""
        return self.value if self.f in ("put", "swap") else None

    def describe(self) -> str:
        """A one-line human description, e.g. ``op 17 c5@dc0 put k1=v3 -> found=false ts=...``."""
        request = self._request_text()
        outcome = self._outcome_text()
        return f"op {self.id} {self.process}@dc{self.dc} {request} -> {outcome}"

    def _request_text(self) -> str:
        f = self.f
        if f == "get":
            return f"get {self.key}"
        if f in ("put", "swap"):
            return f"{f} {self.key}={self.value}"
        if f == "delete":
            return f"delete {self.key}"
        if f == "rotx":
            return "rotx [" + ", ".join(self.keys) + "]"
        limit = "" if self.limit is None else f" limit {self.limit}"
        return f"scan {self.start}..{self.end}{limit}"

    def _outcome_text(self) -> str:
        if self.status != "ok":
            return f"{self.status or 'pending'}" + (f" ({self.error})" if self.error else "")
        f = self.f
        ts = f" ts={self.timestamp}" if self.timestamp is not None else ""
        if f == "get":
            return f"{self.read}"
        if f in ("put", "delete"):
            return f"found={str(self.found).lower()}{ts}"
        if f == "swap":
            return f"old={self.old}{ts}"
        if f == "rotx":
            return "[" + ", ".join(f"{k}={v}" for k, v in zip(self.keys, self.values, strict=False)) + "]"
        return "[" + ", ".join(f"{k}={v}" for k, v in self.items) + "]"

    # ------------------------------------------------------------------ JSON events

    def invoke_event(self) -> dict[str, Any]:
        event: dict[str, Any] = {
            "type": "invoke",
            "op": self.id,
            "process": self.process,
            "dc": self.dc,
            "f": self.f,
            "time_us": self.invoke_us,
        }
        f = self.f
        if f == "rotx":
            event["keys"] = list(self.keys)
        elif f == "scan":
            event["start"] = self.start
            event["end"] = self.end
            event["limit"] = self.limit
        else:
            event["key"] = self.key
            if f in ("put", "swap"):
                event["value"] = self.value
        if self.final:
            event["final"] = True
        if self.server is not None:
            event["server"] = list(self.server)
        return event

    def completion_event(self) -> dict[str, Any]:
        status = self.status or "info"
        event: dict[str, Any] = {
            "type": status,
            "op": self.id,
            "process": self.process,
            "dc": self.dc,
            "f": self.f,
            "time_us": self.complete_us,
        }
        if status != "ok":
            event["error"] = self.error
            return event
        f = self.f
        if f == "get":
            event["value"] = self.read
        elif f in ("put", "delete"):
            event["found"] = self.found
            event["timestamp"] = self.timestamp
        elif f == "swap":
            event["old"] = self.old
            event["timestamp"] = self.timestamp
        elif f == "rotx":
            event["values"] = list(self.values)
        else:
            event["items"] = [list(item) for item in self.items]
        if self.held_until_us is not None:
            event["held_until_us"] = self.held_until_us
        return event

    def visible_event(self, dc: int) -> dict[str, Any]:
        assert self.visible is not None
        return {"type": "visible", "op": self.id, "dc": dc, "time_us": self.visible[dc]}


@dataclass(slots=True)
class History:
    """A parsed history: run description plus operations in invoke order."""

    operations: list[Operation]
    meta: dict[str, Any] = field(default_factory=dict)
    #: memo for analyses shared by several checkers (see ``okapikv.check.causal``)
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def dcs(self) -> set[int]:
        return {op.dc for op in self.operations}

    def by_id(self) -> dict[int, Operation]:
        return {op.id: op for op in self.operations}


class HistoryRecorder:
    """Builds a history as operations happen (simulator, real clients, fuzzer).

    ``invoke`` returns the ``Operation``; the caller fills its result fields and calls ``complete``.
    Events are kept in occurrence order for ``write``.
    """

    __slots__ = ("meta", "operations", "_events", "_next_id")

    def __init__(self, meta: dict[str, Any] | None = None) -> None:
        self.meta: dict[str, Any] = dict(meta or {})
        self.operations: list[Operation] = []
        self._events: list[tuple[int, Operation]] = []  # (-1 invoke, -2 completion, else visible in DC)
        self._next_id = 0

    def invoke(self, process: str, dc: int, f: str, time_us: int, **request: Any) -> Operation:
        op = Operation(self._next_id, process, dc, f, time_us, **request)
        self._next_id += 1
        self.operations.append(op)
        self._events.append((-1, op))
        return op

    def complete(self, op: Operation, status: str, time_us: int, **result: Any) -> None:
        op.status = status
        op.complete_us = time_us
        for name, value in result.items():
            setattr(op, name, value)
        self._events.append((-2, op))

    def visible(self, op: Operation, dc: int, time_us: int) -> None:
        """Write ``op`` became visible in DC ``dc`` at ``time_us`` (the first time only)."""
        if op.visible is None:
            op.visible = {}
        if dc not in op.visible:
            op.visible[dc] = time_us
            self._events.append((dc, op))

    def history(self) -> History:
        return History(list(self.operations), dict(self.meta))

    def events(self) -> Iterator[dict[str, Any]]:
        meta = {"type": "meta", "format": FORMAT, **self.meta}
        yield meta
        for kind, op in self._events:
            yield op.invoke_event() if kind == -1 else op.completion_event() if kind == -2 else op.visible_event(kind)

    def write(self, path: str | Path) -> None:
        with open(path, "w", encoding="utf-8") as stream:
            write_events(self.events(), stream)


def write_events(events: Iterable[dict[str, Any]], stream: IO[str]) -> None:
    for event in events:
        stream.write(json.dumps(event, separators=(",", ":")))
        stream.write("\n")


def history_events(history: History) -> Iterator[dict[str, Any]]:
    """Events of a parsed history, invokes and completions merged by time (for re-writing)."""
    yield {"type": "meta", "format": FORMAT, **history.meta}
    timeline: list[tuple[int, int, int, dict[str, Any]]] = []
    for op in history.operations:
        timeline.append((op.invoke_us, 0, op.id, op.invoke_event()))
        if op.status is not None:
            timeline.append((op.complete_us if op.complete_us is not None else op.invoke_us, 1, op.id,
                             op.completion_event()))
        for dc, time_us in (op.visible or {}).items():
            timeline.append((time_us, 2, op.id, op.visible_event(dc)))
    timeline.sort(key=lambda entry: entry[:3])
    for entry in timeline:
        yield entry[3]


def save_history(history: History, path: str | Path) -> None:
    with open(path, "w", encoding="utf-8") as stream:
        write_events(history_events(history), stream)


def _optional_str(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise HistoryError(f"{where}: expected a string or null, got {value!r}")


def _parse_invoke(event: dict[str, Any], where: str) -> Operation:
    try:
        op_id = int(event["op"])
        process = str(event["process"])
        dc = int(event.get("dc", 0))
        f = str(event["f"])
        time_us = int(event["time_us"])
    except (KeyError, TypeError, ValueError) as error:
        raise HistoryError(f"{where}: invoke event lacks a valid op/process/f/time_us ({error})") from None
    if f not in FUNCTIONS:
        raise HistoryError(f"{where}: unknown operation {f!r}; expected one of {', '.join(FUNCTIONS)}")
    op = Operation(op_id, process, dc, f, time_us)
    if f == "rotx":
        op.keys = tuple(str(k) for k in event.get("keys", ()))
    elif f == "scan":
        op.start = _optional_str(event.get("start"), where)
        op.end = _optional_str(event.get("end"), where)
        limit = event.get("limit")
        op.limit = None if limit is None else int(limit)
    else:
        op.key = _optional_str(event.get("key"), where)
        if f in ("put", "swap"):
            op.value = _optional_str(event.get("value"), where)
    op.final = bool(event.get("final", False))
    server = event.get("server")
    if server is not None:
        op.server = (int(server[0]), int(server[1]))
    return op


def _apply_completion(op: Operation, event: dict[str, Any], where: str) -> None:
    status = event["type"]
    op.status = status
    op.complete_us = int(event["time_us"]) if event.get("time_us") is not None else None
    if status != "ok":
        op.error = None if event.get("error") is None else str(event.get("error"))
        return
    f = op.f
    if f == "get":
        op.read = _optional_str(event.get("value"), where)
    elif f in ("put", "delete"):
        op.found = bool(event.get("found", False))
    elif f == "swap":
        op.old = _optional_str(event.get("old"), where)
    elif f == "rotx":
        values = event.get("values", [])
        op.values = tuple(_optional_str(v, where) for v in values)
        if len(op.values) != len(op.keys):
            raise HistoryError(f"{where}: rotx op {op.id} returned {len(op.values)} values for {len(op.keys)} keys")
    else:
        op.items = tuple((str(k), str(v)) for k, v in event.get("items", []))
    timestamp = event.get("timestamp")
    if f in WRITE_FUNCTIONS and timestamp is not None:
        op.timestamp = int(timestamp)
    held = event.get("held_until_us")
    if f in WRITE_FUNCTIONS and held is not None:
        op.held_until_us = int(held)


def parse_events(lines: Iterable[str], source: str = "history") -> History:
    """Parse JSON-lines events into a ``History`` (raises ``HistoryError`` with the line number)."""
    meta: dict[str, Any] = {}
    operations: dict[int, Operation] = {}
    order: list[Operation] = []
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        where = f"{source}:{number}"
        try:
            event = json.loads(line)
        except (json.JSONDecodeError, ValueError) as error:  # ValueError: an integer of too many digits
            raise HistoryError(f"{where}: not JSON ({error})") from None
        except RecursionError:
            raise HistoryError(f"{where}: not JSON (arrays or objects nested too deep)") from None
        if not isinstance(event, dict):
            raise HistoryError(f"{where}: an event must be a JSON object")
        try:
            _parse_event(event, where, meta, operations, order)
        except HistoryError:
            raise
        except (TypeError, ValueError, OverflowError, KeyError, IndexError) as error:
            # a field of the wrong type or range (``int(None)``, ``int(1e999)``, a server of one entry)
            raise HistoryError(f"{where}: a malformed {event.get('type')!r} event ({type(error).__name__}: "
                               f"{error})") from None
    _check_meta(meta, source)
    order.sort(key=lambda op: (op.invoke_us, op.id))
    return History(order, meta)


def _check_meta(meta: dict[str, Any], source: str) -> None:
    """What the checkers size or count by: ``dcs`` (the liveness checker visits every DC for every
    write, so a history saying ``"dcs": 10**12`` must not reach it) and the liveness bounds."""
    dcs = meta.get("dcs")
    if dcs is not None and (type(dcs) is not int or not 1 <= dcs <= MAX_DCS):
        raise HistoryError(f"{source}: meta dcs must be an integer in 1..{MAX_DCS}, not {dcs!r}")
    spec = meta.get("liveness")
    if spec is not None:
        if not isinstance(spec, dict):
            raise HistoryError(f"{source}: meta liveness must be an object")
        for name in ("heal_us", "operation_bound_us", "visibility_bound_us"):
            if name in spec and type(spec[name]) is not int:
                raise HistoryError(f"{source}: meta liveness.{name} must be an integer, not {spec[name]!r}")


def _parse_event(event: dict[str, Any], where: str, meta: dict[str, Any], operations: dict[int, Operation],
                 order: list[Operation]) -> None:
    """One event into ``meta``, ``operations`` and ``order`` (``parse_events``)."""
    kind = event.get("type")
    if kind == "meta":
        meta.update({k: v for k, v in event.items() if k != "type"})
    elif kind == "invoke":
        op = _parse_invoke(event, where)
        if op.id in operations:
            raise HistoryError(f"{where}: op {op.id} invoked twice")
        operations[op.id] = op
        order.append(op)
    elif kind in COMPLETIONS:
        try:
            op = operations[int(event["op"])]
        except (KeyError, TypeError, ValueError):
            raise HistoryError(f"{where}: completion of an op that was never invoked") from None
        if op.status is not None:
            raise HistoryError(f"{where}: op {op.id} completed twice")
        _apply_completion(op, event, where)
    elif kind == "visible":
        try:
            op = operations[int(event["op"])]
            dc, time_us = int(event["dc"]), int(event["time_us"])
        except (KeyError, TypeError, ValueError):
            raise HistoryError(f"{where}: a visible event needs the op, dc and time_us of a write") from None
        if op.visible is None:
            op.visible = {}
        op.visible.setdefault(dc, time_us)
    else:
        raise HistoryError(f"{where}: unknown event type {kind!r}")


def load_history(path: str | Path) -> History:
    with open(path, encoding="utf-8") as stream:
        return parse_events(stream, str(path))
