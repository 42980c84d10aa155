"""Where local clusters (benchmarks, the fuzzer, tests) put their ports.

Blocks of consecutive ports are drawn at random from ``local_port_range()``: 10000-31999 unless the
environment variable ``OKAPI_PORT_RANGE=LOW-HIGH`` (inclusive) confines them, for a machine where
other services own part of that range. Every tool that draws ports (``okapi fuzz``, ``okapi bench``,
the Redis reference, the tests' helpers) draws them here, so the variable confines them all.

The default lies below Linux's ephemeral range (32768-60999 by default). A server binds its native
port as port 0 (``okapikv.server.native``) and every outgoing connection takes its source port from
that range, so a block inside it can lose a port to a server that started earlier: a later server
of the block then fails to bind, or worse, its peers reach another server's native port. Below the
range, only configured ports live; an ``OKAPI_PORT_RANGE`` should stay out of it too.

A port found free is not yet bound: until its server binds it, another process probing the same
port would find it free too (on a shared machine, another test run). So a drawn block is also
*reserved*: the drawing process holds an exclusive ``flock`` on one lock file per 8-port slot of
the block (``$TMPDIR/okapi-ports-<uid>/<slot>.lock``), and a block is only drawn where every slot's
lock could be taken. The locks go with the process (the kernel drops them when it exits); a process
keeps its last ``HELD_BLOCKS`` reservations, by which time the servers of older blocks have long
bound their ports (or stopped). A process that does not draw here (a server of another program)
can still take a port between the probe and the bind; the servers then fail loudly, and the callers
that start clusters try other ports.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import socket
import tempfile
from collections import OrderedDict
from pathlib import Path

PORT_RANGE_VARIABLE = "OKAPI_PORT_RANGE"
DEFAULT_PORTS = range(10_000, 32_000)
#: Ports per reservation slot: a block reserves every slot it touches.
SLOT_PORTS = 8
#: Reservations a process keeps (the oldest is released when it draws one more).
HELD_BLOCKS = 64

_held: OrderedDict[int, list[int]] = OrderedDict()  # base port -> lock file descriptors


def local_port_range() -> range:
    """The ports local clusters may use: ``OKAPI_PORT_RANGE`` (``LOW-HIGH``, inclusive) or
    10000-31999. ``RuntimeError`` naming the variable when it is malformed."""
    text = os.environ.get(PORT_RANGE_VARIABLE, "").strip()
    if not text:
        return DEFAULT_PORTS
    low_text, separator, high_text = text.partition("-")
    try:
        low, high = int(low_text), int(high_text)
    except ValueError:
        low = high = -1
    if not separator or not 1024 <= low <= high <= 65535:
        raise RuntimeError(f"{PORT_RANGE_VARIABLE}={text!r}: write LOW-HIGH, two ports with "
                           "1024 <= LOW <= HIGH <= 65535 (for example 20000-20999)")
    return range(low, high + 1)


def port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _lock_directory() -> Path | None:
    directory = Path(tempfile.gettempdir()) / f"okapi-ports-{os.getuid()}"
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    return directory


def _release(descriptors: list[int]) -> None:
    for descriptor in descriptors:
        with contextlib.suppress(OSError):
            os.close(descriptor)  # closing the only descriptor drops the flock


def _reserve(directory: Path | None, base: int, count: int) -> list[int] | None:
    """Exclusive locks on every slot of ``base .. base + count - 1``, or None if one is taken
    (by another process, or by this one's earlier draw). No lock directory: no reservation."""
    if directory is None:
        return []
    descriptors: list[int] = []
    for slot in range(base // SLOT_PORTS, (base + count - 1) // SLOT_PORTS + 1):
        try:
            descriptor = os.open(directory / f"{slot}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            _release(descriptors)
            return []  # an unusable lock directory: fall back to probing alone
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(descriptor)
            _release(descriptors)
            return None
        descriptors.append(descriptor)
    return descriptors


def free_port_block(count: int, host: str = "127.0.0.1", attempts: int = 200) -> int:
    """First port of ``count`` consecutive ports in ``local_port_range()`` that are free now and
    reserved for this process (see the module doc). The start is random, so concurrent runs
    rarely even meet; ``RuntimeError`` when no such block is found."""
    ports = local_port_range()
    if count < 1 or count > len(ports):
        raise RuntimeError(f"no block of {count} ports fits in {ports.start}-{ports.stop - 1}"
                           f" (set {PORT_RANGE_VARIABLE}=LOW-HIGH to a wider range)")
    directory = _lock_directory()
    rng = random.Random()
    for _ in range(attempts):
        base = rng.randrange(ports.start, ports.stop - count + 1)
        descriptors = _reserve(directory, base, count)
        if descriptors is None:
            continue
        if all(port_free(host, base + offset) for offset in range(count)):
            _held[base] = descriptors
            while len(_held) > HELD_BLOCKS:
                _release(_held.popitem(last=False)[1])
            return base
        _release(descriptors)
    raise RuntimeError(f"no block of {count} free ports found on {host} in {ports.start}-{ports.stop - 1}")


def address_in_use(host: str, port: int) -> bool:
    """Whether binding ``host:port`` fails now (another process listens there). A check, not a
    reservation: `okapi up` and `okapi server` use it to refuse with one line naming the address
    before they create anything; the bind itself stays the final word."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except OSError:
            return True
    return False
