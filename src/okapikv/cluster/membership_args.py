"""The command line of `okapi dc` (``okapikv.cluster.membership_cli`` runs it), apart so that
building `okapi`'s parser imports no gRPC."""

from __future__ import annotations

import argparse

#: How long `okapi dc remove`, `add` and `join` wait for each step to reach every live server.
DEFAULT_TIMEOUT_S = 60.0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """`okapi dc ...`: the membership commands."""
    p = sub.add_parser("dc", help="change a running cluster's membership: remove a DC lost for good, add it back, "
                                  "add a new one")
    commands = p.add_subparsers(dest="dc_command", required=True)
    remove = commands.add_parser("remove", help="stop counting a DC lost for good (docs/operations.md)")
    remove.add_argument("--force", action="store_true",
                        help="remove it even though some of its servers answer (a DC cut off, not lost)")
    remove.set_defaults(target="okapikv.cluster.membership_cli:run_remove")
    add = commands.add_parser("add", help="bring a removed DC back once its servers run again (docs/operations.md)")
    add.set_defaults(target="okapikv.cluster.membership_cli:run_add")
    join = commands.add_parser("join", help="grow the cluster by a new DC, the last of --config (docs/operations.md)")
    join.set_defaults(target="okapikv.cluster.membership_cli:run_join")
    for command in (remove, add, join):
        command.add_argument("name", help="the DC's name")
        if command is join:
            command.add_argument("--config", required=True,
                                 help="the cluster's config grown by the new DC, named last (TOML)")
            command.set_defaults(connect=None)
        else:
            command.add_argument("--connect", default=None, metavar="HOST:PORT",
                                 help="any server (default: the local cluster)")
            command.add_argument("--config", default=None, help="cluster config file instead of --connect")
        command.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                             help=f"the longest wait for each step (default {DEFAULT_TIMEOUT_S:g})")
        command.add_argument("--tls-ca", default=None, help="TLS: CA certificate (PEM); default: the config's [tls]")
        command.add_argument("--tls-cert", default=None,
                             help="TLS: client certificate (PEM), when the cluster demands one")
        command.add_argument("--tls-key", default=None, help="TLS: the client certificate's key (PEM)")
        command.add_argument("--tls-server-name", default=None, help="TLS: host name the server certificates name")
