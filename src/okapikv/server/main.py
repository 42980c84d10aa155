"""`okapi server --config FILE --dc NAME --partition N`: run one partition server.

Exit codes: 0 after a clean shutdown (SIGINT/SIGTERM), 1 if the server cannot listen on its address
or cannot use its ``--data-dir`` (locked by another server, another server's data or data format, or
too little free space: ``okapikv.storage.space``), 2 for a bad config (TLS files included) or a (dc,
partition) the config does not list, 3 if its storage fails while running
(``okapikv.server.node.EXIT_STORAGE_FAILURE``), 4 if its data is damaged or lost committed writes
(``EXIT_DATA_DAMAGED``: start it with ``--repair``, docs/operations.md). Errors go to stderr in one
line, never a traceback; logs are single-line events (``okapikv.server.logs``, ``--log-format``).
"""

from __future__ import annotations

import argparse
import sys

from okapikv.cluster.config import ClusterConfig
from okapikv.lifetime import exit_with_parent
from okapikv.server.app import BindError, run, serve
from okapikv.server.logs import LOG_FORMATS, configure_logging
from okapikv.storage import DataDamagedError, DataDirError
from okapikv.storage.integrity import INTEGRITY_MODES

#: Exit status of a server whose data directory is damaged or lost committed writes.
EXIT_DATA_DAMAGED = 4
#: The interpreter's switch interval in a durable server: the longest the storage worker waits for
#: the GIL when its COMMIT returns while the event loop's thread is busy (CPython's default, 5 ms,
#: would be added to a group's fsync at saturation; ``okapikv.storage.group_commit``).
DURABLE_SWITCH_INTERVAL_S = 0.0005


def run_server(args: argparse.Namespace) -> int:
    exit_with_parent()  # a server a launcher started ends with it (okapikv.lifetime)
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
    except (BindError, DataDirError) as error:
        print(f"okapi server {args.dc}/{args.partition}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
