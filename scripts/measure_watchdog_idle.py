"""Measure what the event-loop watchdog costs an idle server (``okapikv.server.watchdog``).

Starts two durable one-server clusters side by side, one with the watchdog (``--loop-stall-ms 50``,
the default) and one without (``--loop-stall-ms 0``), leaves them idle past ``idle_after_ms`` and
reads each server's CPU time from /proc over ``--seconds``, ``--rounds`` times, printing cores used.
docs/operations.md quotes the figures.

    python scripts/measure_watchdog_idle.py [--seconds 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from okapikv.cluster.config import local_cluster
from okapikv.cluster.health import wait_until_serving
from okapikv.cluster.ports import free_port_block

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    processes: dict[str, subprocess.Popen[bytes]] = {}
    with tempfile.TemporaryDirectory() as directory:
        try:
            addresses = []
            for name, stall_ms in (("watchdog", "50"), ("none", "0")):
                config = local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=free_port_block(1),
                                       cluster_id=f"watchdog-{name}")
                path = config.dump(Path(directory) / f"{name}.toml")
                processes[name] = subprocess.Popen(
                    [sys.executable, "-m", "okapikv.cli", "server", "--config", str(path), "--dc", "solo",
                     "--partition", "0", "--data-dir", str(Path(directory) / name), "--loop-stall-ms", stall_ms],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                addresses.append(config.servers[0].address)
            assert not wait_until_serving(addresses, 60.0), "the servers did not start"
            time.sleep(5.0)  # past idle_after_ms: idle pacing on
            for round_number in range(args.rounds):
                before = {name: cpu_seconds(process.pid) for name, process in processes.items()}
                time.sleep(args.seconds)
                used = {name: (cpu_seconds(process.pid) - before[name]) / args.seconds
                        for name, process in processes.items()}
                figures = ", ".join(f"{name} {core:.4f} core" for name, core in used.items())
                print(f"round {round_number + 1}: {figures} (load average {os.getloadavg()[0]:.1f})", flush=True)
        finally:
            for process in processes.values():
                process.terminate()
            for process in processes.values():
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
