"""`okapi server --config FILE --dc NAME --partition N (--data-dir DIR | --in-memory)`: run one
partition server. Durable is the default: without ``--data-dir`` the server refuses to start (exit
2) unless ``--in-memory`` asks for a server that keeps nothing.

Exit codes: 0 after a clean shutdown (SIGINT/SIGTERM), 1 if the server cannot use its ``--data-dir``
(locked by another server, another server's data or data format, or too little free space:
``okapikv.storage.space``), 2 for a bad config (TLS files that cannot be read or a key that does not
match its certificate included), an address in use, a ``--data-dir`` that cannot be a directory, or
a (dc, partition) the config does not list; all of those are found before anything is created or
bound (``preflight``), so such a failed start leaves nothing behind. 3 if its storage fails while running
(``okapikv.server.node.EXIT_STORAGE_FAILURE``), 4 if its data is damaged or lost committed writes
(``EXIT_DATA_DAMAGED``: start it with ``--repair``, docs/operations.md). Errors go to stderr in one
line, never a traceback; logs are single-line events (``okapikv.server.logs``, ``--log-format``).
"""

from __future__ import annotations

import argparse
import os
import ssl
import sys
from pathlib import Path

from okapikv.cluster.config import ClusterConfig, join_address, split_address
from okapikv.cluster.ports import address_in_use
from okapikv.lifetime import exit_with_parent
from okapikv.resp.parser import hiredis_preferred
from okapikv.serve.app import BindError, run, serve
from okapikv.server.logs import LOG_FORMATS, configure_logging
from okapikv.storage import DataDamagedError, DataDirError
from okapikv.storage.integrity import INTEGRITY_MODES
from okapikv.tls import read_pem

#: Exit status of a server whose data directory is damaged or lost committed writes.
EXIT_DATA_DAMAGED = 4
#: The interpreter's switch interval in a durable server: the longest the storage worker waits for
#: the GIL when its COMMIT returns while the event loop's thread is busy (CPython's default, 5 ms,
#: would be added to a group's fsync at saturation; ``okapikv.storage.group_commit``).
DURABLE_SWITCH_INTERVAL_S = 0.0005


def preflight(config: ClusterConfig, dc: int, partition: int, data_dir: str | None, metrics_port: int | None) -> None:
    """Raise ``ValueError`` (one line naming the file or address) if the server cannot start,
    checked before anything is created or bound, so a failed start leaves nothing behind: TLS files
    that cannot be read or do not belong together (a key of another certificate), an
    ``OKAPI_RESP_PARSER`` that names no parser, an address another process listens on, a data
    directory that cannot be one."""
    tls = config.tls
    if tls is not None:
        for file, setting in ((tls.ca, "ca"), (tls.certificate, "certificate"), (tls.key, "key")):
            read_pem(file, setting)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_verify_locations(cafile=tls.ca)
        except ssl.SSLError as error:
            raise ValueError(f"tls ca: {tls.ca} holds no usable certificate ({error.reason or error})") from None
        try:
            context.load_cert_chain(tls.certificate, tls.key)
        except ssl.SSLError as error:
            if error.reason == "KEY_VALUES_MISMATCH":
                raise ValueError(f"tls key {tls.key} does not match tls certificate {tls.certificate}") from None
            raise ValueError(f"tls certificate {tls.certificate} with key {tls.key}: {error.reason or error}") from None
    if config.resp:
        hiredis_preferred()  # OKAPI_RESP_PARSER names a parser, or the server does not start (docs/resp.md, "Parsing")
    server = config.server(dc, partition)
    addresses = [server.listen_address, *(address for address in (server.peer_listen_address,) if address)]
    if config.resp and server.resp_port:
        addresses.append(join_address(server.listen_host, server.resp_port))
    metrics = server.metrics_port if metrics_port is None else metrics_port
    if metrics:
        addresses.append(join_address(server.listen_host, metrics))
    for address in addresses:
        if address_in_use(*split_address(address)):
            raise ValueError(f"cannot listen on {address}: address in use (another server? `okapi status` shows "
                             "a cluster's servers)")
    if data_dir is not None:
        path = Path(data_dir).expanduser()
        if path.exists() and not path.is_dir():
            raise ValueError(f"--data-dir {path} is not a directory")
        parent = next((above for above in path.parents if above.exists()), None)
        if not path.exists() and parent is not None and (not parent.is_dir() or not os.access(parent, os.W_OK)):
            raise ValueError(f"cannot create --data-dir {path}: {parent} is not a writable directory")


