"""The fuzzer's history: every operation in the shared history format (``okapikv.check.history``),
an invoke event taken before the command is written and a completion taken after its last result
line is read, both on the monotonic clock. That interval contains the operation's real effect, which
is what the linearizability checker needs."""

from __future__ import annotations

import threading
import time
from typing import Any

from okapikv.check.history import HistoryRecorder, Operation
from okapikv.fuzz.plan import Command


class Recorder:
    """A thread-safe ``HistoryRecorder`` that reads the monotonic clock itself: an invoke's time is
    taken before its command is sent and a completion's after its answer is read, so the recorded
    interval always contains the operation's real effect."""

    def __init__(self, meta: dict[str, Any]) -> None:
        self.history = HistoryRecorder(meta)
        self._lock = threading.Lock()
        #: operations of the run (not final reads) completed so far
        self.completed = 0

    @staticmethod
    def now_us() -> int:
        return time.monotonic_ns() // 1000

    def invoke(self, process: str, dc: int, command: Command, final: bool) -> Operation:
        with self._lock:
            extra: dict[str, Any] = {"final": True} if final else {}
            return self.history.invoke(process, dc, command.f, self.now_us(), **command.request(), **extra)

    def complete(self, op: Operation, status: str, **result: Any) -> None:
        with self._lock:
            self.history.complete(op, status, self.now_us(), **result)
            if not op.final:
                self.completed += 1

