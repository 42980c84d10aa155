"""TLS for every okapikv connection: the client API, the peer links and the metrics endpoint.

Why one module: servers, `okapi status`, the health checks and the client library all open the
same kind of channel, and each must refuse the same things, so the rules live in one place:

- a cluster with a ``[tls]`` section serves its client API over TLS only (a plaintext client fails
  its handshake); with ``client_auth = true`` a client must also present a certificate signed by
  the cluster's CA;
- peer links always use mutual TLS when TLS is on: each server presents its certificate (so it
  must allow both the serverAuth and clientAuth extended key usages) and checks the other's
  against the CA. A peer whose certificate comes from another CA fails the handshake and never
  reaches the protocol; one with a valid certificate but another cluster's id is then refused by
  the Peer service (``servicers.PeerServicer``);
- gRPC checks the server certificate against the host it dials (an IP address needs an IP
  subjectAltName) unless ``server_name`` names the one host name every server certificate carries.

Files are read when a server starts or a client connects, not when a config is loaded: `okapi
status` on an operator's machine can load a cluster config whose private keys only exist on the
servers. A missing or unreadable file raises ``ValueError`` naming the file and the setting.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio

ChannelOptions = Sequence[tuple[str, object]]


@dataclass(frozen=True, slots=True)
class ClientTls:
    """What a client (or a server dialing a peer) needs: the CA to trust and, for mutual TLS, its own
    certificate and key. ``server_name`` overrides the host name expected in server certificates."""

    ca: str
    certificate: str | None = None
    key: str | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.certificate is None) != (self.key is None):
            raise ValueError("a TLS client certificate needs its key, and a key its certificate")


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """The ``[tls]`` section of a cluster config (paths to PEM files).

    ``client_auth`` (default true: secure unless told otherwise) makes the client API demand a
    certificate signed by ``ca`` too. With ``client_auth = false`` the client API accepts any TLS
    client, so peer links need a listener of their own that does demand one: every server then
    needs a ``peer_address`` (checked by the config).
    """

    ca: str
    certificate: str
    key: str
    client_auth: bool = True
    server_name: str | None = None

    def client_side(self) -> ClientTls:
        """This server's identity as a client: for peer links, health checks and `okapi status`."""
        return ClientTls(ca=self.ca, certificate=self.certificate, key=self.key, server_name=self.server_name)

    def resolved(self, directory: Path) -> TlsConfig:
        """Relative paths taken from ``directory`` (the config file's folder), so a config and its
        certificates can move together."""

        def absolute(path: str) -> str:
            candidate = Path(path).expanduser()
            return str(candidate if candidate.is_absolute() else (directory / candidate).resolve())

        return TlsConfig(absolute(self.ca), absolute(self.certificate), absolute(self.key), self.client_auth,
                         self.server_name)


def read_pem(path: str, setting: str) -> bytes:
    """The bytes of a PEM file; ``ValueError`` naming the setting when it cannot be read."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ValueError(f"tls {setting}: cannot read {path!r}: {error.strerror or error}") from None
    if b"-----BEGIN" not in data:
        raise ValueError(f"tls {setting}: {path!r} is not a PEM file")
    return data


# -------------------------------------------------------------------- gRPC credentials


def server_credentials(tls: TlsConfig, *, require_client_auth: bool) -> grpc.ServerCredentials:
    """Credentials for a listening port. The CA is always loaded: it is what verifies client
    certificates when they are required."""
    return grpc.ssl_server_credentials(
        [(read_pem(tls.key, "key"), read_pem(tls.certificate, "certificate"))],
        root_certificates=read_pem(tls.ca, "ca"),
        require_client_auth=require_client_auth,
    )


def channel_credentials(tls: ClientTls) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=read_pem(tls.ca, "ca"),
        private_key=read_pem(tls.key, "key") if tls.key else None,
        certificate_chain=read_pem(tls.certificate, "certificate") if tls.certificate else None,
    )


def channel_options(options: ChannelOptions, tls: ClientTls | None) -> list[tuple[str, object]]:
    """``options`` plus the target-name override when the certificates name a fixed host."""
    result = list(options)
    if tls is not None and tls.server_name:
        result.append(("grpc.ssl_target_name_override", tls.server_name))
    return result


def open_channel(address: str, tls: ClientTls | None = None, options: ChannelOptions = ()) -> grpc.Channel:
    """A blocking-API channel: plaintext without ``tls``, TLS (mutual if it has a certificate) with it."""
    if tls is None:
        return grpc.insecure_channel(address, options=list(options))
    return grpc.secure_channel(address, channel_credentials(tls), options=channel_options(options, tls))


def open_aio_channel(address: str, tls: ClientTls | None = None, options: ChannelOptions = ()) -> grpc.aio.Channel:
    """The grpc.aio twin of ``open_channel``."""
    if tls is None:
        return grpc.aio.insecure_channel(address, options=list(options))
    return grpc.aio.secure_channel(address, channel_credentials(tls), options=channel_options(options, tls))


def client_tls_from_args(ca: str | None, certificate: str | None, key: str | None,
                         server_name: str | None = None) -> ClientTls | None:
    """Command-line TLS flags as a ``ClientTls`` (None when no CA is given, i.e. plaintext)."""
    if ca is None:
        if certificate or key or server_name:
            raise ValueError("--tls-cert, --tls-key and --tls-server-name need --tls-ca")
        return None
    return ClientTls(ca=ca, certificate=certificate, key=key, server_name=server_name)


# -------------------------------------------------------------------- plain TLS (the metrics endpoint)


def server_ssl_context(tls: TlsConfig, *, require_client_auth: bool) -> ssl.SSLContext:
    """An ``ssl`` context for non-gRPC listeners (the metrics endpoint), with the same rules."""
    for path, setting in ((tls.certificate, "certificate"), (tls.key, "key"), (tls.ca, "ca")):
        read_pem(path, setting)  # the same precise error as the gRPC side
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(tls.certificate, tls.key)
    if require_client_auth:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=tls.ca)
    return context


def client_ssl_context(tls: ClientTls) -> ssl.SSLContext:
    """An ``ssl`` client context (scraping a TLS metrics endpoint in tests and tools)."""
    context = ssl.create_default_context(cafile=tls.ca)
    if tls.certificate and tls.key:
        context.load_cert_chain(tls.certificate, tls.key)
    return context
