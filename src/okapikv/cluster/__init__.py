"""Cluster-level tooling: the config file every server reads (``config``), the `okapi server`
processes of a local cluster (``processes``: started the one way `okapi up`, `okapi fuzz`, the
benchmarks and the tests start them), the local launcher (`okapi up`, ``launcher``) and
`okapi status`. Nothing here is on a request's path."""

from okapikv.cluster.config import (
    ClusterConfig,
    ServerConfig,
    default_config_path,
    load_default_cluster,
    local_cluster,
)

__all__ = ["ClusterConfig", "ServerConfig", "default_config_path", "load_default_cluster", "local_cluster"]
