"""``okapi bench --keep-cpus-busy``: keep idle CPUs from halting while a benchmark runs.

A harness detail, for virtual machines: ``harness.harness.open_bench`` holds the spinners open for
the whole invocation when the flag is given.

Why: on a virtual machine an idle vCPU halts, and waking it costs a hypervisor exit. A closed-loop
benchmark on loopback is a chain of wakeups (client -> server -> client), so with CPUs halting
between messages it measures the hypervisor's wakeup latency as much as the store: on this
project's 2-core VM, YCSB-A with 64 sessions ran at 13-16k ops/s with the CPUs otherwise idle and
at 22-25k with them kept busy, the store's CPU per operation unchanged. Bare metal wakes in
microseconds and sees no such gap.

How: one spinning process per CPU at the lowest priority (nice 19). The scheduler gives it only
time nobody else wants (a nice-19 task weighs 15 against 1024 for a normal one: about 1.5% of a CPU
when competing), so it costs the measured processes almost nothing. Reported in results.json
(``config.keep_cpus_busy``) so a figure always says how it was taken.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

SPIN = "import os\nos.nice(19)\nwhile True:\n    pass\n"


@contextlib.contextmanager
def cpus_kept_busy(enabled: bool) -> Iterator[None]:
    """While open, one nice-19 spinner per CPU (nothing when ``enabled`` is False)."""
    if not enabled:
        yield
        return
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL)
                for _ in range(os.cpu_count() or 1)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()
