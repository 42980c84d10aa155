"""The cluster config file: every server of a deployment and the settings they must agree on.

One TOML file describes the whole cluster, and every server binds the address written next to its
own (dc, partition), so the same file works for a loopback cluster and for a multi-host one: copy it
to each host and start `okapi server --config FILE --dc NAME --partition N --data-dir DIR` there.
What must agree across servers lives here (DC order, partitions per DC, protocol, stabilization
intervals, size limits, the maximum clock offset); what is per server is its addresses and an
injected clock skew. Every setting, its default and meaning: docs/config.md (generated from
``fields``).

Modules, each importing only those before it:

- ``addresses``: ``HOST:PORT``, IPv6 hosts in brackets;
- ``fields``: every setting's default and doc, the one table the model, the writer and the
  reference read;
- ``servers``: one ``[[servers]]`` entry (``ServerConfig``);
- ``validate``: the rules a config must follow, all problems named at once;
- ``parse``: TOML into data, data into the model's fields, each value's type checked;
- ``write``: the model's plain form as commented TOML (tomlkit), written atomically;
- ``model``: ``ClusterConfig``, valid by construction, with its TOML round trip;
- ``local``: the cluster `okapi up` starts and where its config is kept;
- ``reference``: docs/config.md from ``fields`` (``python -m okapikv.cluster.config.reference``).

This package re-exports what callers use, so ``from okapikv.cluster.config import ClusterConfig``
keeps working. Loading validates everything and raises ``ValueError`` naming the offending entry.
"""

from okapikv.cluster.config.addresses import join_address, split_address
from okapikv.cluster.config.fields import (
    DEFAULT_IDLE_AFTER_MS,
    DEFAULT_IDLE_INTERVAL_MS,
    MESSAGE_OVERHEAD_BYTES,
)
from okapikv.cluster.config.local import (
    LOCAL_HEARTBEAT_INTERVAL_MS,
    default_config_path,
    load_default_cluster,
    local_cluster,
    okapi_home,
    realistic_wan_ms,
    uniform_wan_ms,
)
from okapikv.cluster.config.model import ClusterConfig
from okapikv.cluster.config.servers import ServerConfig

__all__ = [
    "DEFAULT_IDLE_AFTER_MS",
    "DEFAULT_IDLE_INTERVAL_MS",
    "LOCAL_HEARTBEAT_INTERVAL_MS",
    "MESSAGE_OVERHEAD_BYTES",
    "ClusterConfig",
    "ServerConfig",
    "default_config_path",
    "join_address",
    "load_default_cluster",
    "local_cluster",
    "okapi_home",
    "realistic_wan_ms",
    "split_address",
    "uniform_wan_ms",
]
