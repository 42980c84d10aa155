"""Cluster-level tooling: the config file every server reads, the local launcher (`okapi up`) and
`okapi status`. Nothing here is on a request's path."""

from okapikv.cluster.config import (
    ClusterConfig,
    ServerConfig,
    default_config_path,
    load_default_cluster,
    local_cluster,
)

__all__ = ["ClusterConfig", "ServerConfig", "default_config_path", "load_default_cluster", "local_cluster"]
