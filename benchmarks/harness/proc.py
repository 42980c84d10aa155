"""What ``/proc`` says about a measured server process: CPU time and resident memory.

Read from ``/proc/<pid>/stat`` and ``/proc/<pid>/status`` (psutil would be one more dependency for
three numbers). The load processes measure their own CPU with ``time.process_time``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from okapikv.bench.engine.errors import BenchError


def _clock_ticks() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        return 100


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process, from ``/proc/<pid>/stat`` (None if unreadable)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            text = handle.read()
    except OSError:
        return None
    # The command name (field 2) is parenthesized and may contain spaces: split after it.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        user_ticks, system_ticks = int(fields[11]), int(fields[12])
    except (IndexError, ValueError):
        return None
    return (user_ticks + system_ticks) / _clock_ticks()


def total_cpu_seconds(pids: Iterable[int]) -> float | None:
    readings = [process_cpu_seconds(pid) for pid in pids]
    known = [reading for reading in readings if reading is not None]
    return sum(known) if known else None


def rss_bytes(pid: int, field: str = "VmRSS") -> int:
    """A process's resident set size (or ``VmHWM``, its peak) from ``/proc/<pid>/status``."""
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise BenchError(f"no {field} in /proc/{pid}/status")
