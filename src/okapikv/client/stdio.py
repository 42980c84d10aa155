"""``okapi client``: the course service's stdin/stdout client, and an interactive prompt on a terminal.

Piped (the fuzzer, the YCSB driver, tests): read one command per line, print its result lines in
input order and flush after each command, so a driver that writes a line and waits for the answer
never stalls. Malformed lines and failed operations print one ``ERROR ...`` line and the client goes
on; ``STOP`` prints ``STOP`` and exits 0, and so does end of input. Operations run one at a time on a
blocking ``Client``: they must, since each must see the effects of the ones before it (the session).

On a terminal: the same commands at an ``okapi> `` prompt with readline editing and a history kept in
``~/.okapi/history`` (or ``$OKAPI_HOME/history``), plus ``help``, ``exit`` and ``quit``.

Which cluster: ``--connect HOST:PORT`` (any server of the DC to use), else the cluster `okapi up`
started last (its config file), in its first DC or the one named by ``--dc``. Either may be a
comma-separated list (``--dc a,b``, ``--connect H1:P1,H2:P2``): the first is used, the others are
fallback DCs the session moves to when it stays unreachable (``Client``'s ``fallback``).
``--timestamps``: PUT, SWAP and DELETE lines end in `` ts=<n>``, the write's server timestamp (for
``okapi fuzz``, whose checkers need the store's last-writer-wins order; off by default, since the
course's tools read the format byte for byte). ``--at-most-once``: a PUT, SWAP or DELETE whose
connection broke after it was sent is not retried (a retry could apply it twice) but answered
``ERROR outcome unknown: ...``; operations that never reached a server, and every read, are still
retried until ``--timeout-s`` (for ``okapi fuzz``, whose checkers must know which writes may have
happened; see ``okapikv.client.retry``).

Exit status: 0 after STOP or end of input, 1 if the cluster could not be reached at start-up (or
the reader of the output went away), 2 for a bad command line (unknown DC, no local cluster), 130
after Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from okapikv.client.commands import HELP, CommandError, KeyValueApi, Stop, execute, format_error, parse
from okapikv.client.sync import Client
from okapikv.errors import InvalidArgument, OkapiError, OutcomeUnknown, Unavailable
from okapikv.tls import ClientTls, client_tls_from_args

PROMPT = "okapi> "
HISTORY_LENGTH = 2_000


def resolve_address(connect: str | None, dc: str | None) -> str:
    """The server to bootstrap from: ``connect`` if given, else partition 0 of the DC named ``dc``
    (default: the first) in the local cluster's config. ``ValueError`` with advice otherwise."""
    return resolve_addresses(connect, dc)[0]


def resolve_addresses(connect: str | None, dc: str | None) -> list[str]:
    """Like ``resolve_address`` for each entry of a comma-separated ``connect`` or ``dc``: the first
    is the server to use, the rest are fallbacks in other DCs."""
    if connect:
        return [address.strip() for address in connect.split(",") if address.strip()]
    from okapikv.cluster.config import load_default_cluster

    config = load_default_cluster()
    names = [name.strip() for name in dc.split(",") if name.strip()] if dc is not None else [config.dcs[0]]
    for name in names:
        config.dc_index(name)  # names the DCs that exist if it is not one of them
    return [config.server(name, 0).address for name in names]


def respond(client: KeyValueApi, line: str, timestamps: bool = False) -> tuple[list[str], bool]:
    """The output lines for one input line, and whether the client should stop (``timestamps``:
    PUT, SWAP and DELETE lines end in `` ts=<n>``, see ``commands``)."""
    try:
        command = parse(line)
    except CommandError as error:
        return [format_error(str(error))], False
    if command is None:
        return [], False
    if isinstance(command, Stop):
        return ["STOP"], True
    try:
        return execute(client, command, timestamps), False
    except InvalidArgument as error:
        return [format_error(f"invalid argument: {error}")], False
    except Unavailable as error:
        return [format_error(f"unavailable: {error}")], False
    except OutcomeUnknown as error:
        return [format_error(f"outcome unknown: {error}")], False
    except OkapiError as error:
        return [format_error(f"{type(error).__name__}: {error}")], False


