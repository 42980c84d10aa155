"""Operator mistakes get one clear line, fast (docs/operations.md, "Clear errors"): `okapi client`
and `okapi status` pointed at a port that speaks another protocol (RESP, HTTP) or needs TLS
(``okapikv.cluster.probe``), and `okapi server` started with a TLS key of another certificate, on an
address in use, on a data directory that cannot be one or with an ``OKAPI_RESP_PARSER`` that names
no parser (``okapikv.serve.main.preflight``),
which must also leave nothing behind."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration_support import free_port_range
from tls_support import CertificateAuthority

from okapikv.cluster.config import ClusterConfig, local_cluster
from okapikv.cluster.health import wait_until_serving
from okapikv.tls import TlsConfig

OKAPI = [sys.executable, "-m", "okapikv.cli"]
#: The probe answers within 2 s; the rest is the interpreter's start on a loaded 2-core machine.
FAST_S = 6.0


def _run(*arguments: str, home: Path, stdin: str = "") -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run([*OKAPI, *arguments], input=stdin, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "OKAPI_HOME": str(home)})
    return result, time.monotonic() - started


def _assert_one_line(result: subprocess.CompletedProcess[str], elapsed: float, status: int, *words: str) -> None:
    lines = result.stderr.splitlines()
    assert result.returncode == status and len(lines) == 1, (result.returncode, result.stderr)
    assert all(word in lines[0] for word in words), lines[0]
    assert elapsed < FAST_S, f"took {elapsed:.1f} s"
    assert result.stdout == ""


def _serve(config: ClusterConfig, directory: Path) -> subprocess.Popen[bytes]:
    path = config.dump(directory / "cluster.toml")
    process = subprocess.Popen([*OKAPI, "server", "--config", str(path), "--dc", config.dcs[0], "--partition", "0",
                                "--in-memory"], stdin=subprocess.DEVNULL)
    tls = config.tls.client_side() if config.tls is not None else None
    assert wait_until_serving([config.servers[0].address], 60, tls=tls) == []
    return process


@pytest.fixture
def plain_server(tmp_path: Path) -> Iterator[ClusterConfig]:
    base = free_port_range(2)
    config = local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=base, resp_base_port=base + 1)
    process = _serve(config, tmp_path)
    try:
        yield config
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_resp_port_is_named_as_such(plain_server: ClusterConfig, tmp_path: Path) -> None:
    resp = plain_server.servers[0].resp_address
    assert resp is not None
    client, elapsed = _run("client", "--connect", resp, home=tmp_path, stdin="GET k\n")
    _assert_one_line(client, elapsed, 1, f"okapi client: {resp} speaks the Redis protocol (RESP)")
    status, elapsed = _run("status", "--connect", resp, home=tmp_path)
    _assert_one_line(status, elapsed, 2, f"okapi status: {resp} speaks the Redis protocol (RESP)")


def test_an_http_port_is_named_as_such(tmp_path: Path) -> None:
    port = free_port_range(1)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client, elapsed = _run("client", "--connect", f"127.0.0.1:{port}", home=tmp_path, stdin="GET k\n")
        _assert_one_line(client, elapsed, 1, f"127.0.0.1:{port} is an HTTP/1 server")
        status, elapsed = _run("status", "--connect", f"127.0.0.1:{port}", home=tmp_path)
        _assert_one_line(status, elapsed, 2, f"127.0.0.1:{port} is an HTTP/1 server")
    finally:
        server.shutdown()
        server.server_close()


def test_a_tls_port_without_tls_flags_says_tls_is_needed(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path, "cluster")
    tls = ca.server_tls(ca.issue("server"))
    config = local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=free_port_range(2), tls=tls)
    process = _serve(config, tmp_path)
    address = config.servers[0].address
    try:
        client, elapsed = _run("client", "--connect", address, home=tmp_path, stdin="GET k\n")
        _assert_one_line(client, elapsed, 1, f"okapi client: {address} needs TLS: pass --tls-ca")
        status, elapsed = _run("status", "--connect", address, home=tmp_path)
        _assert_one_line(status, elapsed, 2, f"okapi status: {address} needs TLS: pass --tls-ca")
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_gRPC_port_passes_the_probe(plain_server: ClusterConfig, tmp_path: Path) -> None:
    address = plain_server.servers[0].address
    client, _ = _run("client", "--connect", address, home=tmp_path, stdin="PUT k v\nGET k\n")
    assert client.returncode == 0 and client.stdout.splitlines() == ["PUT k not_found", "GET k v"], client.stderr


@pytest.mark.parametrize("mistake", ["key-of-another-certificate", "address-in-use", "data-dir-is-a-file",
                                     "resp-parser-unknown"])
def test_a_failed_server_start_is_one_line_exit_2_and_leaves_nothing(tmp_path: Path, mistake: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    ca = CertificateAuthority.create(tmp_path, "cluster")
    server, other = ca.issue("server"), ca.issue("other")
    tls = TlsConfig(str(ca.path), str(server.certificate), str(other.key)) if mistake.startswith("key") else None
    base = free_port_range(2)
    config = local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=base, resp_base_port=base + 1, tls=tls)
    path = config.dump(tmp_path / "cluster.toml")
    data = tmp_path / "data"
    expected = {"key-of-another-certificate": f"tls key {other.key} does not match tls certificate "
                                              f"{server.certificate}",
                "address-in-use": f"cannot listen on 127.0.0.1:{base + 1}: address in use",
                "data-dir-is-a-file": f"--data-dir {data} is not a directory",
                "resp-parser-unknown": "OKAPI_RESP_PARSER must be hiredis or python, not 'bogus'"}[mistake]
    if mistake == "resp-parser-unknown":  # docs/resp.md, "Parsing": any other value stops the server at start
        monkeypatch.setenv("OKAPI_RESP_PARSER", "bogus")
    with socket.socket() as holder:
        if mistake == "address-in-use":  # the RESP port: the last a server would bind
            holder.bind(("127.0.0.1", base + 1))
            holder.listen()
        if mistake == "data-dir-is-a-file":
            data.write_text("not a directory")
        result, elapsed = _run("server", "--config", str(path), "--dc", "solo", "--partition", "0",
                               "--data-dir", str(data), home=tmp_path)
    _assert_one_line(result, elapsed, 2, "okapi server solo/0: " + expected)
    if mistake != "data-dir-is-a-file":
        assert not data.exists()  # no data directory, no 16 MiB reserve file
