"""`okapi up`, `okapi server` and `okapi status` as a user runs them (real processes)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from integration_support import ClusterFactory, free_port_range

from okapikv.cluster.config import ClusterConfig
from okapikv.cluster.health import is_serving, wait_until_serving
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
    base = free_port_range(4)  # two servers and their RESP ports
    launcher = Launcher([*OKAPI, "up", "--dcs", "east,west", "--partitions", "1", "--wan-ms", "2",
                         "--base-port", str(base)], tmp_path)
    process = launcher.process
    try:
        assert launcher.wait_ready(), "\n".join(launcher.lines)
        output = launcher.lines
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


class Launcher:
    """An `okapi up` process and every line it printed (a reader thread: lines written together may
    arrive in one read, which a select() on the pipe would not report again)."""

    def __init__(self, command: list[str], home: Path, workdir: Path | None = None) -> None:
        # A session of its own, as a shell's job: Ctrl-C in a terminal signals the whole group.
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env=_environment(home), cwd=workdir, start_new_session=True)
        self.lines: list[str] = []
        self._arrived = threading.Condition()
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in iter(self.process.stdout.readline, ""):
            with self._arrived:
                self.lines.append(line.rstrip("\n"))
                self._arrived.notify_all()
        with self._arrived:
            self._arrived.notify_all()

    def wait_ready(self, timeout_s: float = 60.0) -> bool:
        """Until the ready line and the line after it (where the config is)."""
        def ready() -> bool:
            return READY_LINE in self.lines[:-1]

        with self._arrived:
            return self._arrived.wait_for(lambda: ready() or not self._reader.is_alive(), timeout=timeout_s) and ready()

    def wait_line(self, text: str, timeout_s: float = 30.0) -> str:
        """The first line holding ``text``, waiting for it up to ``timeout_s``."""
        def found() -> str | None:
            return next((line for line in self.lines if text in line), None)

        with self._arrived:
            self._arrived.wait_for(lambda: found() is not None or not self._reader.is_alive(), timeout=timeout_s)
        line = found()
        assert line is not None, f"no line with {text!r}:\n" + "\n".join(self.lines)
        return line

    def stop(self) -> str:
        """SIGINT to its process group (Ctrl-C in its terminal), wait, and everything it printed."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=10)
        return "\n".join(self.lines)


def _start_up(home: Path, workdir: Path, base: int, *extra: str) -> Launcher:
    """`okapi up` (1 DC x 1 partition, no WAN) in ``workdir``, returned once ready."""
    launcher = Launcher([*OKAPI, "up", "--dcs", "solo", "--partitions", "1", "--wan", "off",
                         "--base-port", str(base), *extra], home, workdir)
    if not launcher.wait_ready():
        raise AssertionError("okapi up did not become ready:\n" + launcher.stop())
    return launcher


def test_a_second_up_never_takes_the_running_clusters_config(tmp_path: Path) -> None:
    """With a cluster running, an `okapi up` on other ports in the same directory
    fails (its data directory is in use) and the default config still describes the live cluster;
    a second cluster that does start (in memory) leaves it alone too and says where its own is."""
    home, workdir = tmp_path / "home", tmp_path / "work"
    workdir.mkdir()
    # each cluster: its server's port and its RESP port
    first_port, second_port, third_port = free_port_range(2), free_port_range(2), free_port_range(2)
    first = _start_up(home, workdir, first_port)
    try:
        failed = subprocess.run([*OKAPI, "up", "--dcs", "solo", "--partitions", "1", "--wan", "off",
                                 "--base-port", str(second_port)], capture_output=True, text=True, timeout=90,
                                env=_environment(home), cwd=workdir)
        assert failed.returncode == 1, failed.stdout + failed.stderr
        assert "in use by another server" in failed.stdout + failed.stderr
        config = ClusterConfig.load(home / "cluster.toml")
        assert [s.address for s in config.servers] == [f"127.0.0.1:{first_port}"]
        status = subprocess.run([*OKAPI, "status"], capture_output=True, text=True, timeout=60,
                                env=_environment(home))
        assert status.returncode == 0 and " up " in status.stdout, status.stdout + status.stderr

        beside = _start_up(home, workdir, third_port, "--in-memory")
        try:
            assert any("describes another running cluster" in line for line in beside.lines), beside.lines
            config = ClusterConfig.load(home / "cluster.toml")
            assert [s.address for s in config.servers] == [f"127.0.0.1:{first_port}"]
        finally:
            beside.stop()
        assert sorted(path.name for path in home.glob("cluster*.toml")) == ["cluster.toml"]
    finally:
        stopped = first.stop()
    assert "stopped 1 server(s)" in stopped, stopped


