"""Standard gRPC health checks against okapikv servers (used by `okapi up` and the tests).

Every server registers grpc.health.v1 and reports SERVING once its gRPC server has started and its
core runs, so "healthy" means "answers requests", not merely "the port is open". On a TLS cluster
the check needs the cluster's ``ClientTls`` (a CA, and a certificate when ``client_auth`` is on).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from okapikv.tls import ClientTls, open_channel


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
