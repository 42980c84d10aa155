"""`okapi load`: write the records of a file (or stdin) into a cluster through ``bulk_put``.

Two input formats, one record a line (docs/operations.md, "Loading data"):

- ``tsv`` (the default): ``key<TAB>value``, bytes as they are (the value runs to the end of the
  line and may hold tabs; a trailing ``\\r`` is dropped); the key must not be empty;
- ``put``: the course's ``PUT <key> <value>`` lines, as `okapi client` reads them (the same token
  rules, ``commands.parse``); any other command is refused.

Blank lines are skipped. The input is read ``chunk`` records at a time (bounded memory whatever
the file's size) and each chunk is parsed whole before any of it is sent, so a malformed line
stops the load with its line number before its chunk is written; the chunks before it are
loaded (the message says how many records), and loading the same file again is safe (the same
values are written again). Each chunk is one ``AsyncClient.bulk_put`` of one session: the records
are PUTs like any other (timestamps, replication, the session's dependencies: docs/design.md,
"Bulk loading").
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from okapikv.client import bulk
from okapikv.client.commands import CommandError, Put, parse
from okapikv.errors import BulkLoadFailed, OkapiError
from okapikv.tls import ClientTls

FORMATS = ("tsv", "put")
#: Records read, parsed and sent at a time: a bound on the memory of a load.
CHUNK_RECORDS = 100_000


class LoadInputError(ValueError):
    """A line of the input is not a record of its format (``line`` counts from 1)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def _tsv(number: int, line: bytes) -> tuple[bytes, bytes]:
    key, tab, value = line.partition(b"\t")
    if not tab:
        raise LoadInputError(number, "no tab: expected key<TAB>value")
    if not key:
        raise LoadInputError(number, "empty key")
    return key, value


def _put(number: int, line: bytes) -> tuple[bytes, bytes]:
    try:
        command = parse(line.decode("utf-8", errors="replace"))
    except CommandError as error:
        raise LoadInputError(number, str(error)) from None
    if not isinstance(command, Put):
        raise LoadInputError(number, f"expected PUT <key> <value>, not {type(command).__name__.upper()}")
    return command.key.encode(), command.value.encode()


def records(lines: Iterable[bytes], input_format: str, chunk: int = CHUNK_RECORDS,
            ) -> Iterator[list[tuple[bytes, bytes]]]:
    """The records of ``lines`` in chunks of at most ``chunk``; ``LoadInputError`` at the first
    malformed line (raised before the chunk holding it is yielded)."""
    if input_format not in FORMATS:
        raise ValueError(f"unknown input format {input_format!r}; expected one of {', '.join(FORMATS)}")
    if chunk < 1:
        raise ValueError(f"chunk must be at least 1, not {chunk}")
    parse_line = _tsv if input_format == "tsv" else _put
    pending: list[tuple[bytes, bytes]] = []
    for number, raw in enumerate(lines, 1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip():
            continue
        pending.append(parse_line(number, line))
        if len(pending) >= chunk:
            yield pending
            pending = []
    if pending:
        yield pending


async def load(address: str, lines: Iterable[bytes], input_format: str, *, chunk: int = CHUNK_RECORDS,
               batch: int = bulk.BULK_BATCH, timeout_s: float = 30.0, native: bool = True,
               tls: ClientTls | None = None) -> int:
    """Load every record of ``lines`` into the DC of ``address``; returns how many. Raises
    ``LoadInputError`` (a malformed line) and ``BulkLoadFailed`` with the records written before
    the failure counted in ``written``, in both cases those of the earlier chunks included."""
    from okapikv.client.aio import AsyncClient

    written = 0
    async with AsyncClient(address, timeout_s=timeout_s, native=native, tls=tls) as client:
        try:
            for pairs in records(lines, input_format, chunk):
                try:
                    written += await client.bulk_put(pairs, batch=batch)
                except BulkLoadFailed as failure:
                    raise BulkLoadFailed(str(failure).replace(f"after {failure.written} ",
                                                              f"after {written + failure.written} ", 1),
                                         written + failure.written, failure.cause) from None
        except LoadInputError as error:
            error.args = (f"{error.args[0]} ({written} record(s) of the chunks before it were loaded)",)
            raise
    return written


def run_load(args: argparse.Namespace) -> int:
    """Entry point of ``okapi load`` (arguments defined in ``okapikv.cli``)."""
    from okapikv.client.stdio import resolve_addresses, resolve_tls

    try:
        address, *_ = resolve_addresses(args.connect, args.dc)
        tls = resolve_tls(args)
    except ValueError as error:
        print(f"okapi load: {error}", file=sys.stderr)
        return 2
    if args.batch < 1 or args.chunk < 1:
        print("okapi load: --batch and --chunk must be at least 1", file=sys.stderr)
        return 2
    source: BinaryIO
    try:
        source = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115 - closed below
    except OSError as error:
        print(f"okapi load: cannot read {args.file}: {error.strerror or error}", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        written = asyncio.run(load(address, source, args.format, chunk=args.chunk, batch=args.batch,
                                   timeout_s=args.timeout_s, native=not args.grpc_only, tls=tls))
    except LoadInputError as error:
        print(f"okapi load: {args.file}: {error}", file=sys.stderr)
        return 2
    except BulkLoadFailed as error:
        print(f"okapi load: {error}", file=sys.stderr)
        return 1
    except OkapiError as error:
        print(f"okapi load: cannot reach the cluster at {address}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        if source is not sys.stdin.buffer:
            source.close()
    elapsed = time.monotonic() - started
    print(f"loaded {written} record(s) in {elapsed:.1f} s ({written / max(elapsed, 1e-9):,.0f}/s)")
    return 0
