"""The cluster `okapi up` starts on one machine (``local_cluster``), its emulated WAN delays, and
where the running cluster's config is kept (``$OKAPI_HOME``)."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Sequence
from pathlib import Path

from okapikv.cluster.config.addresses import join_address
from okapikv.cluster.config.fields import DEFAULT_CLUSTER_ID, DEFAULT_IDLE_AFTER_MS, DEFAULT_IDLE_INTERVAL_MS
from okapikv.cluster.config.model import ClusterConfig
from okapikv.cluster.config.servers import ServerConfig
from okapikv.core.deployment import PAPER_DC_NAMES, PAPER_WAN_MS
from okapikv.core.skew import DC_MAJOR, clock_offsets_us
from okapikv.tls import TlsConfig

#: One-way delays between the paper's AWS regions, in ms (``okapikv.core.deployment``).
REALISTIC_WAN_MS: dict[frozenset[str], float] = {
    frozenset({a, b}): PAPER_WAN_MS[i][j]
    for i, a in enumerate(PAPER_DC_NAMES) for j, b in enumerate(PAPER_DC_NAMES) if i < j
}
DEFAULT_REALISTIC_WAN_MS = 50.0


def realistic_wan_ms(dcs: Sequence[str]) -> tuple[tuple[float, ...], ...]:
    """One-way delays for the paper's regions (``okapikv.core.deployment``: about half of public AWS
    inter-region round-trip times); any pair involving another DC name gets 50 ms."""
    return tuple(
        tuple(
            0.0 if a == b else REALISTIC_WAN_MS.get(frozenset({a, b}), DEFAULT_REALISTIC_WAN_MS) for b in dcs
        )
        for a in dcs
    )


def uniform_wan_ms(dcs: Sequence[str], delay_ms: float) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(0.0 if a == b else float(delay_ms) for b in dcs) for a in dcs)


LOCAL_HEARTBEAT_INTERVAL_MS = 5.0


def local_cluster(
    dcs: Sequence[str] = PAPER_DC_NAMES,
    partitions: int = 2,
    protocol: str = "okapi",
    wan: float | str = "realistic",
    clock_skew_ms: float = 0.0,
    clock_skew_model: str = DC_MAJOR,
    clock_skew_seed: int = 1,
    base_port: int = 7100,
    host: str = "127.0.0.1",
    cluster_id: str = DEFAULT_CLUSTER_ID,
    metrics_base_port: int = 0,
    tls: TlsConfig | None = None,
    heartbeat_interval_ms: float = LOCAL_HEARTBEAT_INTERVAL_MS,
    stabilization_interval_ms: float = 5.0,
    resp: bool = True,
    resp_base_port: int = 0,
    idle_after_ms: float = DEFAULT_IDLE_AFTER_MS,
    idle_interval_ms: float = DEFAULT_IDLE_INTERVAL_MS,
) -> ClusterConfig:
    """The cluster `okapi up` starts: one server per (DC, partition) on ``host``.

    Heartbeats default to every ``LOCAL_HEARTBEAT_INTERVAL_MS`` (5 ms) rather than the paper's 1 ms:
    every local server shares one machine, and at 1 ms an idle 3-DC x 2-partition cluster spends
    about 25% of a core per server on heartbeats alone (measured on a 2-core machine). Pass
    ``heartbeat_interval_ms=1`` (`okapi up --heartbeat-ms 1`) for the paper's setting, with
    ``idle_after_ms=0`` (no idle pacing, ``okapikv.core.pacing``; `okapi up` turns it off whenever
    ``--heartbeat-ms`` is given without ``--idle-after-ms``).

    Ports are ``base_port``, ``base_port + 1``, ... in dc-major order (every partition of the first
    DC, then the second DC, ...). ``wan`` is a uniform one-way delay in ms, ``"realistic"`` (see
    ``realistic_wan_ms``) or ``"off"``. ``clock_skew_ms`` gives the servers fixed clock offsets of
    up to X ms as ``clock_skew_model`` lays them out (``okapikv.core.skew``): by default spread
    evenly over [0, X] in the same order, the first server 0 and the last X; ``uniform`` and
    ``half-normal`` draw them from ``random.Random(clock_skew_seed)``. ``metrics_base_port`` (0: no
    metrics) numbers the metrics ports the same way, and ``resp_base_port`` the Redis-protocol ports (0:
    each server takes any free port; ``resp = False``: none). With ``tls`` and ``client_auth = false`` each
    server also gets a peer listener, on the ports right after the client ones.
    """
    names = tuple(name.strip() for name in dcs)
    if isinstance(wan, str):
        if wan == "realistic":
            matrix = realistic_wan_ms(names)
        elif wan == "off":
            matrix = uniform_wan_ms(names, 0.0)
        else:
            raise ValueError(f"wan must be a number of ms, 'realistic' or 'off', not {wan!r}")
    else:
        matrix = uniform_wan_ms(names, wan)
    if not math.isfinite(clock_skew_ms) or clock_skew_ms < 0:
        raise ValueError(f"clock skew must be a non-negative number of ms, not {clock_skew_ms}")
    count = len(names) * partitions
    offsets_us = clock_offsets_us(clock_skew_model, round(clock_skew_ms * 1000), count, random.Random(clock_skew_seed))
    peer_listeners = tls is not None and not tls.client_auth
    needed = 2 * count if peer_listeners else count
    if count > 0 and not 1 <= base_port <= 65536 - needed:
        raise ValueError(f"base port {base_port} leaves no room for {needed} consecutive ports")
    for what, first in (("metrics", metrics_base_port), ("RESP", resp_base_port if resp else 0)):
        if first and count > 0 and not 1 <= first <= 65536 - count:
            raise ValueError(f"{what} base port {first} leaves no room for {count} consecutive ports")
    servers = []
    for position in range(count):
        dc, partition = divmod(position, partitions)
        skew = offsets_us[position] / 1000
        servers.append(ServerConfig(
            names[dc], partition, join_address(host, base_port + position), round(skew, 6),
            metrics_port=metrics_base_port + position if metrics_base_port else 0,
            peer_address=join_address(host, base_port + count + position) if peer_listeners else None,
            resp_port=resp_base_port + position if resp and resp_base_port else 0,
        ))
    return ClusterConfig(
        dcs=names,
        partitions=partitions,
        servers=tuple(servers),
        wan_ms=matrix,
        cluster_id=cluster_id,
        protocol=protocol,
        tls=tls,
        heartbeat_interval_ms=heartbeat_interval_ms,
        stabilization_interval_ms=stabilization_interval_ms,
        idle_after_ms=idle_after_ms,
        idle_interval_ms=idle_interval_ms,
        resp=resp,
    )


def okapi_home() -> Path:
    """``$OKAPI_HOME`` if set, else ``~/.okapi``: where `okapi up` leaves the running cluster's config."""
    configured = os.environ.get("OKAPI_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".okapi"


def default_config_path() -> Path:
    return okapi_home() / "cluster.toml"


def load_default_cluster(alternatives: str = "--connect HOST:PORT") -> ClusterConfig:
    """The config of the cluster `okapi up` started last; ``ValueError`` with advice when none.
    ``alternatives`` names the caller's own flags that name a cluster another way (a hint must only
    name flags its command has)."""
    path = default_config_path()
    if not path.exists():
        raise ValueError(f"no local cluster config at {path}: start a cluster with `okapi up`, "
                         f"or name one with {alternatives}")
    return ClusterConfig.load(path)
