"""`okapi deploy compose|k8s`: write a compose project or Kubernetes manifests (docs/deploy.md).

The cluster comes from the same parameters as `okapi up` (DCs, partitions, protocol, WAN
emulation, intervals), or from a cluster config file (``--config``: its settings; its addresses
are replaced by the containers'). Exit 0 with the written files listed, 2 on bad parameters.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from okapikv.cluster.config import ClusterConfig, local_cluster
from okapikv.deploy.compose import write_compose
from okapikv.deploy.kubernetes import write_kubernetes
from okapikv.deploy.model import Deployment


def template(args: argparse.Namespace) -> ClusterConfig:
    """The cluster's settings: the config file's, or the flags' as `okapi up` reads them."""
    if args.config:
        config = ClusterConfig.load(args.config)
        if config.tls is not None:
            raise ValueError("--config: remove the [tls] section: --tls gives the containers theirs "
                             "(docs/deploy.md, section 6)")
        return config
    wan: float | str = args.wan_ms if args.wan_ms is not None else args.wan
    config = local_cluster(dcs=[name for name in args.dcs.split(",") if name.strip()], partitions=args.partitions,
                           protocol=args.protocol, wan=wan, cluster_id=args.cluster_id)
    if args.heartbeat_ms is not None:
        config = dataclasses.replace(config, heartbeat_interval_ms=args.heartbeat_ms)
    return dataclasses.replace(config, stabilization_interval_ms=args.stabilization_ms)


def run_deploy(args: argparse.Namespace) -> int:
    try:
        if args.partitions < 1:
            raise ValueError("--partitions must be at least 1")
        deployment = Deployment(template(args), image=args.image, storage_gib=args.storage_gib,
                                tls_server_name=args.tls_server_name if args.tls else None)
        out = Path(args.out or ("okapi-compose" if args.platform == "compose" else "okapi-k8s"))
        written = write_compose(deployment, out) if args.platform == "compose" else write_kubernetes(deployment, out)
    except (ValueError, OSError) as error:
        print(f"okapi deploy {args.platform}: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0
