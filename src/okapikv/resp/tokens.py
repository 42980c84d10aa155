"""Session tokens: a connection's causal session as an opaque string (``OKAPI.SESSION``).

A stateless service or a connection pool cannot keep a session on one connection; it keeps the
token instead (MongoDB's causal sessions and Cosmos DB's session tokens are the precedent) and
hands it to whichever connection, in whichever DC, serves its next request.

The token is URL-safe base64 (no padding) of a small binary form, big-endian::

    version (1 byte, 1) | DC of the session (1) | number of DCs n (1) | CRC-32 of the cluster id (4)
    | stable vector (n x 8) | dt (8) | CRC-32 of everything before (4)

43 bytes (58 characters) for three DCs. The checksum catches a token that was cut or garbled;
the cluster id's CRC a token of another cluster; the DC says which failover rule applies when the
token is adopted elsewhere (``okapikv.core.session.adopt``). A token is not a secret and not
signed: a forged one can only make its own connection wait for, or depend on, more than it wrote.
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from dataclasses import dataclass

from okapikv.core.config import MAX_DCS
from okapikv.core.messages import Session

VERSION = 1
_HEADER = struct.Struct(">BBBI")
_CHECKSUM = struct.Struct(">I")
MAX_TOKEN_BYTES = 4 * ((_HEADER.size + 8 * MAX_DCS + 8 + _CHECKSUM.size) // 3 + 1)


class TokenError(ValueError):
    """A token that cannot be adopted here; the message says why."""


@dataclass(frozen=True, slots=True)
class SessionToken:
    dc: int
    session: Session


def cluster_tag(cluster_id: str) -> int:
    return zlib.crc32(cluster_id.encode())


def encode_token(session: Session, dc: int, cluster_id: str) -> bytes:
    count = len(session.stable)
    if not 0 < count <= MAX_DCS or not 0 <= dc < count:
        raise ValueError(f"a session of DC {dc} of {count} DCs cannot be encoded")
    body = _HEADER.pack(VERSION, dc, count, cluster_tag(cluster_id)) + struct.pack(
        f">{count + 1}Q", *session.stable, session.dt)
    return base64.urlsafe_b64encode(body + _CHECKSUM.pack(zlib.crc32(body))).rstrip(b"=")


def decode_token(token: bytes, *, cluster_id: str, num_dcs: int) -> SessionToken:
    """The session in ``token``; ``TokenError`` naming what is wrong with it otherwise."""
    if len(token) > MAX_TOKEN_BYTES:
        raise TokenError("invalid session token: too long")
    try:
        raw = base64.b64decode(token + b"=" * (-len(token) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise TokenError("invalid session token: not the base64 text OKAPI.SESSION returns") from None
    if len(raw) < _HEADER.size + 8 + _CHECKSUM.size:
        raise TokenError("invalid session token: too short")
    body, (checksum,) = raw[:-_CHECKSUM.size], _CHECKSUM.unpack(raw[-_CHECKSUM.size:])
    if zlib.crc32(body) != checksum:
        raise TokenError("invalid session token: checksum mismatch (cut or garbled)")
    version, dc, count, tag = _HEADER.unpack(body[:_HEADER.size])
    if version != VERSION:
        raise TokenError(f"session token version {version} is not supported (this server reads version {VERSION})")
    if len(body) != _HEADER.size + 8 * (count + 1):
        raise TokenError("invalid session token: wrong length")
    if tag != cluster_tag(cluster_id):
        raise TokenError("session token of another cluster")
    if count != num_dcs:
        raise TokenError(f"session token of a cluster of {count} DCs; this one has {num_dcs}")
    if dc >= count:
        raise TokenError(f"invalid session token: DC {dc} out of range")
    values = struct.unpack(f">{count + 1}Q", body[_HEADER.size:])
    return SessionToken(dc, Session(tuple(values[:count]), values[count]))
