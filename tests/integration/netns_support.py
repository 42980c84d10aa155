"""Hosts made of Linux network namespaces, for tests that need real separate hosts and a real network
between them (``test_multihost``, ``test_silent_cut``).

Each host is a network namespace with its own interface and address (``SUBNET``.1, .2, ... on a
/24), joined by a veth pair to a bridge in one more "switch" namespace. Nothing is added to the test
machine's own network namespace, and nothing outside the namespaces made here is ever addressed.
Processes are started inside a host with ``Hosts.exec`` (``ip netns exec``); clients run there too
(``netns_agent.py``, driven over pipes by ``Client``).

``Hosts.cut`` and ``Hosts.heal`` drop (with nftables, no RST, no ICMP) every packet between two
hosts: a silent network cut, as a failed switch or a black-holing firewall makes it.

``namespace_hosts`` skips, saying why, where namespaces cannot be made: not Linux, not root, no
``ip`` command (the iproute2 package), ``ip netns add`` / bridge creation refused (an unprivileged
container), or, with ``need_nft``, no working ``nft`` (scripts/install-test-deps.sh installs it).
The namespaces are deleted whatever happens, and the test fails if any is left over.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import pytest

SUBNET = "10.200.0"
AGENT = Path(__file__).with_name("netns_agent.py")
REPLY_TIMEOUT_S = 90.0
CUT_TABLE = "okapi_cut"


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=30)


def must(*command: str) -> None:
    result = run(*command)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {result.stderr.strip()}")


def skip_reason(*, need_nft: bool = False) -> str | None:
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    if shutil.which("ip") is None:
        return "no `ip` command (install iproute2)"
    if need_nft and shutil.which("nft") is None:
        return "no `nft` command (install nftables: scripts/install-test-deps.sh)"
    probe = f"okv{os.getpid()}-probe"
    added = run("ip", "netns", "add", probe)
    if added.returncode != 0:
        return f"`ip netns add` refused: {added.stderr.strip()}"
    try:
        bridge = run("ip", "-n", probe, "link", "add", "br0", "type", "bridge")
        if bridge.returncode != 0:
            return f"cannot create a bridge in a namespace: {bridge.stderr.strip()}"
        if need_nft:
            table = run("ip", "netns", "exec", probe, "nft", "add", "table", "inet", CUT_TABLE)
            if table.returncode != 0:
                return f"nft cannot add a table in a namespace: {table.stderr.strip()}"
    finally:
        run("ip", "netns", "del", probe)
    return None


@dataclass
class Hosts:
    """The namespaces: one switch, one per host (``namespaces[i]`` has address ``addresses[i]``)."""

    switch: str
    namespaces: list[str]
    addresses: list[str]
    processes: list[subprocess.Popen[str]] = field(default_factory=list)

    def exec(self, index: int, command: list[str], **options: Any) -> subprocess.Popen[str]:
        process = subprocess.Popen(["ip", "netns", "exec", self.namespaces[index], *command], text=True, **options)
        self.processes.append(process)
        return process

    def cut(self, first: int, second: int) -> None:
        """Drop every packet between hosts ``first`` and ``second``, silently, both ways: each drops
        what arrives from the other (its own sends still leave, and vanish)."""
        for here, there in ((first, second), (second, first)):
            namespace = self.namespaces[here]
            must("ip", "netns", "exec", namespace, "nft", "add", "table", "inet", CUT_TABLE)
            must("ip", "netns", "exec", namespace, "nft", "add", "chain", "inet", CUT_TABLE, "input",
                 "{ type filter hook input priority 0 ; policy accept ; }")
            must("ip", "netns", "exec", namespace, "nft", "add", "rule", "inet", CUT_TABLE, "input",
                 "ip", "saddr", self.addresses[there], "drop")

    def heal(self, first: int, second: int) -> None:
        """Undo ``cut``: every cut of either host (a host cut from several is healed at the first)."""
        for index in (first, second):
            namespace = self.namespaces[index]
            if run("ip", "netns", "exec", namespace, "nft", "list", "table", "inet", CUT_TABLE).returncode == 0:
                must("ip", "netns", "exec", namespace, "nft", "delete", "table", "inet", CUT_TABLE)


def _setup(hosts: Hosts) -> None:
    must("ip", "netns", "add", hosts.switch)
    must("ip", "-n", hosts.switch, "link", "add", "br0", "type", "bridge")
    must("ip", "-n", hosts.switch, "link", "set", "br0", "up")
    for index, (namespace, address) in enumerate(zip(hosts.namespaces, hosts.addresses, strict=True)):
        must("ip", "netns", "add", namespace)
        # Both ends are created inside our namespaces: the switch end stays there, the other end
        # moves straight into the host's namespace as eth0.
        must("ip", "-n", hosts.switch, "link", "add", f"port{index}", "type", "veth", "peer", "name", "eth0",
             "netns", namespace)
        must("ip", "-n", hosts.switch, "link", "set", f"port{index}", "master", "br0")
        must("ip", "-n", hosts.switch, "link", "set", f"port{index}", "up")
        must("ip", "-n", namespace, "link", "set", "lo", "up")
        must("ip", "-n", namespace, "address", "add", f"{address}/24", "dev", "eth0")
        must("ip", "-n", namespace, "link", "set", "eth0", "up")


def _teardown(hosts: Hosts) -> None:
    for process in hosts.processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
    for process in hosts.processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for namespace in [*hosts.namespaces, hosts.switch]:
        run("ip", "netns", "del", namespace)


@contextlib.contextmanager
def namespace_hosts(name: str, count: int, *, need_nft: bool = False) -> Iterator[Hosts]:
    """``count`` hosts in namespaces named ``okv<pid><name>-...`` (skips the test if impossible)."""
    reason = skip_reason(need_nft=need_nft)
    if reason is not None:
        pytest.skip(reason)
    prefix = f"okv{os.getpid()}{name}"
    made = Hosts(f"{prefix}-sw", [f"{prefix}-h{i}" for i in range(count)],
                 [f"{SUBNET}.{i + 1}" for i in range(count)])
    try:
        _setup(made)
        yield made
    finally:
        _teardown(made)
    leftover = run("ip", "netns", "list").stdout
    assert prefix not in leftover, leftover


class Client:
    """One agent process in a host's namespace (``netns_agent.py``)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process

    def __call__(self, op: str, **arguments: Any) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"op": op, **arguments}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"the agent exited ({self.process.poll()}) during {op} {arguments}"
        answer = json.loads(line)
        assert answer["ok"], f"{op} {arguments}: {answer['error']}"
        return answer.get("value")

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": "stop"}) + "\n")
        self.process.stdin.close()
        assert self.process.wait(timeout=REPLY_TIMEOUT_S) == 0


def start_agent(hosts: Hosts, index: int, address: str, num_dcs: int, *extra: str) -> Client:
    """An agent in host ``index`` talking to the server at ``address``."""
    return Client(hosts.exec(index, [sys.executable, str(AGENT), "--address", address, "--dcs", str(num_dcs),
                                     *extra], stdin=subprocess.PIPE, stdout=subprocess.PIPE))


@contextlib.contextmanager
def server_logs(directory: Path, names: Sequence[str], tail_chars: int = 3000) -> Iterator[dict[str, TextIO]]:
    """One log file per server (``directory/NAME.log``), by name, closed at the end; when an
    assertion fails inside, the tail of each is printed first, so the cause shows in CI output."""
    logs = {name: (directory / f"{name}.log").open("w") for name in names}
    try:
        yield logs
    except AssertionError:
        for log in logs.values():
            log.flush()
        print("\n".join(f"--- {name}\n{(directory / f'{name}.log').read_text()[-tail_chars:]}" for name in names))
        raise
    finally:
        for log in logs.values():
            log.close()
