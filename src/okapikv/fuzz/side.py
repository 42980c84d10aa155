"""``okapi fuzz --counters-ttls``: counters and expiring keys beside the course mix, judged apart.

With the flag, one operation in ten is an INCR of one of ``COUNTERS`` counters every client shares
(``<prefix>~counter<i>``: concurrent increments from every DC) and one in ten a PUT of the client's
own expiring key (``<prefix>~expiring<c>``) living ``TTL_MS``, sent as the ``okapi client --counters``
commands INCR and PUTEX. They stay out of the history (its checkers judge the course keys, which
these never touch) and are checked after the run (``SideLedger.check``), in every DC:

- every counter reads the number of its acknowledged increments (an INCR whose outcome is unknown
  may or may not count: the value must lie between the two), within ``SETTLE_S``: none lost, none
  counted twice (docs/protocol.md, "Counters");
- every expiring key reads as absent once ``EXPIRY_MARGIN_S`` has passed after the last reply of
  its PUTs (its server wrote the expiry before replying, and the local cluster's servers share one
  clock; docs/protocol.md, "Expiry").
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Protocol

from okapikv.fuzz.plan import TTL_MS, Command

#: beyond the last expiring PUT's reply plus its time to live, before every DC must read it absent
EXPIRY_MARGIN_S = 1.0
#: how long a counter may take to reach its sum in every DC after the run
SETTLE_S = 15.0


class Exchanger(Protocol):
    name: str

    def side(self, command: Command) -> list[str] | None: ...


class SideLedger:
    """What the side operations were answered; shared by the clients' threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acked: Counter[str] = Counter()
        self.unknown: Counter[str] = Counter()
        self.expiring: dict[str, float] = {}  # key -> monotonic time by which it must have expired
        self.problems: list[str] = []

    def answered(self, client: str, command: Command, lines: list[str]) -> None:
        key = command.key
        assert key is not None
        with self._lock:
            if command.f == "putex":
                self.expiring[key] = time.monotonic() + TTL_MS / 1000
                return
            if lines[0].startswith("ERROR "):
                if not lines[0].startswith("ERROR invalid argument"):
                    self.unknown[key] += 1
                return
            if len(lines[0].split(" ")) != 3 or not lines[0].startswith(f"INCR {key} "):
                self.problems.append(f"{client}: expected 'INCR {key} <n>', got {lines[0]!r}")
                return
            self.acked[key] += 1

    def check(self, readers: Sequence[Exchanger], counter_keys: Sequence[str]) -> list[str]:
        """Read every counter and expiring key in every reader's DC (module docstring)."""
        problems = list(self.problems)
        deadline = time.monotonic() + SETTLE_S
        for key in counter_keys:
            low, high = self.acked[key], self.acked[key] + self.unknown[key]
            for reader in readers:
                while True:
                    value = _read(reader, key)
                    count = 0 if value is None else int(value) if value.lstrip("-").isdigit() else None
                    if count is not None and low <= count <= high:
                        break
                    if time.monotonic() >= deadline:
                        problems.append(f"counter {key} reads {value} in {reader.name}'s DC, its acknowledged "
                                        f"increments number {low}" + (f" to {high}" if high > low else ""))
                        break
                    time.sleep(0.1)
        if self.expiring:
            time.sleep(max(0.0, max(self.expiring.values()) + EXPIRY_MARGIN_S - time.monotonic()))
        for key in sorted(self.expiring):
            for reader in readers:
                value = _read(reader, key)
                if value is not None:
                    problems.append(f"expiring key {key} still reads {value} in {reader.name}'s DC after its "
                                    f"time to live and {EXPIRY_MARGIN_S:g} s more")
        return problems


def _read(reader: Exchanger, key: str) -> str | None:
    lines = reader.side(Command("get", f"GET {key}", key=key))
    if lines is None or not lines[0].startswith(f"GET {key} "):
        return "<no answer>" if lines is None else lines[0]
    value = lines[0][len(f"GET {key} "):]
    return None if value == "null" else value
