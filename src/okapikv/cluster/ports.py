"""Where local clusters (benchmarks, the fuzzer, tests) put their ports.

Blocks of consecutive ports are drawn below Linux's ephemeral range (32768-60999 by default). A
server binds its native port as port 0 (``okapikv.server.native``) and every outgoing connection
takes its source port from that range, so a block inside it can lose a port to a server that started
earlier: a later server of the block then fails to bind, or worse, its peers reach another
server's native port. Below the range, only configured ports live.
"""

from __future__ import annotations

import random
import socket

LOCAL_PORTS = range(10_000, 32_000)


def port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_port_block(count: int, host: str = "127.0.0.1", attempts: int = 200) -> int:
    """First port of ``count`` consecutive ports free now (random start in ``LOCAL_PORTS``, so
    concurrent runs rarely collide; the servers still fail loudly if one is taken meanwhile)."""
    rng = random.Random()
    for _ in range(attempts):
        base = rng.randrange(LOCAL_PORTS.start, LOCAL_PORTS.stop - count)
        if all(port_free(host, base + offset) for offset in range(count)):
            return base
    raise RuntimeError(f"no block of {count} free ports found on {host}")
