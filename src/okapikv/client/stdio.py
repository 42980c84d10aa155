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
``--counters``: INCR and PUTEX are accepted too, piped only (for ``okapi fuzz --counters-ttls``;
``commands``). ``--timestamps``: PUT, SWAP and DELETE lines end in `` ts=<n>``, the write's server timestamp (for
``okapi fuzz``, whose checkers need the store's last-writer-wins order; off by default, since the
course's tools read the format byte for byte). ``--at-most-once``: a PUT, SWAP or DELETE whose
connection broke after it was sent is not retried (a retry could apply it twice) but answered
``ERROR outcome unknown: ...``, a line outside the course protocol; operations that never reached a
server, and every read, are still retried until ``--timeout-s``. It is for checkers that must know
which writes may have happened (``okapi fuzz``; see ``okapikv.client.retry``), not for the course's
tools, which the default (at-least-once retries) keeps to the protocol.

Start-up: a first connection that is refused (nothing listens at the address) fails at once with a
clear error, as redis-cli does, unless ``--wait-s S`` asks to keep trying for S seconds. Retrying
is for a server that was up and went away. Once the server accepts connections, the first
ClusterInfo is bounded by ``FIRST_CONTACT_S`` (``--timeout-s`` if shorter, ``--wait-s`` if longer).
On a terminal the client says what it waits for whenever a wait lasts longer than ``NOTICE_AFTER_S``.

A server that goes down under a running client (killed, restarted, stopped with SIGSTOP) only
delays the operations routed to it: each is retried with backoff (capped at 1 s between attempts)
for up to ``--timeout-s``, 600 s by default (``okapikv.cli.CLIENT_TIMEOUT_S``), and completes once
the server is back, so a driver of the course protocol sees a slow answer, not an ``ERROR`` line.
Only past that bound does the operation answer ``ERROR unavailable: ...``.

Exit status: 0 after STOP or end of input, 1 if the cluster could not be reached at start-up (or
the reader of the output went away), 2 for a bad command line (unknown DC, no local cluster), 130
after Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import os
import random
import socket
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

from okapikv.client.commands import HELP, CommandError, KeyValueApi, Stop, execute, format_error, parse
from okapikv.client.sync import Client
from okapikv.core.backoff import DEFAULT_BACKOFF
from okapikv.errors import InvalidArgument, OkapiError, OutcomeUnknown, Unavailable
from okapikv.tls import ClientTls, client_tls_from_args

PROMPT = "okapi> "
HISTORY_LENGTH = 2_000
#: Bound on the first ClusterInfo once the server accepts connections (a port held by something that
#: is not an okapikv server must not hang the client for ``--timeout-s``).
FIRST_CONTACT_S = 10.0
#: On a terminal, a wait longer than this is explained on stderr.
NOTICE_AFTER_S = 1.0
#: The TCP connect that tells "refused" from "accepted" (loopback answers in microseconds).
PROBE_TIMEOUT_S = 2.0


def resolve_addresses(connect: str | None, dc: str | None) -> list[str]:
    """The servers to bootstrap from, one per entry of a comma-separated ``connect``, else partition
    0 of each DC named in ``dc`` (default: the first) in the local cluster's config: the first is
    the server to use, the rest are fallbacks in other DCs. ``ValueError`` with advice otherwise."""
    if connect:
        return [address.strip() for address in connect.split(",") if address.strip()]
    from okapikv.cluster.config import load_default_cluster

    config = load_default_cluster()
    names = [name.strip() for name in dc.split(",") if name.strip()] if dc is not None else [config.dcs[0]]
    for name in names:
        config.dc_index(name)  # names the DCs that exist if it is not one of them
    return [config.server(name, 0).address for name in names]


