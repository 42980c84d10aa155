"""The command line of `okapi dc` (``okapikv.cluster.membership_cli`` runs it), apart so that
building `okapi`'s parser imports no gRPC."""

from __future__ import annotations

import argparse

#: How long `okapi dc remove` waits for every live server to stop counting the DC, by default.
DEFAULT_TIMEOUT_S = 30.0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """`okapi dc ...`: the membership commands."""
    p = sub.add_parser("dc", help="change a running cluster's membership: remove a DC lost for good")
    commands = p.add_subparsers(dest="dc_command", required=True)
    remove = commands.add_parser("remove", help="stop counting a DC lost for good (docs/operations.md)")
    remove.add_argument("name", help="the DC's name")
    remove.add_argument("--force", action="store_true",
                        help="remove it even though some of its servers answer (a DC cut off, not lost)")
    remove.add_argument("--connect", default=None, metavar="HOST:PORT", help="any server (default: the local cluster)")
    remove.add_argument("--config", default=None, help="cluster config file instead of --connect")
    remove.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help=f"wait this long for the live servers to stop counting it (default {DEFAULT_TIMEOUT_S:g})")
    remove.add_argument("--tls-ca", default=None, help="TLS: CA certificate (PEM); default: the config's [tls]")
    remove.add_argument("--tls-cert", default=None, help="TLS: client certificate (PEM), when the cluster demands one")
    remove.add_argument("--tls-key", default=None, help="TLS: the client certificate's key (PEM)")
    remove.add_argument("--tls-server-name", default=None, help="TLS: host name the server certificates name")
    remove.set_defaults(target="okapikv.cluster.membership_cli:run_remove")
