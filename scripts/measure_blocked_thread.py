"""What a blocked request costs a server's CPU: a thread that polls (the thread-per-request servers
of the paper's lineage) against a parked future (okapikv's servers).

    python scripts/measure_blocked_thread.py [--threads N] [--poll-ms P] [--seconds S]

Three figures, each the CPU time the measured thing used (``time.thread_time`` in the blocked
threads, ``time.process_time`` for the event loop), on this machine:

- **a polling thread**: N threads each blocked in a sleep loop of P ms (the research group's C++
  store POCC sleeps 0.5 ms between checks of a RO-TX's stable time, ``GetSpinTime``): CPU per wake;
- **a thread woken by a broadcast**: N threads waiting on one condition, notified every 5 ms (a
  stable-time advance): CPU per wake of each thread;
- **a parked future**: N asyncio futures parked, then every one resolved: CPU per park and resume,
  and the event loop's CPU while they wait.

The simulator's ``thread`` blocking model charges a blocked request ``wake_us`` of CPU every
``poll_ms`` (``okapikv.sim.cost``); docs/simulated.md ("The cost of a blocked request") gives
these figures and the profiles' values taken from them. Each figure runs S seconds (default 1).
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections.abc import Callable


def _per_wake(threads: int, blocked: Callable[[], int], drive: Callable[[], None]) -> float:
    """CPU microseconds per wake of ``threads`` threads each running ``blocked`` (which returns how
    many times it woke) while ``drive`` runs and then stops them."""
    spent: list[tuple[float, int]] = []
    lock = threading.Lock()

    def body() -> None:
        start = time.thread_time()
        wakes = blocked()
        with lock:
            spent.append((time.thread_time() - start, wakes))

    workers = [threading.Thread(target=body) for _ in range(threads)]
    for worker in workers:
        worker.start()
    drive()
    for worker in workers:
        worker.join(timeout=10)
    return 1e6 * sum(cpu for cpu, _ in spent) / max(1, sum(wakes for _, wakes in spent))


def polling(threads: int, poll_ms: float, seconds: float) -> float:
    """CPU microseconds per wake of ``threads`` threads sleeping ``poll_ms`` between checks."""
    stop = threading.Event()

    def blocked() -> int:
        count = 0
        while not stop.is_set():
            time.sleep(poll_ms / 1000)
            count += 1
        return count

    def drive() -> None:
        time.sleep(seconds)
        stop.set()

    return _per_wake(threads, blocked, drive)


def broadcast(threads: int, seconds: float, every_ms: float = 5.0) -> float:
    """CPU microseconds per wake of ``threads`` threads woken together every ``every_ms``."""
    condition = threading.Condition()
    state = {"round": 0, "stop": False}

    def blocked() -> int:
        count, seen = 0, 0
        with condition:
            while not state["stop"]:
                condition.wait(timeout=1.0)
                if state["round"] != seen:
                    seen = state["round"]
                    count += 1
        return count

    def drive() -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(every_ms / 1000)
            with condition:
                state["round"] += 1
                condition.notify_all()
        with condition:
            state["stop"] = True
            condition.notify_all()

    return _per_wake(threads, blocked, drive)


async def _parked(count: int, seconds: float) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    start = time.process_time()
    futures = [loop.create_future() for _ in range(count)]
    waiters = [asyncio.ensure_future(future) for future in futures]
    await asyncio.sleep(0)
    parked_at = time.process_time()
    await asyncio.sleep(seconds)
    idle = time.process_time() - parked_at
    resumed_at = time.process_time()
    for future in futures:
        future.set_result(None)
    await asyncio.gather(*waiters)
    total = (parked_at - start) + (time.process_time() - resumed_at)
    return 1e6 * total / count, 1e6 * idle / seconds


def parked(count: int, seconds: float) -> tuple[float, float]:
    """(CPU microseconds per park and resume, the loop's CPU microseconds per second while parked)."""
    return asyncio.run(_parked(count, seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=64, help="blocked requests at once (default 64)")
    parser.add_argument("--poll-ms", type=float, default=0.5, help="a polling thread's sleep (default 0.5)")
    parser.add_argument("--seconds", type=float, default=1.0, help="each figure's duration (default 1)")
    args = parser.parse_args()
    if not 1 <= args.threads <= 4096 or not 0 < args.seconds <= 30 or not 0 < args.poll_ms <= 1000:
        parser.error("--threads 1..4096, --seconds (0, 30], --poll-ms (0, 1000]")
    per_wake = polling(args.threads, args.poll_ms, args.seconds)
    print(f"a polling thread ({args.threads} blocked, a check every {args.poll_ms:g} ms): "
          f"{per_wake:.1f} us of CPU per wake")
    print(f"a thread woken by a broadcast ({args.threads} blocked, woken every 5 ms): "
          f"{broadcast(args.threads, args.seconds):.1f} us of CPU per wake")
    resume, idle = parked(args.threads, args.seconds)
    print(f"a parked future ({args.threads} parked): {resume:.1f} us of CPU per park and resume; "
          f"{idle:.0f} us of CPU per second while they wait")


if __name__ == "__main__":
    main()
