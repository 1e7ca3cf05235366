"""The serving certificate and the TLS context, as kube-scheduler sets them up.

``--tls-cert-file``/``--tls-private-key-file`` are served as given. Without them a self-signed
pair is made at start, as apiserver's ``MaybeDefaultWithSelfSignedCerts`` makes it: a CA
(``localhost-ca@<unix time>``) and a serving certificate it signs (``localhost@<unix time>``,
for ``localhost``, 127.0.0.1 and the bind address), RSA 2048, valid from an hour ago for a
year, the certificate file holding the serving certificate then the CA. With ``--cert-dir``
the pair is kept there as ``kube-scheduler.crt``/``.key`` and reused by the next start;
without, it lives only in the process (Python's ssl module loads a pair only from files, so it
passes through a private temporary directory that is removed at once).

Client certificates are asked for (not required) when a client CA is known; a certificate that
the CA did not sign fails the handshake.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
import time
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: kube-scheduler's ``ServerCert.PairName``: the file names under ``--cert-dir``.
PAIR_NAME = "kube-scheduler"
SELF_SIGNED_HOST = "localhost"
VALID_FOR = datetime.timedelta(days=365)
BACKDATE = datetime.timedelta(hours=1)  # clock skew between the scheduler and its clients


class TLSConfigError(Exception):
    """A certificate, key or CA bundle that cannot be used, named with the flag and file."""


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def self_signed_pair(bind_address: str = "") -> tuple[bytes, bytes]:
    """A fresh (certificate chain PEM, private key PEM) pair, as kube-scheduler generates it."""
    alternate_ips: list[IPAddress] = [ipaddress.IPv4Address("127.0.0.1")]
    alternate_dns: list[str] = []
    address = ipaddress.ip_address(bind_address) if bind_address else None
    if address is None or address.is_unspecified:
        alternate_dns.append(SELF_SIGNED_HOST)
    else:
        alternate_ips.append(address)
    now = datetime.datetime.now(datetime.UTC)
    not_before = now - BACKDATE
    stamp = int(time.time())

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{SELF_SIGNED_HOST}-ca@{stamp}")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_before + VALID_FOR)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    names: list[x509.GeneralName] = [
        x509.DNSName(d) for d in dict.fromkeys([SELF_SIGNED_HOST, *alternate_dns])
    ]
    names += [x509.IPAddress(ip) for ip in dict.fromkeys(alternate_ips)]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{SELF_SIGNED_HOST}@{stamp}")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_before + VALID_FOR)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    chain = cert.public_bytes(serialization.Encoding.PEM) + ca_cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,  # "RSA PRIVATE KEY", as kube writes it
        serialization.NoEncryption(),
    )
    return chain, key_pem


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=True,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


def ca_bundle(pem: bytes, source: str) -> bytes:
    """``pem`` when it holds at least one certificate; raises :class:`TLSConfigError` naming ``source``."""
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError:
        certs = []
    if not certs:  # certutil.ParseCertsPEM's message
        raise TLSConfigError(f"{source}: data does not contain any valid RSA or ECDSA certificates")
    return pem


def read_file(path: str, flag: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise TLSConfigError(f"{flag} {path}: {err.strerror or err}") from err


def server_context(
    *,
    cert_file: str = "",
    key_file: str = "",
    cert_dir: str = "",
    bind_address: str = "",
    client_ca: bytes | None = None,
) -> tuple[ssl.SSLContext, str]:
    """The TLS context to serve with, and where its certificate came from (for the log)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2  # Go's and kube's default minimum
    if cert_file:
        _load_pair(
            ctx, cert_file, key_file, f"--tls-cert-file {cert_file}, --tls-private-key-file {key_file}"
        )
        where = f"certificate {cert_file}"
    elif cert_dir:
        where = _pair_in_dir(ctx, cert_dir, bind_address)
    else:
        chain, key = self_signed_pair(bind_address)
        with tempfile.TemporaryDirectory(prefix="koordsched-tls-") as tmp:
            cert_path, key_path = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
            _write_private(cert_path, chain)
            _write_private(key_path, key)
            _load_pair(ctx, cert_path, key_path, "the generated self-signed certificate")
        where = "a self-signed certificate generated in memory"
    if client_ca:
        ctx.load_verify_locations(cadata=client_ca.decode("ascii", errors="replace"))
        ctx.verify_mode = ssl.CERT_OPTIONAL
    else:
        ctx.verify_mode = ssl.CERT_NONE
    return ctx, where


def _pair_in_dir(ctx: ssl.SSLContext, cert_dir: str, bind_address: str) -> str:
    cert_path = os.path.join(cert_dir, f"{PAIR_NAME}.crt")
    key_path = os.path.join(cert_dir, f"{PAIR_NAME}.key")
    what = f"--cert-dir {cert_dir}"
    if not (os.path.isfile(cert_path) and os.path.isfile(key_path)):
        chain, key = self_signed_pair(bind_address)
        try:
            os.makedirs(cert_dir, mode=0o755, exist_ok=True)
            _write_private(cert_path, chain, mode=0o644)
            _write_private(key_path, key)
        except OSError as err:
            raise TLSConfigError(f"{what}: cannot write the self-signed certificate: {err}") from err
        _load_pair(ctx, cert_path, key_path, what)
        return f"a self-signed certificate generated into {cert_path}"
    _load_pair(ctx, cert_path, key_path, what)
    return f"certificate {cert_path}"


def _load_pair(ctx: ssl.SSLContext, cert_path: str, key_path: str, what: str) -> None:
    try:
        ctx.load_cert_chain(cert_path, key_path)
    except FileNotFoundError as err:
        raise TLSConfigError(f"{what}: {err.filename}: no such file") from err
    except (ssl.SSLError, OSError) as err:
        raise TLSConfigError(f"{what}: not a usable certificate and matching private key: {err}") from err


def _write_private(path: str, data: bytes, mode: int = 0o600) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
