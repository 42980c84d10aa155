"""What answers at an address: a one-connection check, within ``PROBE_TIMEOUT_S``, that a port speaks
gRPC (HTTP/2), for `okapi client` and `okapi status` before they talk to it.

gRPC pointed at a Redis (RESP) port, an HTTP/1 server or a TLS port without TLS retries for its
whole deadline and then reports its transport's internals (``Failed parsing HTTP/2``, ``Socket
closed``). This sends what a gRPC client sends first, the HTTP/2 preface and an empty SETTINGS
frame (over TLS when the caller uses TLS), and reads the first bytes back: an HTTP/2 server answers
with its own SETTINGS frame at once, and every other kind gives itself away in its first byte (a
RESP reply's type, ``HTTP/``, a TLS record) or by closing; a port that closes is then offered a
TLS handshake, which a gRPC TLS port (closing on plaintext without a word) answers. The answer is
one line naming the address and what to do; None means "gRPC, or nothing conclusive" (refused,
unreachable, silent: the caller's own path reports those), so the probe never fails a working
server.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import time

from okapikv.cluster.config import split_address
from okapikv.tls import ClientTls

PROBE_TIMEOUT_S = 2.0
#: The HTTP/2 client connection preface and an empty SETTINGS frame (RFC 9113, 3.4 and 6.5).
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
SETTINGS_FRAME = 0x04
#: The first byte of a RESP2/RESP3 reply (a Redis server answers the preface with ``-ERR ...``).
RESP_TYPES = frozenset(b"+-:$*_,#!=(%~>|")
#: TLS record types: handshake (a server's reply) and alert (a refusal of plaintext).
TLS_HANDSHAKE = 0x16
TLS_RECORDS = frozenset((0x15, TLS_HANDSHAKE))


def protocol_problem(address: str, tls: ClientTls | None = None, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """One line saying why ``address`` is not an okapikv server's gRPC port, or None."""
    host, port = split_address(address)
    deadline = time.monotonic() + timeout_s
    try:
        raw = socket.create_connection((host.strip("[]"), port), timeout=timeout_s)
    except OSError:
        return None
    with contextlib.closing(raw):
        stream: socket.socket = raw
        if tls is not None:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE  # what is checked here is the protocol, not the peer
            context.set_alpn_protocols(["h2"])
            try:
                if tls.certificate and tls.key:  # a cluster that asks clients for a certificate
                    context.load_cert_chain(tls.certificate, tls.key)
                stream = context.wrap_socket(raw, server_hostname=host.strip("[]"))
            except ssl.SSLError as error:
                return (f"{address} does not speak TLS ({error.reason or error}): drop --tls-ca, --tls-cert and "
                        "--tls-key, or check the address")
            except OSError:
                return None
        try:
            stream.settimeout(max(0.01, deadline - time.monotonic()))
            stream.sendall(HTTP2_PREFACE)
            first = _read(stream, 9, deadline)
        except OSError:
            return None
    if first == b"" and tls is None and _speaks_tls(host, port, deadline):
        first = bytes((TLS_HANDSHAKE,))  # a gRPC TLS port closes on plaintext without a word
    return _judge(address, first, tls is not None)


def _speaks_tls(host: str, port: int, deadline: float) -> bool:
    """Whether a TLS handshake gets a TLS answer at ``host:port`` (done, or refused with an alert,
    say for want of a client certificate)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=max(0.01, deadline - time.monotonic())) as raw, \
                context.wrap_socket(raw, server_hostname=host):
            return True
    except ssl.SSLError as error:
        return "ALERT" in str(error.reason)
    except OSError:
        return False


def _read(stream: socket.socket, count: int, deadline: float) -> bytes | None:
    """Up to ``count`` bytes; b"" if the peer closed first, None if it stayed silent."""
    data = b""
    while len(data) < count:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return data or None
        stream.settimeout(remaining)
        try:
            chunk = stream.recv(count - len(data))
        except TimeoutError:
            return data or None
        except OSError:  # reset: a closing peer
            return data
        if not chunk:
            return data
        data += chunk
    return data


def _judge(address: str, first: bytes | None, over_tls: bool) -> str | None:
    if first is None:
        return None  # silent: a stopped server, or a protocol that waits for more (the caller times out)
    if len(first) >= 4 and first[3] == SETTINGS_FRAME:
        return None  # HTTP/2: a gRPC server
    if first.startswith((b"HTTP/", b"<")):  # a status line, or an HTML error page (HTTP/0.9 style)
        return f"{address} is an HTTP/1 server, not an okapikv server's gRPC port: check the address"
    if first[:1] and first[0] in TLS_RECORDS and not over_tls:
        return (f"{address} needs TLS: pass --tls-ca (and --tls-cert/--tls-key where the cluster asks "
                "clients for a certificate)")
    if first[:1] and first[0] in RESP_TYPES:
        return (f"{address} speaks the Redis protocol (RESP), not gRPC: give a server's own address "
                "(`okapi status` lists them), or use redis-cli there")
    if not first:
        if over_tls:
            return None  # perhaps for want of a client certificate: gRPC's own error says which
        return f"{address} closed the connection without answering gRPC: not an okapikv server's port?"
    return f"{address} answered {first[:9]!r}, not gRPC (HTTP/2): not an okapikv server's port"
