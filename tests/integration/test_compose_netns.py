"""The compose project `okapi deploy compose` writes, run for real without a container runtime.

Each service of the generated compose.yaml becomes a network namespace (``netns_support``: its
own interface and address behind a bridge, a stand-in for its container) running the service's
own command with the service's own environment; the compose volumes and bind mounts are mapped to
folders of the test (a value of the environment naming a mount target is rewritten to the
mount's source, as the mount would make it). The project is generated with ``--tls``: every link,
probe and client speaks mutual TLS with the one certificate it mounts. Service names resolve through a hosts file per
namespace (``/etc/netns/NS/hosts``, which ``ip netns exec`` mounts over ``/etc/hosts``), as
compose's DNS resolves them, so the servers dial each other by the names the generated
cluster.toml gives them and listen on their ``bind`` address. Each service's HEALTHCHECK
(`okapi health`) is run in its namespace until it passes.

Then, with a client in each DC's namespace: causality across DCs (a write that depends on another
is never visible without it), convergence (concurrent writes of one key end equal everywhere), and
one DC cut off from the others silently (nftables drops, no RST) and healed: during the cut both
sides serve their own writes and nothing crosses; after the heal every write reaches every DC and a
key written on both sides converges.

Skips, saying why, where namespaces or nftables are unavailable (``netns_support``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from netns_support import Hosts, namespace_hosts, server_logs, start_agent
from tls_support import CertificateAuthority

yaml = pytest.importorskip("yaml", reason="PyYAML reads the generated compose file (the test extra)")

DCS = ("east", "west", "north")
HEALTHY_TIMEOUT_S = 60.0
CONVERGE_TIMEOUT_S = 30.0
#: `okapi deploy compose --tls`: one certificate, naming this, for every server (mutual TLS).
SERVER_NAME = "okapi.internal"
#: ``ip netns exec NS`` bind-mounts each file of NETNS_ETC/NS over the same name in /etc.
NETNS_ETC = Path("/etc/netns")


def _okapi(command: list[str]) -> list[str]:
    """A service's command, with `okapi` run from this interpreter (this tree's code)."""
    assert command[0] == "okapi", command
    return [sys.executable, "-m", "okapikv.cli", *command[1:]]


def _as_mounted(value: str, mounts: dict[str, Path]) -> str:
    """A path of the container as the mounts make it on this machine."""
    for target, source in mounts.items():
        if value == target or value.startswith(target + "/"):
            return str(source) + value[len(target):]
    return value


def _mounts(service: dict[str, Any], project: Path, volumes: Path) -> dict[str, Path]:
    """Mount target in the container -> the folder or file of the test standing in for it. A mounted
    config file that names paths of other mounts (the TLS files) is read through a copy naming
    their stand-ins, since the servers here share one file system."""
    mounts = {}
    for entry in service["volumes"]:
        source, target = entry.split(":")[:2]
        if source.startswith("./"):
            mounts[target] = project / source[2:]
        else:  # a named volume: a folder of its own
            mounts[target] = volumes / source
            mounts[target].mkdir(parents=True, exist_ok=True)
    for target, source in list(mounts.items()):
        if source.suffix == ".toml":
            text = source.read_text()
            for other, stand_in in mounts.items():
                if other != target:
                    text = text.replace(f'"{other}/', f'"{stand_in}/')
            mounts[target] = volumes / f"mounted-{source.name}"
            mounts[target].write_text(text)
    return mounts


def _environment(service: dict[str, Any], mounts: dict[str, Path]) -> dict[str, str]:
    environment = dict(os.environ)
    environment.update({name: _as_mounted(value, mounts) for name, value in service["environment"].items()})
    return environment


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    with namespace_hosts("cp", len(DCS), need_nft=True) as made:
        try:
            yield made
        finally:
            for namespace in made.namespaces:
                shutil.rmtree(NETNS_ETC / namespace, ignore_errors=True)
            with contextlib.suppress(OSError):  # ip's folder of per-namespace files, if only ours were in it
                NETNS_ETC.rmdir()


def _hosts_files(hosts: Hosts, names: list[str]) -> None:
    """Every namespace resolves every service name to that service's namespace address."""
    lines = ["127.0.0.1 localhost", "::1 localhost"]
    lines += [f"{address} {name}" for name, address in zip(names, hosts.addresses, strict=True)]
    for namespace in hosts.namespaces:
        folder = NETNS_ETC / namespace
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "hosts").write_text("\n".join(lines) + "\n")


def _healthy(hosts: Hosts, index: int, service: dict[str, Any], environment: dict[str, str]) -> None:
    test = service["healthcheck"]["test"]
    assert test[0] == "CMD"
    deadline = time.monotonic() + HEALTHY_TIMEOUT_S
    while True:
        check = subprocess.run(["ip", "netns", "exec", hosts.namespaces[index], *_okapi(test[1:])], env=environment,
                               capture_output=True, text=True, timeout=30, check=False)
        if check.returncode == 0:
            return
        assert time.monotonic() < deadline, f"{test} never passed: {check.stderr}"
        time.sleep(0.5)


