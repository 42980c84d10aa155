"""No false alarms: histories of a correct sequential store (one replica, operations applied one at a
time, every write visible at once) pass every checker, whatever the interleaving of sessions."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from okapikv.check.history import History, Operation
from okapikv.check.report import check_history

KEYS = ["a", "b", "c", "d"]

step = st.tuples(
    st.integers(0, 3),  # process
    st.sampled_from(["get", "put", "swap", "delete", "rotx", "scan"]),
    st.sampled_from(KEYS),
    st.sampled_from(KEYS),
)


def _run(steps: list[tuple[int, str, str, str]]) -> History:
    state: dict[str, str] = {}
    operations: list[Operation] = []
    for number, (process, f, key, other) in enumerate(steps):
        time = 10 * number
        op = Operation(number, f"p{process}", 0, f, time, status="ok", complete_us=time + 5)
        if f == "get":
            op.key, op.read = key, state.get(key)
        elif f in ("put", "swap"):
            op.key, op.value, op.timestamp = key, f"v{number}", number + 1
            if f == "put":
                op.found = key in state
            else:
                op.old = state.get(key)
            state[key] = op.value
        elif f == "delete":
            op.key, op.found, op.timestamp = key, key in state, number + 1
            state.pop(key, None)
        elif f == "rotx":
            op.keys = tuple(dict.fromkeys([key, other]))
            op.values = tuple(state.get(k) for k in op.keys)
        else:
            low, high = min(key, other), max(key, other)
            op.start, op.end = low, high
            op.items = tuple((k, state[k]) for k in sorted(state) if low <= k <= high)
        operations.append(op)
    for offset, key in enumerate(KEYS):  # the convergence reads at quiescence (one replica: one DC)
        if any(op.key == key and op.is_write for op in operations):
            time = 10 * (len(steps) + offset) + 100_000
            operations.append(Operation(len(operations), "final-0", 0, "get", time, key=key, final=True,
                                        status="ok", complete_us=time + 5, read=state.get(key)))
    return History(operations)


@settings(max_examples=150, deadline=None)
@given(st.lists(step, max_size=60))
def test_sequential_store_histories_pass(steps: list[tuple[int, str, str, str]]) -> None:
    report = check_history(_run(steps))
    assert report.ok, [str(a) for a in report.anomalies]


@settings(max_examples=100, deadline=None)
@given(st.lists(step, min_size=5, max_size=40), st.integers(0, 1000))
def test_a_stale_get_after_the_own_sessions_write_is_caught(steps: list[tuple[int, str, str, str]], pick: int) -> None:
    history = _run(steps + [(0, "put", "a", "a"), (0, "get", "a", "a")])
    last_get = [op for op in history.operations if op.f == "get" and not op.final][-1]
    older = [op for op in history.operations if op.f in ("put", "swap") and op.key == "a"][:-1]
    last_get.read = older[pick % len(older)].value if older else None
    names = {a.name for a in check_history(history).anomalies}
    assert {"ReadYourWrites", "NotLinearizable"} <= names
