"""Throwaway certificate authorities and certificates for the TLS tests (made with `cryptography`).

Each test makes its own CA in a temporary folder, so no key material lives in the repository and a
test of "a certificate from another CA is refused" simply makes a second CA. EC P-256 keys: fast
to generate, and what a modern deployment would use.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from okapikv.tls import ClientTls, TlsConfig

VALID_DAYS = 2


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    return path


@dataclass(frozen=True)
class Issued:
    certificate: Path
    key: Path


@dataclass
class CertificateAuthority:
    name: str
    directory: Path
    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @property
    def path(self) -> Path:
        return self.directory / f"{self.name}-ca.pem"

    @classmethod
    def create(cls, directory: Path, name: str = "okapi-test") -> CertificateAuthority:
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA")])
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256())
        )
        authority = cls(name, directory, key, certificate)
        authority.path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return authority

    def issue(self, name: str, *, ips: tuple[str, ...] = ("127.0.0.1",), dns: tuple[str, ...] = ("localhost",),
              server: bool = True, client: bool = True) -> Issued:
        """A leaf certificate for ``name`` (serverAuth and/or clientAuth) and its key, as PEM files."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
            [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
        names: list[x509.GeneralName] = [x509.DNSName(host) for host in dns]
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        certificate_path = self.directory / f"{self.name}-{name}.pem"
        certificate_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return Issued(certificate_path, _write_key(key, self.directory / f"{self.name}-{name}-key.pem"))

    def server_tls(self, issued: Issued, *, client_auth: bool = True) -> TlsConfig:
        return TlsConfig(str(self.path), str(issued.certificate), str(issued.key), client_auth=client_auth)

    def client_tls(self, issued: Issued | None = None) -> ClientTls:
        if issued is None:
            return ClientTls(ca=str(self.path))
        return ClientTls(ca=str(self.path), certificate=str(issued.certificate), key=str(issued.key))
