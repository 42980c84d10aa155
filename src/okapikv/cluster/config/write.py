"""Writing a cluster config: its plain form (``ClusterConfig.to_dict``) as TOML laid out for people,
with the comments of ``fields``, through tomlkit (which escapes strings and keys as TOML requires
and keeps the comments); and atomically to a file.

Layout: the header comment, the top-level settings in ``fields.CLUSTER``'s order (each with its
comment above it), ``[wan_ms]``, one ``[[servers]]`` table per server, then ``[tls]``,
``[connections]`` and ``[reads]`` when the config has them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import Table

from okapikv.cluster.config.fields import CLUSTER, CONNECTIONS_COMMENT, HEADER, READS_COMMENT, TLS_COMMENT, WAN_COMMENT


def _table(values: Mapping[str, Any], comment: str) -> Table:
    table = tomlkit.table()
    table.comment(comment)
    for name, value in values.items():
        table.add(name, value)
    return table


def render(data: Mapping[str, Any]) -> str:
    """``data`` (the plain form of a config) as TOML; tomllib reads back exactly ``data``."""
    document = tomlkit.document()
    for line in HEADER:
        document.add(tomlkit.comment(line))
    for setting in CLUSTER:
        for line in setting.comment:
            document.add(tomlkit.comment(line))
        document.add(setting.name, data[setting.name])
    document.add(tomlkit.nl())
    document.add("wan_ms", _table(data["wan_ms"], WAN_COMMENT))
    servers = tomlkit.aot()
    for server in data["servers"]:
        servers.append(tomlkit.item(dict(server)))
    document.add("servers", servers)
    for key, comment in (("tls", TLS_COMMENT), ("connections", CONNECTIONS_COMMENT), ("reads", READS_COMMENT)):
        if key in data:
            document.add(key, _table(data[key], comment))
    return tomlkit.dumps(document)


def write_atomically(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` so that a reader never sees half a file (a temporary file beside
    it, then a rename); creates the folder."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(target)
    return target
