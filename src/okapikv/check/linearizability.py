"""Per-key linearizability of single-DC histories (docs/protocol.md, "Operations": with one DC every single-key
operation is linearizable, because one partition server serializes a key).

Linearizability is local (Herlihy & Wing 1990): a history is linearizable iff its restriction to each
key is, so the history is partitioned by key and each part searched separately. The search is
Wing & Gong's, with Lowe's memoisation of (set of linearized operations, register state) and the
linked-list "lift / unlift" of porcupine: take the earliest pending call that can take effect now,
or backtrack at the first return whose operation has not taken effect.

Register semantics of the service (the course API): GET returns the value or null; PUT returns
whether a value existed and sets it; SWAP returns the old value (or null) and sets the new one;
DELETE returns whether a value existed and removes it. An operation of unknown outcome (``info``)
may take effect at any point after its invocation or never: it gets a return at infinity and any
output. Failed operations had no effect and are left out. SCAN and RO-TX are not checked here (a
RO-TX is a causal snapshot, not a linearizable read, docs/protocol.md, "Snapshot reads").
"""

from __future__ import annotations

from dataclasses import dataclass

from okapikv.check.anomalies import Anomaly
from okapikv.check.history import History, Operation

CHECKER = "linearizability"
#: search steps per key before giving up (reported as a note, not an anomaly)
DEFAULT_STEP_BUDGET = 2_000_000
INFINITY = 1 << 62
SINGLE_KEY = ("get", "put", "swap", "delete")


@dataclass(slots=True)
class _Entry:
    op: int  # index in the key's operation list
    is_call: bool
    time: int
    match: _Entry | None = None
    prev: _Entry | None = None
    next: _Entry | None = None


@dataclass(slots=True)
class LinearizabilityResult:
    anomalies: list[Anomaly]
    keys_checked: int
    operations_checked: int
    keys_undecided: list[str]


def _step(op: Operation, state: str | None) -> tuple[bool, str | None]:
    """Whether ``op`` may take effect in register state ``state``, and the state after it."""
    unknown = op.status != "ok"
    f = op.f
    if f == "get":
        return (unknown or op.read == state), state
    if f == "put":
        return (unknown or op.found == (state is not None)), op.value
    if f == "swap":
        return (unknown or op.old == state), op.value
    return (unknown or op.found == (state is not None)), None


def _build_list(ops: list[Operation]) -> _Entry:
    events: list[tuple[int, int, int]] = []  # (time, 0 = call / 1 = return, op index)
    for index, op in enumerate(ops):
        events.append((op.invoke_us, 0, index))
        end = op.complete_us if op.status == "ok" and op.complete_us is not None else INFINITY
        events.append((end, 1, index))
    # at equal times calls come first: operations that touch are treated as concurrent (no false alarm)
    events.sort()
    head = _Entry(-1, False, -1)
    calls: dict[int, _Entry] = {}
    last = head
    for time, kind, index in events:
        entry = _Entry(index, kind == 0, time)
        if kind == 0:
            calls[index] = entry
        else:
            call = calls[index]
            call.match = entry
            entry.match = call
        last.next = entry
        entry.prev = last
        last = entry
    return head


def _lift(entry: _Entry) -> None:
    assert entry.prev is not None and entry.match is not None
    entry.prev.next = entry.next
    if entry.next is not None:
        entry.next.prev = entry.prev
    match = entry.match
    assert match.prev is not None
    match.prev.next = match.next
    if match.next is not None:
        match.next.prev = match.prev


def _unlift(entry: _Entry) -> None:
    match = entry.match
    assert match is not None and match.prev is not None and entry.prev is not None
    match.prev.next = match
    if match.next is not None:
        match.next.prev = match
    entry.prev.next = entry
    if entry.next is not None:
        entry.next.prev = entry


def check_key(key: str, ops: list[Operation], step_budget: int = DEFAULT_STEP_BUDGET) -> Anomaly | None | bool:
    """Search one key's history. Returns an ``Anomaly``, ``None`` (linearizable) or ``False`` (the
    budget ran out before a decision)."""
    head = _build_list(ops)
    cache: set[tuple[int, str | None]] = set()
    stack: list[tuple[_Entry, str | None]] = []
    linearized = 0
    state: str | None = None
    entry = head.next
    steps = 0
    deepest = 0
    stuck_at: _Entry | None = None
    while head.next is not None:
        steps += 1
        if steps > step_budget:
            return False
        assert entry is not None
        if entry.is_call:
            op = ops[entry.op]
            allowed, new_state = _step(op, state)
            if allowed:
                new_linearized = linearized | (1 << entry.op)
                signature = (new_linearized, new_state)
                if signature not in cache:
                    cache.add(signature)
                    stack.append((entry, state))
                    state = new_state
                    linearized = new_linearized
                    _lift(entry)
                    entry = head.next
                    continue
            entry = entry.next
        else:
            if len(stack) >= deepest:
                deepest = len(stack)
                stuck_at = entry
            if not stack:
                break
            call, state = stack.pop()
            linearized &= ~(1 << call.op)
            _unlift(call)
            entry = call.next
    else:
        return None
    return _explain(key, ops, stuck_at)


def _explain(key: str, ops: list[Operation], stuck_at: _Entry | None) -> Anomaly:
    if stuck_at is None:
        return Anomaly("NotLinearizable", CHECKER, f"no linearization of key {key}", tuple(o.id for o in ops[:5]), key)
    blocked = ops[stuck_at.op]
    start = blocked.invoke_us
    end = blocked.complete_us if blocked.complete_us is not None else INFINITY
    concurrent = [
        op
        for op in ops
        if op is not blocked
        and op.invoke_us <= end
        and (op.complete_us if op.status == "ok" and op.complete_us is not None else INFINITY) >= start
    ][:8]
    preceding = [
        op for op in ops if op.status == "ok" and op.complete_us is not None and op.complete_us < start
    ][-3:]
    text = (
        f"{blocked.describe()} cannot take effect at any point between its invocation ({start} us) and its "
        f"return ({end} us), whatever the order of the operations before it"
    )
    if preceding:
        text += "; completed just before: " + "; ".join(op.describe() for op in preceding)
    if concurrent:
        text += "; concurrent: " + "; ".join(op.describe() for op in concurrent)
    involved = (blocked.id, *(op.id for op in preceding), *(op.id for op in concurrent))
    return Anomaly("NotLinearizable", CHECKER, text, involved, key)


def linearizability(
    history: History, *, step_budget: int = DEFAULT_STEP_BUDGET, require_single_dc: bool = True
) -> LinearizabilityResult:
    """Check every key of a single-DC history (multi-DC histories are skipped unless asked)."""
    if require_single_dc and len(history.dcs) > 1:
        return LinearizabilityResult([], 0, 0, [])
    by_key: dict[str, list[Operation]] = {}
    for op in history.operations:
        if op.f in SINGLE_KEY and op.key is not None and op.status != "fail":
            by_key.setdefault(op.key, []).append(op)
    anomalies: list[Anomaly] = []
    undecided: list[str] = []
    count = 0
    for key in sorted(by_key):
        ops = by_key[key]
        count += len(ops)
        outcome = check_key(key, ops, step_budget)
        if outcome is False:
            undecided.append(key)
        elif isinstance(outcome, Anomaly):
            anomalies.append(outcome)
    return LinearizabilityResult(anomalies, len(by_key), count, undecided)


def check_linearizability(history: History) -> list[Anomaly]:
    """Per-key linearizability; empty for multi-DC histories, where it is not promised."""
    return linearizability(history).anomalies
