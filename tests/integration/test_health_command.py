"""`okapi health` (the probe images and Kubernetes run) and `okapi server` configured the way
images configure it: from the environment, listening on a ``bind`` address apart from the address
it advertises.

What must hold: against a serving server `okapi health` exits 0; against a port nobody listens on
it exits 1 within a few seconds with one line saying why; against a TLS server it exits 0 with the
cluster's certificates (from flags or from the config) and 1 without a client certificate.
`okapi server` takes ``--config``, ``--dc``, ``--partition`` and ``--data-dir`` from
``OKAPI_CONFIG``, ``OKAPI_DC``, ``OKAPI_PARTITION`` and ``OKAPI_DATA_DIR``, a flag winning over its
variable; a server with a ``bind`` address listens there and still advertises its ``address``.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from integration_support import STARTUP_TIMEOUT_S, free_port_range
from tls_support import CertificateAuthority

from okapikv.cluster.config import ClusterConfig, join_address, local_cluster
from okapikv.cluster.health import wait_until_serving
from okapikv.tls import ClientTls, open_channel
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc

#: `okapi health` must answer well within a probe's period; the interpreter start is most of it.
HEALTH_DEADLINE_S = 15.0


def _health(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("OKAPI_CONFIG", "OKAPI_DC", "OKAPI_PARTITION")}
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "okapikv.cli", "health", *args], capture_output=True, text=True,
                          timeout=HEALTH_DEADLINE_S, env=environment, check=False)


@contextmanager
def _server(config_path: Path, log: Path, args: tuple[str, ...] = (), env: dict[str, str] | None = None,
            ) -> Iterator[subprocess.Popen[bytes]]:
    environment = dict(os.environ)
    environment.update(env or {})
    with log.open("ab") as output:
        process = subprocess.Popen([sys.executable, "-m", "okapikv.cli", "server", *args], env=environment,
                                   stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _wait(address: str, process: subprocess.Popen[bytes], log: Path, tls: ClientTls | None = None) -> None:
    pending = wait_until_serving([address], STARTUP_TIMEOUT_S, tls=tls,
                                 give_up=lambda: None if process.poll() is None else log.read_text())
    assert not pending, log.read_text()


def test_health_of_a_server_configured_by_its_environment_on_a_bind_address(tmp_path: Path) -> None:
    port = free_port_range(1)
    base = local_cluster(dcs=("east",), partitions=1, wan="off", base_port=port)
    server = dataclasses.replace(base.servers[0], address=join_address("localhost", port),
                                 bind=join_address("0.0.0.0", port))
    config = dataclasses.replace(base, servers=(server,))
    path = config.dump(tmp_path / "cluster.toml")
    assert ClusterConfig.load(path).servers[0].bind == f"0.0.0.0:{port}"
    log = tmp_path / "server.log"
    data = tmp_path / "data"
    # OKAPI_DC names no DC: the --dc flag must win over it; the rest comes from the environment.
    env = {"OKAPI_CONFIG": str(path), "OKAPI_DC": "nowhere", "OKAPI_PARTITION": "0", "OKAPI_DATA_DIR": str(data)}
    with _server(path, log, ("--dc", "east"), env) as process:
        _wait(f"127.0.0.1:{port}", process, log)
        with open_channel(f"127.0.0.1:{port}") as channel:
            info = pb_grpc.KeyValueStub(channel).ClusterInfo(pb.ClusterInfoRequest(), timeout=5)  # type: ignore[no-untyped-call]
        assert [s.address for s in info.servers] == [f"localhost:{port}"]  # advertised, not bound
        assert data.is_dir() and any(data.iterdir())  # OKAPI_DATA_DIR fed --data-dir

        by_env = _health(env={"OKAPI_CONFIG": str(path), "OKAPI_DC": "east", "OKAPI_PARTITION": "0"})
        assert by_env.returncode == 0, by_env.stderr
        assert by_env.stdout.strip() == f"127.0.0.1:{port} serving"
        by_address = _health("--connect", f"localhost:{port}")
        assert by_address.returncode == 0, by_address.stderr
    stopped = _health("--connect", f"127.0.0.1:{port}", "--timeout-s", "2")
    assert stopped.returncode == 1


def test_health_of_a_dead_port_says_why_in_one_line(tmp_path: Path) -> None:
    port = free_port_range(1)
    started = time.monotonic()
    result = _health("--connect", f"127.0.0.1:{port}", "--timeout-s", "2")
    assert result.returncode == 1
    assert time.monotonic() - started < HEALTH_DEADLINE_S
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"okapi health: 127.0.0.1:{port}: "), result.stderr
    assert "unavailable" in lines[0] or "no answer" in lines[0]
    assert result.stdout == ""
    usage = _health()  # no server named at all: a usage error, not "not serving"
    assert usage.returncode == 2 and "--connect" in usage.stderr


def test_health_of_a_tls_server(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path, "cluster")
    issued, client = ca.issue("server", ips=()), ca.issue("client", server=False)  # names localhost only
    port = free_port_range(1)
    base = local_cluster(dcs=("east",), partitions=1, wan="off", base_port=port, tls=ca.server_tls(issued))
    # Advertised by name, bound on every interface: checked by config, `okapi health` dials loopback
    # and expects the certificate of the advertised name (as in a container).
    server = dataclasses.replace(base.servers[0], address=join_address("localhost", port),
                                 bind=join_address("0.0.0.0", port))
    config = dataclasses.replace(base, servers=(server,))
    path = config.dump(tmp_path / "cluster.toml")
    log = tmp_path / "server.log"
    address = f"localhost:{port}"
    with _server(path, log, ("--config", str(path), "--dc", "east", "--partition", "0", "--in-memory")) as process:
        _wait(address, process, log, ca.client_tls(client))
        flags = _health("--connect", address, "--tls-ca", str(ca.path), "--tls-cert", str(client.certificate),
                        "--tls-key", str(client.key))
        assert flags.returncode == 0, flags.stderr
        from_config = _health("--config", str(path), "--dc", "east", "--partition", "0")
        assert from_config.returncode == 0, from_config.stderr
        no_certificate = _health("--connect", address, "--tls-ca", str(ca.path))
        assert no_certificate.returncode == 1
        assert len(no_certificate.stderr.strip().splitlines()) == 1, no_certificate.stderr
        plaintext = _health("--connect", address, "--timeout-s", "2")
        assert plaintext.returncode == 1
        assert len(plaintext.stderr.strip().splitlines()) == 1, plaintext.stderr


def test_server_flags_are_required_without_their_environment(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OKAPI_") or k == "OKAPI_PORT_RANGE"}
    result = subprocess.run([sys.executable, "-m", "okapikv.cli", "server", "--dc", "east"], capture_output=True,
                            text=True, timeout=30, env=environment, check=False)
    assert result.returncode == 2 and "--config" in result.stderr and "--partition" in result.stderr