def serve(client: KeyValueApi, lines: Iterable[str], output: TextIO, timestamps: bool = False) -> int:
    """The piped mode: answer every line until STOP or the end of input."""
    for line in lines:
        result, stop = respond(client, line, timestamps)
        if result:
            output.write("\n".join(result) + "\n")
            output.flush()
        if stop:
            break
    return 0


def interactive(client: Client, output: TextIO, timestamps: bool = False) -> int:
    """The terminal mode: a prompt with line editing and a persistent history."""
    history = _open_history()
    topology = client.topology
    output.write(f"okapi: DC {topology.dc_name} of cluster {topology.cluster_id!r} "
                 f"({topology.num_dcs} DCs, {topology.num_partitions} partitions, protocol {topology.protocol}); "
                 "type help\n")
    try:
        while True:
            try:
                line = input(PROMPT)
            except EOFError:
                output.write("\n")
                break
            except KeyboardInterrupt:
                output.write("\n")
                continue
            word = line.strip()
            if word in ("help", "?"):
                output.write(HELP + "\n")
                continue
            if word in ("exit", "quit"):
                break
            result, stop = respond(client, line, timestamps)
            if result:
                output.write("\n".join(result) + "\n")
                output.flush()
            if stop:
                break
    finally:
        _save_history(history)
    return 0


def _open_history() -> Path | None:
    """Enable readline with the saved history; None where readline is missing (e.g. Windows)."""
    try:
        import readline
    except ImportError:
        return None
    from okapikv.cluster.config import okapi_home

    path = okapi_home() / "history"
    readline.set_history_length(HISTORY_LENGTH)
    with contextlib.suppress(OSError):  # no history yet
        readline.read_history_file(path)
    return path


def _save_history(path: Path | None) -> None:
    if path is None:
        return
    import readline

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        readline.write_history_file(path)
    except OSError:
        pass  # a read-only home must not turn a clean exit into a crash


def resolve_tls(args: argparse.Namespace) -> ClientTls | None:
    """TLS from ``--tls-ca/--tls-cert/--tls-key``, else, without ``--connect``, from the local
    cluster config's ``[tls]`` section (its certificate as the client certificate)."""
    tls = client_tls_from_args(getattr(args, "tls_ca", None), getattr(args, "tls_cert", None),
                               getattr(args, "tls_key", None))
    if tls is None and not args.connect:
        from okapikv.cluster.config import load_default_cluster

        config = load_default_cluster()
        tls = config.tls.client_side() if config.tls is not None else None
    return tls


def run_client(args: argparse.Namespace) -> int:
    """Entry point of ``okapi client`` (arguments defined in ``okapikv.cli``)."""
    try:
        address, *fallback = resolve_addresses(args.connect, args.dc)
        tls = resolve_tls(args)
    except ValueError as error:
        print(f"okapi client: {error}", file=sys.stderr)
        return 2
    try:
        client = Client(address, timeout_s=args.timeout_s, tls=tls, fallback=fallback,
                        at_most_once=bool(getattr(args, "at_most_once", False)),
                        native=not getattr(args, "grpc_only", False))
    except OkapiError as error:
        print(f"okapi client: cannot reach the cluster at {address}: {error}", file=sys.stderr)
        return 1
    timestamps = bool(getattr(args, "timestamps", False))
    with client:
        wanted = args.dc.split(",")[0].strip() if args.dc is not None else None
        if args.connect and wanted is not None and client.topology.dc_name != wanted:
            print(f"okapi client: {address} is in DC {client.topology.dc_name}, not {wanted}", file=sys.stderr)
            return 2
        try:
            if sys.stdin.isatty():
                return interactive(client, sys.stdout, timestamps)
            # Undecodable input must become an ERROR line (an invalid token), not a crash.
            lines = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
            return serve(client, lines, sys.stdout, timestamps)
        except BrokenPipeError:
            # The reader went away (`okapi client < script | head`): stop quietly, and keep Python
            # from failing again when it flushes stdout at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        except KeyboardInterrupt:
            return 130
