"""Whether a config is a running cluster's config grown by one new DC (`okapi dc join`,
docs/operations.md, "Adding a region"; the protocol side is ``okapikv.core.growth``).

A running server takes the grown config (``Admin.LearnConfig``) only if it describes the same
cluster with one more DC at the end: the same cluster id, protocol and partition count, the same DCs
in the same order, and the same servers at the same addresses for them. Anything else would change
a running server under its feet (another protocol, other partition owners, peers moved), which a
restart with the new config must do, not this.
"""

from __future__ import annotations

from okapikv.cluster.config import ClusterConfig


def grown_config_problem(current: ClusterConfig, grown: ClusterConfig) -> str | None:
    """Why ``grown`` is not ``current`` with one DC more, or None (module docstring)."""
    old = len(current.dcs)
    if len(grown.dcs) != old + 1:
        return f"the new config names {len(grown.dcs)} DCs; this cluster has {old}, so it must name {old + 1}"
    if grown.dcs[:old] != current.dcs:
        return (f"the new config's first DCs are {', '.join(grown.dcs[:old])}; this cluster's are "
                f"{', '.join(current.dcs)}, in that order (the new DC comes last)")
    for name in ("cluster_id", "protocol", "partitions"):
        if getattr(grown, name) != getattr(current, name):
            return f"the new config's {name} is {getattr(grown, name)!r}, this cluster's {getattr(current, name)!r}"
    for dc in range(old):
        for partition in range(current.partitions):
            before, after = current.server(dc, partition), grown.server(dc, partition)
            if (before.address, before.peer_target) != (after.address, after.peer_target):
                return f"the new config moves {before.label} ({before.address} -> {after.address})"
    return None