def test_stopped_counts_only_the_servers_that_were_running(tmp_path: Path) -> None:
    launcher = _start_up(tmp_path, tmp_path, free_port_range(2), "--in-memory", "--restart-budget", "0")
    process = launcher.process
    try:
        server = int(Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()[0])
        os.kill(server, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not any("was killed by signal" in line for line in launcher.lines) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        output = launcher.stop()
    assert "stopped 0 server(s) (1 had already exited)" in output, output


def test_sigterm_stops_up_whenever_it_arrives(tmp_path: Path) -> None:
    """SIGTERM (a supervisor, `kill`) stops `okapi up` and its servers, at whatever point of the
    supervising loop it lands: a handler that took the loop's lock could block forever."""
    for attempt in range(4):
        launcher = _start_up(tmp_path / f"home{attempt}", tmp_path, free_port_range(2), "--in-memory")
        time.sleep(0.05 * attempt)  # land at different points of the loop's 0.25 s wait
        launcher.process.send_signal(signal.SIGTERM)
        try:
            launcher.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            launcher.process.kill()
            raise AssertionError(f"okapi up ignored SIGTERM (attempt {attempt}):\n" + launcher.stop()) from None
        assert "stopped 1 server(s)" in launcher.stop()


def test_server_with_a_bad_config_exits_2(tmp_path: Path) -> None:
    missing = subprocess.run([*OKAPI, "server", "--config", str(tmp_path / "nope.toml"), "--dc", "a",
                              "--partition", "0", "--in-memory"], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "cannot read cluster config" in missing.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('dcs = ["a"]\npartitions = 1\n[[servers]]\ndc = "b"\npartition = 0\naddress = "127.0.0.1:1"\n')
    result = subprocess.run([*OKAPI, "server", "--config", str(bad), "--dc", "a", "--partition", "0", "--in-memory"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "unknown DC 'b'" in result.stderr


def test_server_without_a_data_dir_refuses_to_start(tmp_path: Path) -> None:
    """Durable is the default: no --data-dir and no --in-memory is a mistake, caught before anything
    is read or created."""
    result = subprocess.run([*OKAPI, "server", "--config", str(tmp_path / "cluster.toml"), "--dc", "a",
                             "--partition", "0"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == ["okapi server: pass --data-dir DIR to keep a/0's data (or --in-memory "
                                          "to keep none)"]
    assert list(tmp_path.iterdir()) == []


def test_server_refuses_an_address_in_use(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(dcs=("solo",), partitions=1)
    extra = subprocess.run([*OKAPI, "server", "--config", str(cluster.path), "--dc", "solo", "--partition", "0",
                            "--in-memory"], capture_output=True, text=True, timeout=60)
    assert extra.returncode == 2 and "cannot listen" in extra.stderr


def test_two_simultaneous_ups_leave_exactly_one_cluster(tmp_path: Path) -> None:
    """Two `okapi up` on the same ports started at the same moment: the port locks (a flock each,
    taken in port order before anything is written or started) let exactly one through; the other
    says which launcher holds the ports and exits 1, and every server runs under the winner."""
    base = free_port_range(4)
    command = [*OKAPI, "up", "--dcs", "a,b", "--partitions", "1", "--wan", "off", "--base-port", str(base),
               "--in-memory"]
    launchers = [Launcher(command, tmp_path), Launcher(command, tmp_path)]
    try:
        ends = [launcher.process.wait(timeout=60) if not launcher.wait_ready() else None for launcher in launchers]
        (winner,) = [launcher for launcher, end in zip(launchers, ends, strict=True) if end is None]
        (loser,) = [launcher for launcher, end in zip(launchers, ends, strict=True) if end is not None]
        assert loser.process.returncode == 1
        refusal = "\n".join(loser.lines)
        assert f"belongs to another okapi up (pid {winner.process.pid})" in refusal, refusal
        assert "cluster ready" not in refusal and "Traceback" not in refusal
        children = Path(f"/proc/{winner.process.pid}/task/{winner.process.pid}/children").read_text().split()
        shown = [int(line.rsplit("pid ", 1)[1]) for line in winner.lines if " partition " in line]
        assert sorted(shown) == sorted(map(int, children)) and len(shown) == 2
        status = subprocess.run([*OKAPI, "status", "--json"], capture_output=True, text=True, timeout=60,
                                env=_environment(tmp_path))
        assert sorted(server["pid"] for server in json.loads(status.stdout)["servers"]) == sorted(shown)
        assert "stopped 2 server(s)" in winner.stop()
    finally:
        for launcher in launchers:
            launcher.stop()


def test_a_killed_server_is_restarted_until_its_budget_is_spent(tmp_path: Path) -> None:
    """A server killed with SIGKILL comes back under the launcher with its own command line, at most
    --restart-budget times a minute; then the launcher says so and prints the command that
    restarts it by hand, which works."""
    base = free_port_range(2)
    launcher = _start_up(tmp_path, tmp_path, base, "--in-memory", "--restart-budget", "1")
    address = f"127.0.0.1:{base}"
    by_hand: subprocess.Popen[bytes] | None = None
    try:
        first = int(launcher.wait_line(" partition ").rsplit("pid ", 1)[1])
        os.kill(first, signal.SIGKILL)
        restarted = launcher.wait_line("restarted as pid")
        assert f"(127.0.0.1:{base}, pid {first}) was killed by signal 9" in restarted
        second = int(restarted.split("restarted as pid ")[1].split()[0])
        assert wait_until_serving([address], 60) == []
        status = subprocess.run([*OKAPI, "status", "--json"], capture_output=True, text=True, timeout=60,
                                env=_environment(tmp_path))
        assert json.loads(status.stdout)["servers"][0]["pid"] == second
        os.kill(second, signal.SIGKILL)
        given_up = launcher.wait_line("NOT RESTARTED")
        assert "1 restart(s) in the last 60 s (--restart-budget 1)" in given_up
        command = shlex.split(given_up.split("restart it by hand: ", 1)[1])
        assert command[command.index("--config") + 1] == str(tmp_path / "cluster.toml")
        by_hand = subprocess.Popen(command, stdin=subprocess.DEVNULL, env=_environment(tmp_path))
        assert wait_until_serving([address], 60) == []
    finally:
        launcher.stop()
        if by_hand is not None:
            by_hand.kill()
            by_hand.wait()