def refuses_connections(address: str) -> bool:
    """Whether nothing listens at ``address`` (the connection is refused). Other failures (no
    route, a timeout) are not refusals: the client's own retries judge those."""
    from okapikv.cluster.config import split_address

    host, port = split_address(address)
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def wait_for_listener(address: str, wait_s: float, notices: TextIO | None = None) -> bool:
    """Whether ``address`` accepts connections, trying with backoff for up to ``wait_s`` seconds
    (0: one try). ``notices`` (a terminal) is told what the client waits for."""
    deadline = time.monotonic() + wait_s
    jitter = random.Random()
    for attempt in itertools.count(1):
        if not refuses_connections(address):
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        if notices is not None and attempt == 1:
            notices.write(f"okapi client: waiting for a server to listen at {address} (connection refused; "
                          f"up to {wait_s:g} s, Ctrl-C to give up)\n")
            notices.flush()
        time.sleep(min(DEFAULT_BACKOFF.delay_s(attempt, jitter), remaining))
    raise AssertionError("unreachable")


@contextlib.contextmanager
def notice_after(seconds: float, notices: TextIO | None, message: str) -> Iterator[None]:
    """Write ``message`` to ``notices`` (None: nowhere) if the block is still running after
    ``seconds``: a terminal user learns what a slow step waits for."""
    if notices is None:
        yield
        return
    done = threading.Event()

    def tell() -> None:
        if not done.wait(seconds):
            notices.write(message + "\n")
            notices.flush()

    teller = threading.Thread(target=tell, name="okapi-notice", daemon=True)
    teller.start()
    try:
        yield
    finally:
        done.set()


def respond(client: KeyValueApi, line: str, timestamps: bool = False,
            counters: bool = False) -> tuple[list[str], bool]:
    """The output lines for one input line, and whether the client should stop (``timestamps``:
    PUT, SWAP and DELETE lines end in `` ts=<n>``; ``counters``: INCR and PUTEX are accepted; see
    ``commands``)."""
    try:
        command = parse(line, counters)
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


def serve(client: KeyValueApi, lines: Iterable[str], output: TextIO, timestamps: bool = False,
          counters: bool = False) -> int:
    """The piped mode: answer every line until STOP or the end of input."""
    for line in lines:
        result, stop = respond(client, line, timestamps, counters)
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
            with notice_after(NOTICE_AFTER_S, sys.stderr,
                              f"okapi: waiting for the cluster (retrying for up to {client.timeout_s:g} s; "
                              "Ctrl-C to quit)"):
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
    timeout_s = float(args.timeout_s)
    wait_s = float(getattr(args, "wait_s", 0.0) or 0.0)
    if timeout_s <= 0 or wait_s < 0:
        print("okapi client: --timeout-s must be positive and --wait-s not negative", file=sys.stderr)
        return 2
    notices = sys.stderr if sys.stderr.isatty() else None
    try:
        if not wait_for_listener(address, wait_s, notices):
            waited = f" after {wait_s:g} s" if wait_s else ""
            print(f"okapi client: nothing listens at {address} (connection refused{waited}): is the cluster "
                  "running? (`okapi status` shows it; `okapi client --wait-s SECONDS` waits for it)", file=sys.stderr)
            return 1
        from okapikv.cluster.probe import protocol_problem

        problem = protocol_problem(address, tls)  # another protocol, or TLS: one line within 2 s
        if problem is not None:
            print(f"okapi client: {problem}", file=sys.stderr)
            return 1
        with notice_after(NOTICE_AFTER_S, notices, f"okapi client: waiting for {address} to answer "
                                                   "(Ctrl-C to give up)"):
            client = Client(address, timeout_s=max(wait_s, min(timeout_s, FIRST_CONTACT_S)), tls=tls, fallback=fallback,
                            at_most_once=bool(getattr(args, "at_most_once", False)),
                            native=not getattr(args, "grpc_only", False))
    except OkapiError as error:
        print(f"okapi client: cannot reach the cluster at {address}: {error}", file=sys.stderr)
        return 1
    except ValueError as error:  # an address that is not HOST:PORT
        print(f"okapi client: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    client.timeout_s = timeout_s  # the bound of every operation from here on (the first contact had its own)
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
            return serve(client, lines, sys.stdout, timestamps, bool(getattr(args, "counters", False)))
        except BrokenPipeError:
            # The reader went away (`okapi client < script | head`): stop quietly, and keep Python
            # from failing again when it flushes stdout at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        except KeyboardInterrupt:
            return 130
