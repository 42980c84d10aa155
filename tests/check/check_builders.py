"""Hand-made histories for the checker tests: a tiny builder that numbers operations and times them.

Each call appends one completed operation. Times advance by 10 us per operation unless given, so by
default operations are sequential in real time (``at=(invoke, complete)`` makes them overlap).
"""

from __future__ import annotations

from typing import Any

from okapikv.check.history import History, Operation


class Builder:
    def __init__(self) -> None:
        self.operations: list[Operation] = []
        self.time = 0

    def _add(self, process: str, f: str, dc: int, at: tuple[int, int] | None, status: str, **fields: Any) -> Operation:
        if at is None:
            self.time += 10
            at = (self.time, self.time + 5)
        op = Operation(len(self.operations), process, dc, f, at[0], status=status, complete_us=at[1], **fields)
        self.operations.append(op)
        return op

    def put(self, process: str, key: str, value: str, ts: int, *, dc: int = 0, found: bool = False,
            at: tuple[int, int] | None = None, status: str = "ok") -> Operation:
        timestamp = ts if status == "ok" else None
        return self._add(process, "put", dc, at, status, key=key, value=value, found=found, timestamp=timestamp)

    def swap(self, process: str, key: str, value: str, old: str | None, ts: int, *, dc: int = 0,
             at: tuple[int, int] | None = None) -> Operation:
        return self._add(process, "swap", dc, at, "ok", key=key, value=value, old=old, timestamp=ts)

    def delete(self, process: str, key: str, ts: int, *, dc: int = 0, found: bool = True,
               at: tuple[int, int] | None = None) -> Operation:
        return self._add(process, "delete", dc, at, "ok", key=key, found=found, timestamp=ts)

    def get(self, process: str, key: str, value: str | None, *, dc: int = 0, at: tuple[int, int] | None = None,
            final: bool = False) -> Operation:
        return self._add(process, "get", dc, at, "ok", key=key, read=value, final=final)

    def rotx(self, process: str, reads: dict[str, str | None], *, dc: int = 0) -> Operation:
        return self._add(process, "rotx", dc, None, "ok", keys=tuple(reads), values=tuple(reads.values()))

    def scan(self, process: str, start: str, end: str, items: list[tuple[str, str]], *, dc: int = 0,
             limit: int | None = None) -> Operation:
        return self._add(process, "scan", dc, None, "ok", start=start, end=end, limit=limit, items=tuple(items))

    def info_put(self, process: str, key: str, value: str, *, dc: int = 0,
                 at: tuple[int, int] | None = None) -> Operation:
        op = self._add(process, "put", dc, at, "info", key=key, value=value)
        op.complete_us = None
        return op

    def history(self) -> History:
        return History(list(self.operations), {"source": "test"})


def names(anomalies: list[Any]) -> list[str]:
    return sorted(anomaly.name for anomaly in anomalies)
