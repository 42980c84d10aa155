"""The simulator's cost model: what each message, timer run and client operation costs a server's CPU.

Off by default (``SimConfig.cost is None``): a run then costs nothing but delays, as the simulator
has always modelled it. With a ``CostProfile`` every server is a machine with ``cores`` cores and a
FIFO queue in front of them (``okapikv.sim.cpu``), the model of the research group's own simulator
of these protocols (CC-SIM: a multi-core CPU queue per server, a cost per operation, a per-byte send
cost, a link bandwidth, calibrated by fitting against real runs). A profile holds, in microseconds:

- a client request's handling, by operation (``get_us`` .. ``scan_us``), plus, for a snapshot read,
  ``read_per_slice_us`` per slice its coordinator sends;
- a slice (``tx_slice_us`` plus ``tx_slice_per_key_us`` per key, ``scan_slice_us`` plus
  ``scan_slice_per_item_us`` per pair returned) and a slice reply at the coordinator
  (``slice_reply_us`` plus ``slice_reply_per_value_us`` per value);
- replication (``replicate_batch_us`` per batch, ``replicate_per_update_us`` per update) and
  heartbeats (``heartbeat_us``); a GSV riding on either, or a ``GsvExchange``, costs a USV step
  (``usv_step_us``);
- stabilization: a VV report at the aggregator (``vv_report_us``), the aggregation itself per
  partition of the DC (``gsv_aggregate_per_partition_us``, on the aggregator's timer run that
  broadcasts), a GSV broadcast at each partition (``gsv_broadcast_us``);
- catch-up messages (``catch_up_us`` plus ``replicate_per_update_us`` per update they carry);
- timer work: every timer run (``timer_us``: heartbeat and stabilization rounds) and each GC slice
  (``gc_slice_us``); a parked request resumed (``resume_us``);
- sending: every message or reply a call emits (``send_us`` plus ``send_per_byte_us`` per byte of
  its estimated size, ``message_bytes``);
- the clients' own CPU per operation when they share their server's machine (``client_us``; the
  paper's clients are collocated);
- the WAN links' bandwidth (``wan_bandwidth_mbps``, 0: unbounded);
- the machines: each server its own of ``cores`` cores, or all of them and their clients one
  (``shared_machine``: a deployment on one host, as ``okapi bench`` runs on this VM);
- blocked requests (``blocking``): ``free``, a parked request costs nothing while it waits (as
  okapikv's servers park them, docs/protocol.md, "Operations"); ``thread``, a request holds one of
  ``threads`` server threads while it is served and while it waits (the paper's lineage: a thread per
  blocked request), so a server whose threads are all blocked serves no further client request or
  slice until one is released (replication, stabilization and timers run on their own threads);
  a blocked thread also wakes every ``poll_ms`` to check whether it may go on, each wake costing
  ``wake_us`` of CPU (0: it costs nothing until it is released). docs/simulated.md, "The cost of a
  blocked request", gives the evidence for the packaged profiles' values.

A profile is a small JSON file (``load_profile``) that names where its figures came from
(``source``); the packaged ones are in ``okapikv/sim/profiles`` (``packaged_profile``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from importlib import resources
from operator import attrgetter
from pathlib import Path
from typing import Any

from okapikv.core.messages import (
    DeleteRequest,
    Effect,
    ExpireRequest,
    GetRequest,
    GsvBroadcast,
    GsvExchange,
    Heartbeat,
    IncrRequest,
    Message,
    PutRequest,
    ReadTxRequest,
    RepairBatch,
    ReplicateBatch,
    ScanRequest,
    ScanSlice,
    Send,
    SliceReply,
    SwapRequest,
    TxSlice,
    VvReport,
)

BLOCKING_MODELS = ("free", "thread")

#: bytes of a field the estimate cannot see into (an int, a flag, a length prefix)
_SCALAR_BYTES = 8


@dataclass(frozen=True, slots=True)
class CostProfile:
    """CPU costs in microseconds (module docstring); every cost defaults to 0."""

    name: str = "custom"
    #: where the figures came from (a calibration command and machine, a paper, a guess)
    source: str = ""
    cores: int = 1
    get_us: float = 0.0
    put_us: float = 0.0
    swap_us: float = 0.0
    delete_us: float = 0.0
    rotx_us: float = 0.0
    scan_us: float = 0.0
    read_per_slice_us: float = 0.0
    tx_slice_us: float = 0.0
    tx_slice_per_key_us: float = 0.0
    scan_slice_us: float = 0.0
    scan_slice_per_item_us: float = 0.0
    slice_reply_us: float = 0.0
    slice_reply_per_value_us: float = 0.0
    replicate_batch_us: float = 0.0
    replicate_per_update_us: float = 0.0
    heartbeat_us: float = 0.0
    usv_step_us: float = 0.0
    vv_report_us: float = 0.0
    gsv_aggregate_per_partition_us: float = 0.0
    gsv_broadcast_us: float = 0.0
    catch_up_us: float = 0.0
    timer_us: float = 0.0
    gc_slice_us: float = 0.0
    resume_us: float = 0.0
    send_us: float = 0.0
    send_per_byte_us: float = 0.0
    client_us: float = 0.0
    wan_bandwidth_mbps: float = 0.0
    blocking: str = "free"
    threads: int = 0
    #: the ``thread`` model: CPU per wake of a blocked thread, and how often it wakes (ms, not a
    #: cost: ``scaled`` leaves it)
    wake_us: float = 0.0
    poll_ms: float = 0.0
    #: every server and client shares one machine of ``cores`` cores (a whole deployment on one
    #: host, as ``okapi bench`` runs one on this VM); False: each server has its own
    shared_machine: bool = False

    def validate(self) -> None:
        problems = []
        if self.cores < 1:
            problems.append("at least one core")
        if self.blocking not in BLOCKING_MODELS:
            problems.append(f"blocking must be one of {', '.join(BLOCKING_MODELS)}, not {self.blocking!r}")
        elif self.blocking == "thread" and self.threads < 1:
            problems.append("the thread blocking model needs at least one thread")
        if self.wake_us and not self.poll_ms:
            problems.append("wake_us needs poll_ms (how often a blocked thread wakes)")
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, float) and (value < 0 or value != value):
                problems.append(f"{item.name} must be a non-negative number")
        if problems:
            raise ValueError(f"invalid cost profile {self.name!r}: " + "; ".join(problems))

    def scaled(self, factor: float) -> CostProfile:
        """Every CPU cost times ``factor`` (the bandwidth, cores and threads unchanged)."""
        changes = {item.name: getattr(self, item.name) * factor for item in fields(self)
                   if item.name.endswith("_us")}
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        return {item.name: getattr(self, item.name) for item in fields(self)}


def profile_from_json(data: dict[str, Any], *, where: str = "cost profile") -> CostProfile:
    """A ``CostProfile`` from a JSON object: unknown keys and wrong types are errors."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a JSON object")
    known = {item.name: item for item in fields(CostProfile)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"{where}: unknown keys {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for name, value in data.items():
        default = getattr(CostProfile(), name)
        if isinstance(default, str):
            if not isinstance(value, str):
                raise ValueError(f"{where}: {name} must be a string")
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise ValueError(f"{where}: {name} must be true or false")
        elif isinstance(default, int):
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{where}: {name} must be an integer")
        else:
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise ValueError(f"{where}: {name} must be a number")
            value = float(value)
        values[name] = value
    profile = CostProfile(**values)
    profile.validate()
    return profile


def load_profile(path: str | Path) -> CostProfile:
    """Read a profile: a file path, or the name of a packaged profile (``packaged_profile``)."""
    text_path = Path(path)
    if not text_path.exists() and not str(path).endswith(".json"):
        return packaged_profile(str(path))
    try:
        data = json.loads(text_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"cost profile {path}: {error}") from error
    return profile_from_json(data, where=f"cost profile {path}")


def packaged_profiles() -> list[str]:
    """The names of the profiles shipped in ``okapikv/sim/profiles``."""
    folder = resources.files("okapikv.sim") / "profiles"
    if not folder.is_dir():
        return []
    return sorted(entry.name.removesuffix(".json") for entry in folder.iterdir() if entry.name.endswith(".json"))


def packaged_profile(name: str) -> CostProfile:
    folder = resources.files("okapikv.sim") / "profiles"
    entry = folder / f"{name}.json"
    if not entry.is_file():
        raise ValueError(f"no cost profile {name!r} (a file path, or one of: {', '.join(packaged_profiles())})")
    return profile_from_json(json.loads(entry.read_text(encoding="utf-8")), where=f"cost profile {name}")


# ---------------------------------------------------------------- sizes

#: each type's sizer (``_sizer``), made once: the estimate is taken of every message sent, so it
#: looks each value's type up once instead of testing it against every kind
_SIZERS: dict[type, Callable[[Any], int]] = {}


def message_bytes(value: object) -> int:
    """An estimate of ``value``'s size on the wire: bytes and strings by length, every number,
    flag or absent field 8 bytes, tuples and messages the sum of their parts."""
    kind = type(value)
    if kind is int or value is None:
        return _SCALAR_BYTES
    sizer = _SIZERS.get(kind)
    if sizer is None:
        sizer = _SIZERS[kind] = _sizer(kind)
    return sizer(value)


def _tuple_bytes(value: tuple[object, ...]) -> int:
    total = 0
    for item in value:
        total += _SCALAR_BYTES if type(item) is int else message_bytes(item)
    return total


def _scalar_bytes(value: object) -> int:
    return _SCALAR_BYTES


def _sizer(kind: type) -> Callable[[Any], int]:
    """How ``message_bytes`` sizes a value of type ``kind``; a message (a struct,
    ``okapikv.core.messages.message``, or a dataclass) by one getter of all its fields, made once
    per type (no introspection per call)."""
    if issubclass(kind, bytes | str):
        return len
    if issubclass(kind, tuple):
        return _tuple_bytes
    names = getattr(kind, "__struct_fields__", None)
    if names is None:
        names = getattr(kind, "__dataclass_fields__", None)
    if names is None:
        return _scalar_bytes
    if not names:
        return lambda value: 0
    getter = attrgetter(*names)
    if len(names) == 1:  # an attrgetter of one name returns the value itself, not a tuple of one
        return lambda value: message_bytes(getter(value))
    return lambda value: _tuple_bytes(getter(value))


# ---------------------------------------------------------------- costs of calls

_REQUEST_COST = {
    GetRequest: "get_us", PutRequest: "put_us", SwapRequest: "swap_us", DeleteRequest: "delete_us",
    ReadTxRequest: "rotx_us", ScanRequest: "scan_us", IncrRequest: "swap_us", ExpireRequest: "swap_us",
}


class Costs:
    """A profile turned into the cost of each call (``call_us``), looked up by message type."""

    def __init__(self, profile: CostProfile, num_partitions: int) -> None:
        profile.validate()
        self.profile = profile
        self.num_partitions = num_partitions
        self._request: dict[type, float] = {kind: getattr(profile, name) for kind, name in _REQUEST_COST.items()}
        self.per_byte = profile.send_per_byte_us

    def send_us(self, effects: list[Effect]) -> float:
        p = self.profile
        total = p.send_us * len(effects)
        if self.per_byte:
            last: object = None
            size = 0
            for effect in effects:
                message = effect.message if type(effect) is Send else effect.reply  # type: ignore[union-attr]
                if message is not last:  # a batch sent to every other DC is one message: sized once
                    last, size = message, message_bytes(message)
                total += self.per_byte * size
        return total

    def message_us(self, message: Message, effects: list[Effect]) -> float:
        """What handling ``message`` costs, its effects' sending included."""
        p = self.profile
        cost: float
        request = self._request.get(type(message))
        if request is not None:
            cost = request
            if isinstance(message, ReadTxRequest | ScanRequest):
                cost += p.read_per_slice_us * sum(1 for e in effects if type(e) is Send)
        elif isinstance(message, ReplicateBatch):
            cost = p.replicate_batch_us + p.replicate_per_update_us * len(message.updates)
            if message.gsv is not None:
                cost += p.usv_step_us
        elif isinstance(message, Heartbeat):
            cost = p.heartbeat_us + (p.usv_step_us if message.gsv is not None else 0.0)
        elif isinstance(message, SliceReply):
            cost = p.slice_reply_us + p.slice_reply_per_value_us * len(message.items)
        elif isinstance(message, TxSlice):
            cost = p.tx_slice_us + p.tx_slice_per_key_us * len(message.keys)
        elif isinstance(message, ScanSlice):
            items = sum(len(e.message.items) for e in effects
                        if isinstance(e, Send) and isinstance(e.message, SliceReply))
            cost = p.scan_slice_us + p.scan_slice_per_item_us * items
        elif isinstance(message, VvReport):
            cost = p.vv_report_us
        elif isinstance(message, GsvBroadcast):
            cost = p.gsv_broadcast_us
        elif isinstance(message, GsvExchange):
            cost = p.usv_step_us
        elif isinstance(message, RepairBatch):
            cost = p.catch_up_us + p.replicate_per_update_us * len(message.updates)
        else:  # the rest of catch-up: CatchUpRequest, CatchUpReply, Restarted, ReplicaProgress
            cost = p.catch_up_us
        return cost + self.send_us(effects)

    def timer_us(self, effects: list[Effect], *, gc_slice: bool) -> float:
        """What a timer run costs: the run, a GC slice if one ran, the GSV aggregation if this
        aggregator broadcast, and its effects' sending."""
        p = self.profile
        cost = p.timer_us + (p.gc_slice_us if gc_slice else 0.0)
        if p.gsv_aggregate_per_partition_us and any(type(e) is Send and type(e.message) is GsvBroadcast
                                                    for e in effects):
            cost += p.gsv_aggregate_per_partition_us * self.num_partitions
        return cost + self.send_us(effects)
