"""`okapi up`, `okapi server` and `okapi status` as a user runs them (real processes)."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from integration_support import ClusterFactory, free_port_range

from okapikv.cluster.config import ClusterConfig
from okapikv.cluster.health import is_serving
from okapikv.cluster.launcher import READY_LINE

OKAPI = [sys.executable, "-m", "okapikv.cli"]


def _environment(home: Path) -> dict[str, str]:
    return dict(os.environ, OKAPI_HOME=str(home))


def test_print_config_loads_back(tmp_path: Path) -> None:
    result = subprocess.run(
        [*OKAPI, "up", "--dcs", "oregon,virginia,paris", "--partitions", "3", "--clock-skew-ms", "6",
         "--base-port", "9000", "--print-config"],
        capture_output=True, text=True, timeout=60, env=_environment(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    config = ClusterConfig.from_toml(result.stdout)
    assert config.dcs == ("oregon", "virginia", "paris")
    assert [s.address for s in config.servers] == [f"127.0.0.1:{9000 + i}" for i in range(9)]
    assert [s.clock_skew_ms for s in config.servers] == [0.75 * i for i in range(9)]
    assert config.delay_ms(0, 1) == 35.0 and config.delay_ms(2, 0) == 50.0
    assert "max_clock_offset_ms = 500.0" in result.stdout.splitlines() and config.max_clock_offset_ms == 500.0
    assert not (tmp_path / "cluster.toml").exists()  # printing starts nothing and writes nothing


def test_up_reports_ready_and_stops_every_server_on_sigint(tmp_path: Path) -> None:
    base = free_port_range(2)
    process = subprocess.Popen(
        [*OKAPI, "up", "--dcs", "east,west", "--partitions", "1", "--wan-ms", "2", "--base-port", str(base)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_environment(tmp_path),
    )
    output: list[str] = []
    try:
        assert process.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(process.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + 60
        while READY_LINE not in output and time.monotonic() < deadline and process.poll() is None:
            if selector.select(timeout=1):
                output.append(process.stdout.readline().rstrip("\n"))
        assert READY_LINE in output, "\n".join(output)
        addresses = [f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}"]
        assert all(any(address in line for line in output) for address in addresses)
        assert all(is_serving(address) for address in addresses)
        config = ClusterConfig.load(tmp_path / "cluster.toml")  # where `okapi client`/`status` find it
        assert [s.address for s in config.servers] == addresses

        status = subprocess.run([*OKAPI, "status", "--json"], capture_output=True, text=True, timeout=60,
                                env=_environment(tmp_path))
        assert status.returncode == 0, status.stdout + status.stderr
        document = json.loads(status.stdout)
        assert [s["reachable"] for s in document["servers"]] == [True, True]
        table = subprocess.run([*OKAPI, "status", "--connect", addresses[1]], capture_output=True, text=True,
                               timeout=60)
        assert table.returncode == 0 and "east" in table.stdout and "west" in table.stdout

        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert not any(is_serving(address, timeout_s=0.5) for address in addresses)
        down = subprocess.run([*OKAPI, "status", "--json"], capture_output=True, text=True, timeout=60,
                              env=_environment(tmp_path))
        assert down.returncode == 1
        assert [s["reachable"] for s in json.loads(down.stdout)["servers"]] == [False, False]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_server_with_a_bad_config_exits_2(tmp_path: Path) -> None:
    missing = subprocess.run([*OKAPI, "server", "--config", str(tmp_path / "nope.toml"), "--dc", "a",
                              "--partition", "0"], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "cannot read cluster config" in missing.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('dcs = ["a"]\npartitions = 1\n[[servers]]\ndc = "b"\npartition = 0\naddress = "127.0.0.1:1"\n')
    result = subprocess.run([*OKAPI, "server", "--config", str(bad), "--dc", "a", "--partition", "0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "unknown DC 'b'" in result.stderr


def test_server_refuses_an_address_in_use(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(dcs=("solo",), partitions=1)
    extra = subprocess.run([*OKAPI, "server", "--config", str(cluster.path), "--dc", "solo", "--partition", "0"],
                           capture_output=True, text=True, timeout=60)
    assert extra.returncode == 1 and "cannot listen" in extra.stderr