def _converged(clients: list[Any], key: str, expected: set[str | None] | None = None) -> str:
    deadline = time.monotonic() + CONVERGE_TIMEOUT_S
    while True:
        finals = [client("get", key=key) for client in clients]
        if len(set(finals)) == 1 and finals[0] is not None and (expected is None or finals[0] in expected):
            return str(finals[0])
        assert time.monotonic() < deadline, (key, finals)
        time.sleep(0.05)


def test_the_generated_compose_topology_runs_in_namespaces(hosts: Hosts, tmp_path: Path) -> None:
    project = tmp_path / "compose"
    generated = subprocess.run([sys.executable, "-m", "okapikv.cli", "deploy", "compose", "--out", str(project),
                                "--dcs", ",".join(DCS), "--partitions", "1", "--wan-ms", "5", "--tls",
                                "--tls-server-name", SERVER_NAME], capture_output=True, text=True, timeout=60,
                               check=False)
    assert generated.returncode == 0, generated.stderr
    # The one certificate the project mounts (./tls), naming the name every peer and probe expects.
    authority = CertificateAuthority.create(tmp_path, "compose")
    issued = authority.issue("okapi", ips=(), dns=(SERVER_NAME,))
    (project / "tls").mkdir()
    for source, name in ((authority.path, "ca.crt"), (issued.certificate, "tls.crt"), (issued.key, "tls.key")):
        shutil.copyfile(source, project / "tls" / name)
    tls_arguments = ["--ca", str(authority.path), "--cert", str(issued.certificate), "--key", str(issued.key),
                     "--server-name", SERVER_NAME]
    compose = yaml.safe_load((project / "compose.yaml").read_text())
    services = {name: service for name, service in compose["services"].items() if "profiles" not in service}
    names = list(services)
    assert len(names) == len(DCS)
    _hosts_files(hosts, names)

    environments = []
    with server_logs(tmp_path, names) as logs:
        for index, (name, service) in enumerate(services.items()):
            environment = _environment(service, _mounts(service, project, tmp_path / "volumes"))
            environments.append(environment)
            hosts.exec(index, _okapi(service["command"]), env=environment, stdin=subprocess.DEVNULL,
                       stdout=logs[name], stderr=subprocess.STDOUT)
        for index, service in enumerate(services.values()):
            _healthy(hosts, index, service, environments[index])
        # Each DC's client dials its own server by service name, as a client on the project network would.
        clients = [start_agent(hosts, index, f"{name}:7100", len(DCS), *tls_arguments)
                   for index, name in enumerate(names)]
        east, west, north = clients
        for client in clients:
            client("ready", addresses=[f"{name}:7100" for name in names])

        # Causality: east writes x then y; west sees y, so it sees x, and writes z; north sees z, so y and x.
        east("put", key="x", value="1")
        east("put", key="y", value="2")
        assert west("wait", key="y", value="2") == "2"
        assert west("get", key="x") == "1"
        west("put", key="z", value="3")
        assert north("wait", key="z", value="3") == "3"
        assert north("get", key="y") == "2" and north("get", key="x") == "1"

        # Convergence: concurrent writes of one key from every DC.
        for client, dc in zip(clients, DCS, strict=True):
            client("put", key="contested", value=dc)
        _converged(clients, "contested", set(DCS))

        # Cut north off from both other DCs, silently; both sides go on.
        hosts.cut(2, 0)
        hosts.cut(2, 1)
        east("put", key="during-south", value="a")
        north("put", key="during-north", value="b")
        east("put", key="split", value="east")
        north("put", key="split", value="north")
        # Each side serves its own writes (a remote one waits for the stable time, which under Okapi's
        # UST needs every DC: nothing new from a remote DC is visible anywhere until the heal).
        assert east("get", key="during-south") == "a" and east("get", key="split") == "east"
        assert north("get", key="during-north") == "b" and north("get", key="split") == "north"
        time.sleep(1.0)
        assert north("get", key="during-south") is None  # nothing crosses the cut
        assert east("get", key="during-north") is None and west("get", key="during-north") is None

        hosts.heal(2, 0)
        hosts.heal(2, 1)
        assert north("wait", key="during-south", value="a") == "a"
        assert east("wait", key="during-north", value="b") == "b"
        assert west("wait", key="during-north", value="b") == "b"
        _converged(clients, "split", {"east", "north"})
        for client in clients:
            client.stop()
    # The data went to each service's own volume; every server listened on its bind address, with TLS.
    for name in names:
        assert any((tmp_path / "volumes" / f"{name}-data").iterdir())
        events = [json.loads(line) for line in (tmp_path / f"{name}.log").read_text().splitlines()
                  if line.startswith("{")]
        listening = [event for event in events if event.get("event") == "listening"]
        assert listening and listening[0]["address"] == f"{name}:7100" and listening[0]["bind"] == "0.0.0.0:7100"
        assert listening[0]["tls"] is True and listening[0]["client_auth"] is True
