"""`okapi server --config FILE --dc NAME --partition N`: run one partition server.

Exit codes: 0 after a clean shutdown (SIGINT/SIGTERM), 1 if the server cannot listen on its address,
2 for a bad config or a (dc, partition) the config does not list. Errors go to stderr in one line.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from okapikv.cluster.config import ClusterConfig
from okapikv.server.app import BindError, run, serve


def configure_logging(label: str) -> None:
    level = os.environ.get("OKAPI_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format=f"okapi server {label}: %(levelname)s %(message)s",
        stream=sys.stderr,
    )


def run_server(args: argparse.Namespace) -> int:
    try:
        config = ClusterConfig.load(args.config)
        dc = config.dc_index(args.dc)
        config.server(dc, args.partition)
    except ValueError as error:
        print(f"okapi server: {error}", file=sys.stderr)
        return 2
    configure_logging(f"{args.dc}/{args.partition}")
    try:
        run(serve(config, dc, args.partition))
    except BindError as error:
        print(f"okapi server {args.dc}/{args.partition}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