def run_server(args: argparse.Namespace) -> int:
    exit_with_parent()  # a server a launcher started ends with it (okapikv.lifetime)
    if getattr(args, "in_memory", False):
        args.data_dir = None  # --in-memory wins over a $OKAPI_DATA_DIR default
    if not getattr(args, "data_dir", None) and not getattr(args, "in_memory", False):
        # Durable is the default: a forgotten flag must not run a server that loses its data silently.
        print(f"okapi server: pass --data-dir DIR to keep {args.dc}/{args.partition}'s data "
              "(or --in-memory to keep none)", file=sys.stderr)
        return 2
    try:
        config = ClusterConfig.load(args.config)
        dc = config.dc_index(args.dc)
        config.server(dc, args.partition)
        log_format = getattr(args, "log_format", None)
        if log_format is not None and log_format not in LOG_FORMATS:
            raise ValueError(f"--log-format must be one of {', '.join(LOG_FORMATS)}")
        metrics_port = getattr(args, "metrics_port", None)
        if metrics_port is not None and not 0 <= metrics_port <= 65535:
            raise ValueError("--metrics-port must be in 0..65535 (0: off)")
        integrity = getattr(args, "integrity_check", None) or "quick"
        if integrity not in INTEGRITY_MODES:
            raise ValueError(f"--integrity-check must be one of {', '.join(INTEGRITY_MODES)}")
        if getattr(args, "repair", False) and not getattr(args, "data_dir", None):
            raise ValueError("--repair rebuilds a --data-dir: give one")
        loop_stall_ms = float(getattr(args, "loop_stall_ms", 50.0))
        if not 0 <= loop_stall_ms < 1e9:
            raise ValueError("--loop-stall-ms must not be negative (0: no watchdog)")
        reserve_mb = getattr(args, "disk_reserve_mb", None)
        if reserve_mb is not None and not 0 <= reserve_mb < 1 << 40:
            raise ValueError("--disk-reserve-mb must not be negative")
    except ValueError as error:
        print(f"okapi server: {error}", file=sys.stderr)
        return 2
    try:
        preflight(config, dc, args.partition, getattr(args, "data_dir", None), metrics_port)
    except ValueError as error:
        print(f"okapi server {args.dc}/{args.partition}: {error}", file=sys.stderr)
        return 2
    configure_logging(args.dc, args.partition, log_format)
    if getattr(args, "data_dir", None):
        sys.setswitchinterval(DURABLE_SWITCH_INTERVAL_S)
    try:
        run(serve(config, dc, args.partition, metrics_port=metrics_port, data_dir=getattr(args, "data_dir", None),
                  repair=bool(getattr(args, "repair", False)), integrity=integrity, loop_stall_s=loop_stall_ms / 1000,
                  disk_reserve_bytes=None if reserve_mb is None else round(reserve_mb * (1 << 20))))
    except ValueError as error:  # unreadable TLS files
        print(f"okapi server {args.dc}/{args.partition}: {error}", file=sys.stderr)
        return 2
    except DataDamagedError as error:
        print(f"okapi server {args.dc}/{args.partition}: {error}", file=sys.stderr)
        return EXIT_DATA_DAMAGED
    except BindError as error:  # taken between the check (``preflight``) and the bind
        print(f"okapi server {args.dc}/{args.partition}: {error}", file=sys.stderr)
        return 2
    except DataDirError as error:
        print(f"okapi server {args.dc}/{args.partition}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
