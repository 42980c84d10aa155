"""docs/config.md, the cluster config's reference, generated from ``fields`` (and from the defaults
of the ``[connections]`` and ``[reads]`` sections' own classes), so the reference cannot drift from
the code: a test keeps the committed file equal to ``markdown()``.

    python -m okapikv.cluster.config.reference > docs/config.md
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from okapikv.cluster.config.fields import CLUSTER, CONNECTIONS_COMMENT, READS_COMMENT, SERVER, TLS, WAN, Setting
from okapikv.cluster.connections import ConnectionSettings
from okapikv.cluster.reads import DEFAULT_SCAN_BYTES, ReadLimits

INTRODUCTION = """\
# The cluster config file

One TOML file describes a whole cluster: `okapi up` writes it (`okapi up --print-config` prints it),
and every server reads it (`okapi server --config FILE --dc NAME --partition N --data-dir DIR`),
binding the addresses written next to its own (dc, partition). Loading checks every setting and
fails naming the entry. [deploy.md](deploy.md) shows a whole file for real machines.

This page is generated from the code (`okapikv.cluster.config.fields`):
`python -m okapikv.cluster.config.reference > docs/config.md`.
"""


def _table(settings: Iterable[Setting]) -> list[str]:
    lines = ["| setting | type | default | meaning |", "|---|---|---|---|"]
    lines += [f"| `{item.name}` | {item.kind} | {item.default} | {item.doc} |" for item in settings]
    return lines


#: What an unset default means, for the fields whose default is None.
UNSET = {"max_scan_bytes": f"{DEFAULT_SCAN_BYTES}, or what `max_message_bytes` leaves beside one largest pair if less"}


def _defaults(instance: ConnectionSettings | ReadLimits) -> list[str]:
    """One row per field: a time (a name ending in ``_ms``) is a number of ms, anything else a count."""
    lines = ["| setting | type | default |", "|---|---|---|"]
    for item in dataclasses.fields(instance):
        value = getattr(instance, item.name)
        kind = "number (ms)" if item.name.endswith("_ms") else "integer"
        lines.append(f"| `{item.name}` | {kind} | {UNSET[item.name] if value is None else value} |")
    return lines


def markdown() -> str:
    """The whole reference page."""
    lines = [INTRODUCTION, "## Top level", "", *_table(CLUSTER), "",
             "## `[wan_ms]`", "", *_table((WAN,)), "",
             "## `[[servers]]`: one per (dc, partition)", "", *_table(SERVER), "",
             "## `[tls]`: optional", "",
             "Paths are PEM files; a relative one is taken from the config file's folder. With it every port "
             "speaks TLS only ([operations.md](operations.md#tls)).", "", *_table(TLS), "",
             "## `[connections]`: optional", "", CONNECTIONS_COMMENT.replace("docs/operations.md, Connections",
             "[operations.md](operations.md#connections-budgets-timeouts-and-link-liveness)"), "",
             *_defaults(ConnectionSettings()), "",
             "## `[reads]`: optional", "", READS_COMMENT.replace("docs/operations.md, Read limits and paging",
             "[operations.md](operations.md#read-limits-and-paging)"), "",
             *_defaults(ReadLimits()), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")
