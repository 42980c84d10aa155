"""Causal consistency of a differentiated key-value history under last-writer-wins arbitration.

Model (Bouajjani, Enea, Guerraoui, Hamza: "On verifying causal consistency", POPL 2017). Each
operation is an event of its session (process). Session order ``po`` orders a process's completed
operations; read-from ``rf`` links a write to every operation that returned its value (histories are
differentiated, so a value names its write); causal order ``co = (po ∪ rf)+``. A GET, the read half
of a SWAP, a PUT/DELETE that reports ``found = false``, a RO-TX and a SCAN are reads; a RO-TX or SCAN
is one event that reads several keys at once (an atomic snapshot, docs/protocol.md, "Snapshot reads").

The store resolves concurrent writes last-writer-wins by ``(timestamp, source DC)`` (section 1), and
the history records both, so the arbitration order ``arb`` is known instead of guessed. The bad
patterns are then checked directly, each in linear time over the history:

- ``CyclicCO``: ``co`` has a cycle (an operation causally precedes itself).
- ``ThinAirRead``: a read returns a value no write wrote (or only a failed write).
- ``WriteCOInitRead``: a read returns nothing (initial state) although a write of the key is in its
  causal past, and no deletion of the key could be the one it read.
- ``WriteCORead``: a read returns the value of ``w`` although ``w →co w' →co read`` for another write
  ``w'`` of the key (it read an overwritten value).
- ``CyclicCF``: a read returns ``w`` although a write ``w'`` of the key that the store orders after
  ``w`` (arb) is in its causal past: the conflict order ``w' →cf w`` contradicts arbitration, so the
  replicas cannot converge consistently with causality. Also reported when ``arb`` contradicts ``co``
  between two writes of a key (``w' →co w`` but ``w'`` is arbitrated later).
- ``DuplicateWrite`` / ``DuplicateTimestamp``: the history is not differentiated, or two writes of a
  key got the same ``(timestamp, DC)`` (the store would keep only one: a lost write).

Soundness for LWW registers: remote updates may stay invisible for a while, so a read may return any
write that is not superseded *within its causal past*; only writes in the causal past constrain it.
A read that returns null is explained by the initial state or by *some* deletion; which one is
unknown, so no ``rf`` edge is added for it, and it is flagged only when every deletion of the key
that it could have read is arbitrated before a write in its causal past. Writes whose outcome is
unknown (``info``) or that carry no timestamp may be read from but are never used as witnesses.
Every reported violation is therefore a real one (no false positives); completeness is that of the
patterns above.

Algorithm: a topological sweep of ``po ∪ rf`` (Kahn) carrying one vector clock per process
(numpy arrays: entry ``q`` is the highest position in ``q``'s session order that is in the causal
past). A write ``w'`` is in the causal past of operation ``o`` iff ``VC(o)[proc(w')] >= seq(w')``, so
"is any write of key x arbitrated after position a in the causal past of o" is one vectorised test
over that key's writes sorted by arbitration. Vector clocks of writes are kept only while some other
session still has to read them.

The same sweep feeds the snapshot checker (``FracturedRead``: a RO-TX/SCAN misses a causal
predecessor of another value it returns) and the session-guarantee checker (Terry et al., PDIS 1994:
read-your-writes, monotonic reads, monotonic writes, writes-follow-reads), which classify the
violations by the shape of their causal path.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from okapikv.check.anomalies import Anomaly
from okapikv.check.history import History, Operation, encode_bytes

CHECKER = "causal"
#: BFS budget (nodes visited, all violations together) for computing causal paths in explanations
PATH_BUDGET = 2_000_000
#: violations whose explanation gets a computed causal path
DETAILED_VIOLATIONS = 200
#: violations checked for the one-hop session guarantees (monotonic writes, writes follow reads)
REMOTE_CLASSIFICATIONS = 5_000

IntArray = npt.NDArray[np.int64]


@dataclass(slots=True)
class _KeyWrites:
    """Ranked writes of one key, sorted by arbitration ``(timestamp, dc, op id)``."""

    writes: list[int] = field(default_factory=list)  # dense op indices
    processes: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    seqs: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    delete_positions: list[int] = field(default_factory=list)
    has_unranked_delete: bool = False


@dataclass(slots=True)
class Violation:
    """An operation that misses a write in its own causal past.

    ``kind``: ``read`` (it read ``source``, or null when ``source`` is None, although ``witness`` is
    arbitrated later and in its causal past) or ``write`` (the write ``op`` is arbitrated before
    ``witness`` although ``witness`` is in its causal past).
    """

    kind: str
    op: int
    key: str
    source: int | None
    witness: int
    effective_position: int
    fractured_via: int | None = None
    deletion_in_past: bool = False
    session: str | None = None
    session_via: int | None = None


@dataclass(slots=True)
class CausalAnalysis:
    ops: list[Operation]
    structural: list[Anomaly]
    violations: list[Violation]
    predecessors: list[list[int]]
    po_predecessor: list[int]
    topo: list[int]
    reads_checked: int = 0
    writes_ranked: int = 0
    unchecked_ops: int = 0
    scan_problems: list[Anomaly] = field(default_factory=list)
    path_budget: int = PATH_BUDGET

    def path(self, start: int, end: int) -> list[int] | None:
        """A causal path ``start →co ... → end`` (dense indices), or None if there is none (or the
        search budget is spent). Breadth-first backwards from ``end``, visiting only operations after
        ``start`` in the topological order (every path from ``start`` lies there)."""
        topo = self.topo
        floor = topo[start]
        if floor < 0 or topo[end] < 0 or topo[end] < floor:
            return None
        parent: dict[int, int] = {end: -1}
        queue = deque([end])
        while queue:
            node = queue.popleft()
            if node == start:
                path = [node]
                while parent[path[-1]] != -1:
                    path.append(parent[path[-1]])
                return path
            self.path_budget -= 1
            if self.path_budget < 0:
                return None
            for pred in self.predecessors[node]:
                if pred not in parent and topo[pred] >= floor:
                    parent[pred] = node
                    queue.append(pred)
        return None

    def describe_path(self, path: list[int]) -> str:
        parts = [f"op {self.ops[path[0]].id}"]
        for before, after in zip(path, path[1:], strict=False):
            edge = "po" if self.po_predecessor[after] == before else "rf"
            parts.append(f"-{edge}-> op {self.ops[after].id}")
        return " ".join(parts)


def analyse(history: History) -> CausalAnalysis:
    """The shared sweep (memoised on the history object)."""
    cached = history.cache.get("causal")
    if cached is None:
        cached = _Sweep(history).run()
        history.cache["causal"] = cached
    assert isinstance(cached, CausalAnalysis)
    return cached


def _key_bytes(key: str) -> bytes:
    return encode_bytes(key)


class _Sweep:
    """Builds po and rf, then runs the vector-clock sweep. Indices are dense positions in ``ops``."""

    def __init__(self, history: History) -> None:
        self.ops = list(history.operations)
        self.structural: list[Anomaly] = []
        self.scan_problems: list[Anomaly] = []
        self.violations: list[Violation] = []
        count = len(self.ops)
        self.process_of = [0] * count
        self.seq = [0] * count  # 1-based position in session order; 0 for ops outside it
        self.po_pred = [-1] * count
        self.predecessors: list[list[int]] = [[] for _ in range(count)]
        self.reads: list[list[tuple[str, int | None]]] = [[] for _ in range(count)]  # (key, source or None)
        self.position = [-1] * count  # arbitration position of a ranked write within its key
        self.keys: dict[str, _KeyWrites] = {}
        self.reads_checked = 0

    # ------------------------------------------------------------------ building the graph

    def run(self) -> CausalAnalysis:
        self._sessions()
        writer_of = self._index_writes()
        self._rank_writes()
        self._extract_reads(writer_of)
        topo, unchecked = self._sweep()
        analysis = CausalAnalysis(
            self.ops,
            self.structural,
            self.violations,
            self.predecessors,
            self.po_pred,
            topo,
            reads_checked=self.reads_checked,
            writes_ranked=sum(len(k.writes) for k in self.keys.values()),
            unchecked_ops=unchecked,
            scan_problems=self.scan_problems,
        )
        return analysis

    def _sessions(self) -> None:
        processes: dict[str, int] = {}
        chains: dict[int, list[int]] = {}
        pending: list[int] = []
        for index, op in enumerate(self.ops):
            p = processes.setdefault(op.process, len(processes))
            self.process_of[index] = p
            if op.status == "ok":
                chains.setdefault(p, []).append(index)
            elif op.status != "fail":
                pending.append(index)
        self.num_processes = len(processes)
        ops = self.ops
        for chain in chains.values():
            chain.sort(key=lambda i: (ops[i].invoke_us, ops[i].id))
            for number, index in enumerate(chain, 1):
                self.seq[index] = number
                if number > 1:
                    self.po_pred[index] = chain[number - 2]
        # an operation of unknown outcome follows what its session completed before it, and nothing
        # of its session follows it (the session went on without knowing)
        invokes = {p: [ops[i].invoke_us for i in chain] for p, chain in chains.items()}
        for index in pending:
            chain = chains.get(self.process_of[index], [])
            position = bisect_left(invokes[self.process_of[index]], ops[index].invoke_us) if chain else 0
            if position > 0:
                self.po_pred[index] = chain[position - 1]
        self.chains = chains

    def _index_writes(self) -> dict[tuple[str, str], int]:
        writer_of: dict[tuple[str, str], int] = {}
        ambiguous: set[tuple[str, str]] = set()
        self.failed_writer: dict[tuple[str, str], int] = {}
        for index, op in enumerate(self.ops):
            if op.f not in ("put", "swap") or op.key is None or op.value is None:
                continue
            entry = (op.key, op.value)
            if op.status == "fail":
                self.failed_writer.setdefault(entry, index)
                continue
            previous = writer_of.get(entry)
            if previous is not None:
                if entry not in ambiguous:
                    ambiguous.add(entry)
                    self.structural.append(
                        Anomaly(
                            "DuplicateWrite",
                            "history",
                            f"{self.ops[previous].describe()} and {op.describe()} write the same value: the history"
                            " is not differentiated, so reads of this value are not checked",
                            (self.ops[previous].id, op.id),
                            op.key,
                        )
                    )
                continue
            writer_of[entry] = index
        for entry in ambiguous:
            writer_of[entry] = -1
        return writer_of

    def _rank_writes(self) -> None:
        by_key: dict[str, list[int]] = {}
        ops = self.ops
        for index, op in enumerate(ops):
            if not op.is_write or op.key is None or op.status == "fail":
                continue
            if op.status == "ok" and op.timestamp is not None:
                by_key.setdefault(op.key, []).append(index)
            elif op.f == "delete":
                self.keys.setdefault(op.key, _KeyWrites()).has_unranked_delete = True
        for key, indices in by_key.items():
            indices.sort(key=lambda i: (ops[i].timestamp, ops[i].dc, ops[i].id))
            entry = self.keys.setdefault(key, _KeyWrites())
            entry.writes = indices
            entry.processes = np.array([self.process_of[i] for i in indices], dtype=np.int64)
            entry.seqs = np.array([self.seq[i] for i in indices], dtype=np.int64)
            for position, index in enumerate(indices):
                self.position[index] = position
                if ops[index].f == "delete":
                    entry.delete_positions.append(position)
                if position and (ops[indices[position - 1]].timestamp, ops[indices[position - 1]].dc) == (
                    ops[index].timestamp,
                    ops[index].dc,
                ):
                    other = ops[indices[position - 1]]
                    self.structural.append(
                        Anomaly(
                            "DuplicateTimestamp",
                            CHECKER,
                            f"{other.describe()} and {ops[index].describe()} got the same timestamp in the same DC:"
                            " the store keeps one version per (timestamp, DC), so one of these writes is lost",
                            (other.id, ops[index].id),
                            key,
                        )
                    )

    def _extract_reads(self, writer_of: dict[tuple[str, str], int]) -> None:
        ops = self.ops
        sorted_keys = sorted(self.keys_written(), key=_key_bytes)
        sorted_key_bytes = [_key_bytes(k) for k in sorted_keys]
        for index, op in enumerate(ops):
            if op.status != "ok":
                continue
            observed: list[tuple[str, str | None]] = []
            f = op.f
            if f == "get" and op.key is not None:
                observed.append((op.key, op.read))
            elif f == "swap" and op.key is not None:
                observed.append((op.key, op.old))
            elif f in ("put", "delete") and op.key is not None and op.found is False:
                observed.append((op.key, None))
            elif f == "rotx":
                seen: set[str] = set()
                for key, value in zip(op.keys, op.values, strict=False):
                    if key not in seen:
                        seen.add(key)
                        observed.append((key, value))
            elif f == "scan":
                observed.extend(self._scan_reads(op, sorted_keys, sorted_key_bytes))
            reads = self.reads[index]
            for key, value in observed:
                if value is None:
                    reads.append((key, None))
                    continue
                writer = writer_of.get((key, value))
                if writer is None:
                    self._thin_air(op, key, value)
                    continue
                if writer < 0:
                    continue  # ambiguous (duplicate value): not checked
                if writer == index:
                    continue
                reads.append((key, writer))
                if writer not in self.predecessors[index]:
                    self.predecessors[index].append(writer)
            if self.po_pred[index] >= 0 and self.po_pred[index] not in self.predecessors[index]:
                self.predecessors[index].append(self.po_pred[index])
        for index, op in enumerate(ops):
            if op.status not in ("ok", "fail") and self.po_pred[index] >= 0:
                self.predecessors[index].append(self.po_pred[index])

    def keys_written(self) -> Iterable[str]:
        keys = {op.key for op in self.ops if op.is_write and op.key is not None and op.status != "fail"}
        return keys

    def _scan_reads(
        self, op: Operation, sorted_keys: list[str], sorted_key_bytes: list[bytes]
    ) -> list[tuple[str, str | None]]:
        """Items a scan returned, plus null reads of every written key in the range it covered."""
        start, end = op.start or "", op.end or ""
        low, high = _key_bytes(start), _key_bytes(end)
        previous: bytes | None = None
        for key, _value in op.items:
            raw = _key_bytes(key)
            if not low <= raw <= high:
                self.scan_problems.append(
                    Anomaly("ScanOutOfRange", "snapshot", f"{op.describe()} returned key {key} outside its range",
                            (op.id,), key)
                )
            if previous is not None and raw <= previous:
                self.scan_problems.append(
                    Anomaly("ScanOrder", "snapshot", f"{op.describe()} returned keys out of order or twice at {key}",
                            (op.id,), key)
                )
            previous = raw
        if op.limit is not None and len(op.items) > op.limit:
            self.scan_problems.append(
                Anomaly("ScanLimit", "snapshot", f"{op.describe()} returned {len(op.items)} items, over its limit",
                        (op.id,))
            )
        covered_high = high
        if op.limit is not None and len(op.items) >= op.limit:
            covered_high = previous if previous is not None else low
            if op.limit == 0:
                return []
        returned = {key: value for key, value in op.items}
        result: list[tuple[str, str | None]] = list(returned.items())
        lo = bisect_left(sorted_key_bytes, low)
        hi = bisect_right(sorted_key_bytes, covered_high)
        for position in range(lo, hi):
            key = sorted_keys[position]
            if key not in returned:
                result.append((key, None))
        return result

    def _thin_air(self, op: Operation, key: str, value: str) -> None:
        failed = self.failed_writer.get((key, value))
        if failed is not None:
            why = f"only {self.ops[failed].describe()} wrote it, and that write failed"
            involved: tuple[int, ...] = (op.id, self.ops[failed].id)
        else:
            why = "no operation of the history wrote it"
            involved = (op.id,)
        self.structural.append(
            Anomaly("ThinAirRead", CHECKER, f"{op.describe()} read {key}={value}, but {why}", involved, key)
        )

    # ------------------------------------------------------------------ the sweep

    def _sweep(self) -> tuple[list[int], int]:
        ops = self.ops
        count = len(ops)
        in_graph = [op.status == "ok" for op in ops]
        readers: list[int] = [0] * count  # how many later ops still need this op's vector clock
        successors: list[list[int]] = [[] for _ in range(count)]
        # unknown-outcome writes join the graph only when read
        for index in range(count):
            if not in_graph[index]:
                continue
            for source in self.predecessors[index]:
                if source == self.po_pred[index]:
                    continue
                if not in_graph[source]:
                    in_graph[source] = True
        for index in range(count):
            if not in_graph[index]:
                continue
            p = self.process_of[index]
            for pred in self.predecessors[index]:
                successors[pred].append(index)
                if not ops[index].ok:
                    readers[pred] += 1  # an unknown-outcome write reuses its predecessor's clock
                elif pred != self.po_pred[index] and (self.process_of[pred] != p or not ops[pred].ok):
                    readers[pred] += 1  # read from another session
        indegree = [len(self.predecessors[i]) if in_graph[i] else 0 for i in range(count)]
        queue = deque(i for i in range(count) if in_graph[i] and indegree[i] == 0)
        topo = [-1] * count
        order = 0
        dims = max(self.num_processes, 1)
        states: dict[int, IntArray] = {}
        snapshots: dict[int, IntArray] = {}
        zero = np.zeros(dims, dtype=np.int64)
        self._classification_state = _SessionState()
        while queue:
            index = queue.popleft()
            topo[index] = order
            order += 1
            op = ops[index]
            if op.ok:
                self._visit(index, states, snapshots, readers, dims)
            else:
                pred = self.po_pred[index]
                snapshots[index] = snapshots[pred] if pred >= 0 else zero
                if pred >= 0:
                    self._release(pred, snapshots, readers)
            for successor in successors[index]:
                indegree[successor] -= 1
                if indegree[successor] == 0:
                    queue.append(successor)
        unchecked = sum(1 for i in range(count) if in_graph[i] and topo[i] < 0)
        if unchecked:
            self._report_cycles(topo, in_graph)
        return topo, unchecked

    def _release(self, index: int, snapshots: dict[int, IntArray], readers: list[int]) -> None:
        readers[index] -= 1
        if readers[index] <= 0:
            snapshots.pop(index, None)

    def _visit(
        self,
        index: int,
        states: dict[int, IntArray],
        snapshots: dict[int, IntArray],
        readers: list[int],
        dims: int,
    ) -> None:
        p = self.process_of[index]
        vc = states.get(p)
        if vc is None:
            vc = states[p] = np.zeros(dims, dtype=np.int64)
        reads = self.reads[index]
        session = self._classification_state
        before: IntArray | None = None
        sources = [pred for pred in self.predecessors[index] if pred != self.po_pred[index]]
        if len(reads) > 1 and sources:
            before = vc.copy()
        for source in sources:
            if self.process_of[source] != p or not self.ops[source].ok:
                np.maximum(vc, snapshots[source], out=vc)
            if self.ops[source].ok:
                session.saw(p, self.process_of[source], self.seq[source])
        for read_key, read_source in reads:
            self._check_read(index, read_key, read_source, vc, before, snapshots)
        if self.position[index] >= 0:
            self._check_write(index, vc)
        vc[p] = self.seq[index]
        session.after(self, index)
        if readers[index] > 0:
            snapshots[index] = vc.copy()
        for source in sources:
            if self.process_of[source] != p or not self.ops[source].ok:
                self._release(source, snapshots, readers)

    def _check_read(
        self,
        index: int,
        key: str,
        source: int | None,
        vc: IntArray,
        before: IntArray | None,
        snapshots: dict[int, IntArray],
    ) -> None:
        entry = self.keys.get(key)
        if entry is None or not entry.writes:
            return
        if source is not None:
            effective = self.position[source]
            if effective < 0:
                return  # read from a write of unknown order: nothing to compare with
        else:
            if entry.has_unranked_delete:
                return
            effective = self._null_read_position(index, entry)
        self.reads_checked += 1
        start = effective + 1
        if start >= len(entry.writes):
            return
        hits = np.flatnonzero(vc[entry.processes[start:]] >= entry.seqs[start:])
        if not hits.size:
            return
        witness = entry.writes[start + int(hits[-1])]
        violation = Violation("read", index, key, source, witness, effective)
        if source is None:
            violation.deletion_in_past = any(self._in_past(vc, entry.writes[d]) for d in entry.delete_positions)
        if before is not None and not self._in_past(before, witness):
            for other in self.predecessors[index]:
                if other != source and other != self.po_pred[index] and other in snapshots and self._in_past(
                    snapshots[other], witness
                ):
                    violation.fractured_via = other
                    break
        self._classification_state.classify_read(self, violation)
        self.violations.append(violation)

    def _null_read_position(self, index: int, entry: _KeyWrites) -> int:
        """The highest arbitration position a null read may have read: the newest deletion it could
        have seen (not itself, not a later operation of its own session), or -1 (initial state)."""
        p, seq = self.process_of[index], self.seq[index]
        for position in reversed(entry.delete_positions):
            writer = entry.writes[position]
            if writer == index:
                continue
            if self.process_of[writer] == p and self.seq[writer] > seq:
                continue
            return position
        return -1

    def _in_past(self, vc: IntArray, index: int) -> bool:
        seq = self.seq[index]
        return seq > 0 and int(vc[self.process_of[index]]) >= seq

    def _check_write(self, index: int, vc: IntArray) -> None:
        op = self.ops[index]
        assert op.key is not None
        entry = self.keys[op.key]
        start = self.position[index] + 1
        if start >= len(entry.writes):
            return
        hits = np.flatnonzero(vc[entry.processes[start:]] >= entry.seqs[start:])
        if not hits.size:
            return
        witness = entry.writes[start + int(hits[-1])]
        violation = Violation("write", index, op.key, None, witness, self.position[index])
        self._classification_state.classify_write(self, violation)
        self.violations.append(violation)

    def _report_cycles(self, topo: list[int], in_graph: list[bool]) -> None:
        remaining = [i for i in range(len(self.ops)) if in_graph[i] and topo[i] < 0]
        blocked = set(remaining)
        reported: set[int] = set()
        for start in remaining:
            if start in reported or len(reported) > 10_000:
                continue
            cycle = self._find_cycle(start, blocked)
            if cycle is None:
                continue
            reported.update(cycle)
            names = " -> ".join(f"op {self.ops[i].id}" for i in cycle)
            self.structural.append(
                Anomaly(
                    "CyclicCO",
                    CHECKER,
                    f"causal order has a cycle: {names} -> op {self.ops[cycle[0]].id} (each operation session-"
                    "precedes or is read by the next); "
                    + "; ".join(self.ops[i].describe() for i in cycle[:6]),
                    tuple(self.ops[i].id for i in cycle),
                )
            )
            if len([a for a in self.structural if a.name == "CyclicCO"]) >= 20:
                break

    def _find_cycle(self, start: int, blocked: set[int]) -> list[int] | None:
        """A cycle through predecessors among the blocked operations reachable from ``start``."""
        path: list[int] = []
        on_path: dict[int, int] = {}
        node = start
        visited: set[int] = set()
        while True:
            if node in on_path:
                cycle = path[on_path[node]:]
                cycle.reverse()
                return cycle
            if node in visited:
                return None
            visited.add(node)
            on_path[node] = len(path)
            path.append(node)
            nxt = next((p for p in self.predecessors[node] if p in blocked), None)
            if nxt is None:
                return None
            node = nxt


class _SessionState:
    """Per-session summaries for naming a violation after the session guarantee it breaks.

    Maintained during the sweep in O(1) per operation: the newest arbitration position a session
    wrote (``own``) and read (``read``) per key, and for every other session the latest of its writes
    the session read from (``seen``). Queries about other sessions' writes and reads before a given
    point use per-(session, key) prefix maxima, built on the first violation.
    """

    def __init__(self) -> None:
        self.own: dict[tuple[int, str], tuple[int, int]] = {}  # (p, key) -> (position, op)
        self.read: dict[tuple[int, str], tuple[int, int]] = {}
        self.seen: dict[int, dict[int, int]] = {}  # p -> {q: seq of q's latest write p read}
        self._writes_by: dict[tuple[int, str], tuple[list[int], list[tuple[int, int]]]] | None = None
        self._reads_by: dict[tuple[int, str], tuple[list[int], list[tuple[int, int]]]] | None = None
        self.remote_classified = 0

    def saw(self, p: int, q: int, seq: int) -> None:
        seen = self.seen.setdefault(p, {})
        if seen.get(q, 0) < seq:
            seen[q] = seq

    def after(self, sweep: _Sweep, index: int) -> None:
        p = sweep.process_of[index]
        position = sweep.position[index]
        op = sweep.ops[index]
        if position >= 0 and op.key is not None:
            current = self.own.get((p, op.key))
            if current is None or current[0] < position:
                self.own[(p, op.key)] = (position, index)
        for key, source in sweep.reads[index]:
            if source is None or sweep.position[source] < 0:
                continue
            current = self.read.get((p, key))
            if current is None or current[0] < sweep.position[source]:
                self.read[(p, key)] = (sweep.position[source], source)

    def _build(self, sweep: _Sweep) -> None:
        writes: dict[tuple[int, str], list[tuple[int, int, int]]] = {}
        reads: dict[tuple[int, str], list[tuple[int, int, int]]] = {}
        for index, op in enumerate(sweep.ops):
            if not op.ok:
                continue
            p, seq = sweep.process_of[index], sweep.seq[index]
            if sweep.position[index] >= 0 and op.key is not None:
                writes.setdefault((p, op.key), []).append((seq, sweep.position[index], index))
            for key, source in sweep.reads[index]:
                if source is not None and sweep.position[source] >= 0:
                    reads.setdefault((p, key), []).append((seq, sweep.position[source], source))
        self._writes_by = {k: _prefix_max(v) for k, v in writes.items()}
        self._reads_by = {k: _prefix_max(v) for k, v in reads.items()}

    @staticmethod
    def _best(table: dict[tuple[int, str], tuple[list[int], list[tuple[int, int]]]], q: int, key: str,
              seq_limit: int) -> tuple[int, int]:
        entry = table.get((q, key))
        if entry is None:
            return (-1, -1)
        seqs, best = entry
        count = bisect_right(seqs, seq_limit)
        return best[count - 1] if count else (-1, -1)

    def classify_read(self, sweep: _Sweep, violation: Violation) -> None:
        index = violation.op
        p = sweep.process_of[index]
        key = violation.key
        threshold = violation.effective_position
        own = self.own.get((p, key))
        if own is not None and own[0] > threshold:
            violation.session, violation.session_via = "ReadYourWrites", own[1]
            return
        read = self.read.get((p, key))
        if read is not None and read[0] > threshold:
            violation.session, violation.session_via = "MonotonicReads", read[1]
            return
        self._classify_remote(sweep, violation, p, key, threshold)

    def classify_write(self, sweep: _Sweep, violation: Violation) -> None:
        index = violation.op
        p = sweep.process_of[index]
        key = violation.key
        threshold = violation.effective_position
        own = self.own.get((p, key))
        if own is not None and own[0] > threshold:
            violation.session, violation.session_via = "MonotonicWrites", own[1]
            return
        read = self.read.get((p, key))
        if read is not None and read[0] > threshold:
            violation.session, violation.session_via = "WritesFollowReads", read[1]

    def _classify_remote(self, sweep: _Sweep, violation: Violation, p: int, key: str, threshold: int) -> None:
        """One read-from hop: a session whose write the violating session read had written (monotonic writes)
        or read (writes follow reads) a newer version before that write. O(sessions seen): done for
        the first ``REMOTE_CLASSIFICATIONS`` violations only (a broken store produces thousands)."""
        self.remote_classified += 1
        if self.remote_classified > REMOTE_CLASSIFICATIONS:
            return
        if self._writes_by is None or self._reads_by is None:
            self._build(sweep)
        assert self._writes_by is not None and self._reads_by is not None
        for q, seq in self.seen.get(p, {}).items():
            if q == p:
                continue
            position, write = self._best(self._writes_by, q, key, seq)
            if position > threshold:
                violation.session, violation.session_via = "MonotonicWrites", write
                return
            position, source = self._best(self._reads_by, q, key, seq - 1)
            if position > threshold:
                violation.session, violation.session_via = "WritesFollowReads", source
                return


def _prefix_max(entries: list[tuple[int, int, int]]) -> tuple[list[int], list[tuple[int, int]]]:
    entries.sort()
    seqs: list[int] = []
    best: list[tuple[int, int]] = []
    current = (-1, -1)
    for seq, position, index in entries:
        if position > current[0]:
            current = (position, index)
        seqs.append(seq)
        best.append(current)
    return seqs, best


# ---------------------------------------------------------------------- naming and explaining


def causal_name(analysis: CausalAnalysis, violation: Violation, detailed: bool) -> tuple[str, str]:
    """The Bouajjani et al. pattern of a violation and a sentence explaining it."""
    ops = analysis.ops
    op = ops[violation.op]
    witness = ops[violation.witness]
    path_text = ""
    if detailed:
        path = analysis.path(violation.witness, violation.op)
        if path is not None:
            path_text = f" Causal path: {analysis.describe_path(path)}."
    if violation.kind == "write":
        return (
            "CyclicCF",
            f"{op.describe()} is arbitrated (timestamp, DC) before {witness.describe()}, yet that write is in its "
            f"causal past: arbitration contradicts causality, replicas that apply last-writer-wins keep the "
            f"older value.{path_text}",
        )
    if violation.source is None:
        if violation.deletion_in_past:
            name, read = "WriteCORead", "a deletion that it overwrote"
        else:
            name, read = "WriteCOInitRead", "the initial state"
        could = "no deletion of the key that is arbitrated after it exists"
        return (
            name,
            f"{op.describe()} read nothing for {violation.key}, but {witness.describe()} is in its causal past and "
            f"{could}: the read can only have seen {read}.{path_text}",
        )
    source = ops[violation.source]
    if analysis.path(violation.source, violation.witness) is not None:
        return (
            "WriteCORead",
            f"{op.describe()} read {violation.key} from {source.describe()}, which causally precedes "
            f"{witness.describe()}, which causally precedes the read: it returned an overwritten value.{path_text}",
        )
    return (
        "CyclicCF",
        f"{op.describe()} read {violation.key} from {source.describe()}, but {witness.describe()}, arbitrated after "
        f"it, is in the read's causal past: conflict order contradicts last-writer-wins.{path_text}",
    )


def check_causal(history: History) -> list[Anomaly]:
    """Bouajjani et al. bad patterns under LWW arbitration (see the module docstring)."""
    analysis = analyse(history)
    anomalies = [a for a in analysis.structural]
    for number, violation in enumerate(analysis.violations):
        name, explanation = causal_name(analysis, violation, detailed=number < DETAILED_VIOLATIONS)
        if violation.fractured_via is not None:
            explanation += " (a fractured snapshot read)"
        involved = [violation.op, violation.witness] + ([violation.source] if violation.source is not None else [])
        anomalies.append(
            Anomaly(name, CHECKER, explanation, tuple(analysis.ops[i].id for i in involved), violation.key)
        )
    return anomalies


def check_snapshots(history: History) -> list[Anomaly]:
    """RO-TX and SCAN as atomic snapshots: no fractured reads, well-formed scan results."""
    analysis = analyse(history)
    anomalies = list(analysis.scan_problems)
    ops = analysis.ops
    for violation in analysis.violations:
        if violation.fractured_via is None:
            continue
        op, witness, via = ops[violation.op], ops[violation.witness], ops[violation.fractured_via]
        got = "nothing" if violation.source is None else f"the value of {ops[violation.source].describe()}"
        anomalies.append(
            Anomaly(
                "FracturedRead",
                "snapshot",
                f"{op.describe()} returned {via.describe()}, whose causal past contains {witness.describe()}, "
                f"but for {violation.key} the snapshot returned {got}: not a causally consistent snapshot",
                (op.id, via.id, witness.id),
                violation.key,
            )
        )
    return anomalies


SESSION_TEXT = {
    "ReadYourWrites": "its own session wrote",
    "MonotonicReads": "its own session already read",
    "MonotonicWrites": "a session it read from had written before the value it read",
    "WritesFollowReads": "a session it read from had read before writing the value it read",
}


def check_sessions(history: History) -> list[Anomaly]:
    """Session guarantees (Terry et al. 1994) under LWW: every violation whose causal path has the
    shape of one guarantee (own write; own earlier read; one read-from hop then the writer's session
    order over its writes or its reads)."""
    analysis = analyse(history)
    anomalies: list[Anomaly] = []
    ops = analysis.ops
    for violation in analysis.violations:
        if violation.session is None or violation.session_via is None:
            continue
        op, witness, via = ops[violation.op], ops[violation.witness], ops[violation.session_via]
        if violation.kind == "write":
            earlier = "wrote" if violation.session == "MonotonicWrites" else "read"
            text = f"{op.describe()} was arbitrated before {via.describe()} that its session {earlier} earlier"
        else:
            got = "nothing" if violation.source is None else f"{ops[violation.source].describe()}"
            text = (
                f"{op.describe()} read {violation.key} from {got}, older (by last-writer-wins) than "
                f"{via.describe()}, which {SESSION_TEXT[violation.session]}"
            )
        involved = (op.id, via.id) if via.id == witness.id else (op.id, via.id, witness.id)
        anomalies.append(Anomaly(violation.session, "session", text, involved, violation.key))
    return anomalies
