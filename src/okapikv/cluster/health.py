"""Standard gRPC health checks against okapikv servers (`okapi up`, `okapi health`, the tests).

Every server registers grpc.health.v1 and reports SERVING once its gRPC server has started and its
core runs, so "healthy" means "answers requests", not merely "the port is open". On a TLS cluster
the check needs the cluster's ``ClientTls`` (a CA, and a certificate when ``client_auth`` is on).

`okapi health` is that check as a command for a container HEALTHCHECK or a Kubernetes exec probe:
native gRPC probes cannot present a client certificate, and servers default to mutual TLS. It exits
0 when the server serves, 1 with one line saying why when it does not (refused, no answer within
``--timeout-s``, a TLS handshake that failed, NOT_SERVING while starting or shutting down), and 2
for bad arguments. Without ``--connect`` it checks the server of this host named by ``--config``,
``--dc`` and ``--partition`` (``$OKAPI_CONFIG``, ``$OKAPI_DC``, ``$OKAPI_PARTITION``, as `okapi
server` reads them), dialling its ``bind`` address (loopback for a wildcard) and expecting the
certificate of its advertised ``address``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from okapikv.cluster.config import ClusterConfig, split_address
from okapikv.tls import ClientTls, client_tls_from_args, open_channel

EXIT_NOT_SERVING = 1
EXIT_USAGE = 2


def is_serving(address: str, timeout_s: float = 1.0, tls: ClientTls | None = None) -> bool:
    """One health check; False on any error (refused, timeout, NOT_SERVING, TLS handshake)."""
    with open_channel(address, tls) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout_s)
        except grpc.RpcError:
            return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def wait_until_serving(
    addresses: Iterable[str],
    timeout_s: float,
    *,
    give_up: Callable[[], str | None] = lambda: None,
    poll_s: float = 0.1,
    tls: ClientTls | None = None,
) -> list[str]:
    """Poll until every address is SERVING or ``timeout_s`` passes; returns those still not serving.

    ``give_up`` is checked between rounds: a non-None reason (say, a child process exited) stops
    the wait early and is raised as ``RuntimeError``.
    """
    pending = list(addresses)
    deadline = time.monotonic() + timeout_s
    while pending:
        pending = [address for address in pending if not is_serving(address, timeout_s=0.5, tls=tls)]
        if not pending or time.monotonic() >= deadline:
            break
        reason = give_up()
        if reason is not None:
            raise RuntimeError(reason)
        time.sleep(poll_s)
    return pending


def why_not_serving(address: str, timeout_s: float, tls: ClientTls | None = None) -> str | None:
    """None when ``address`` answers SERVING, else one line saying why not."""
    with open_channel(address, tls) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout_s)
        except grpc.RpcError as error:
            code = error.code()
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return f"no answer within {timeout_s:g} s"
            details = " ".join((error.details() or "").split())
            return f"{code.name.lower()}: {details}" if details else code.name.lower()
    if reply.status == health_pb2.HealthCheckResponse.SERVING:
        return None
    return f"{health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)} (starting or shutting down)"


def health_target(args: argparse.Namespace) -> tuple[str, ClientTls | None]:
    """The address `okapi health` dials and the TLS it presents; ``ValueError`` when unclear."""
    tls = client_tls_from_args(args.tls_ca, args.tls_cert, args.tls_key, args.tls_server_name)
    config = ClusterConfig.load(args.config) if args.config else None
    if tls is None and config is not None and config.tls is not None:
        tls = config.tls.client_side()
    if args.connect:
        split_address(args.connect)
        return args.connect, tls
    if config is None or args.dc is None or args.partition is None:
        raise ValueError("name the server: --connect HOST:PORT, or --config, --dc and --partition "
                         "($OKAPI_CONFIG, $OKAPI_DC, $OKAPI_PARTITION)")
    server = config.server(args.dc, args.partition)
    if tls is not None and not tls.server_name and server.local_address != server.address:
        tls = ClientTls(tls.ca, tls.certificate, tls.key, split_address(server.address)[0])
    return server.local_address, tls


def run_health(args: argparse.Namespace) -> int:
    """`okapi health`: exit 0 when the server serves, 1 with the reason on stderr, 2 on bad arguments."""
    if not 0 < args.timeout_s <= 3600:
        print("okapi health: --timeout-s must be in (0, 3600]", file=sys.stderr)
        return EXIT_USAGE
    try:
        address, tls = health_target(args)
        reason = why_not_serving(address, args.timeout_s, tls)
    except ValueError as error:
        print(f"okapi health: {error}", file=sys.stderr)
        return EXIT_USAGE
    if reason is not None:
        print(f"okapi health: {address}: {reason}", file=sys.stderr)
        return EXIT_NOT_SERVING
    print(f"{address} serving")
    return 0
