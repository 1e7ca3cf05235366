"""The secure port end to end, in process: HTTPS, who gets 401/403/500, kube's bodies, client certificates.

The API server's side is :class:`FakeAuthServer`; the real one is in tests/e2e/test_secure_serving.py.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from koordsched.backends.kube.debug_routes import CPU_PROFILER
from koordsched.backends.kube.serving.delegation import DelegationError
from koordsched.backends.kube.serving.options import (
    AuthenticationOptions,
    AuthorizationOptions,
    ServingOptions,
)
from koordsched.backends.kube.serving.servers import Servers, build_servers
from koordsched.backends.kube.serving.tls import PAIR_NAME, TLSConfigError
from koordsched.observability.health import HANDLER_SYNC, HealthChecks
from koordsched.observability.metrics import SchedulerMetrics
from tests.kube.fake_auth import CONFIGMAP, SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS, FakeAuthServer

Serve = Callable[..., Awaitable[Servers]]
Answer = tuple[int, dict[str, str], bytes]


@pytest.fixture
async def auth() -> AsyncIterator[FakeAuthServer]:
    server = FakeAuthServer(tokens={"scraper": ("prometheus", ["monitoring"]), "nobody": ("nobody", [])})
    server.allowed.add(("prometheus", "get", "/metrics"))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
def kubeconfig(auth: FakeAuthServer, tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(auth.kubeconfig())
    return str(path)


@pytest.fixture
async def serve(kubeconfig: str) -> AsyncIterator[Serve]:
    started: list[Servers] = []

    async def start(**overrides: Any) -> Servers:
        authn = overrides.pop("authentication", AuthenticationOptions())
        authz = overrides.pop("authorization", AuthorizationOptions())
        profiling = overrides.pop("profiling", False)
        set_verbosity = overrides.pop("set_verbosity", None)
        options = ServingOptions(
            bind_address="127.0.0.1",
            secure_port=free_port(),
            authentication=authn,
            authorization=authz,
            **overrides,
        )
        options.validate()
        health = HealthChecks()
        health.set_ready(HANDLER_SYNC, True)
        servers = await build_servers(
            options,
            health=health,
            metrics=SchedulerMetrics(),
            config=lambda: {"componentconfig": {"kind": "KubeSchedulerConfiguration"}},
            default_kubeconfig=kubeconfig,
            profiling=profiling,
            set_verbosity=set_verbosity,
        )
        await servers.start()
        started.append(servers)
        return servers

    try:
        yield start
    finally:
        for s in started:
            await s.close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def insecure() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def get(
    servers: Servers,
    path: str,
    *,
    token: str | None = None,
    method: str = "GET",
    ctx: ssl.SSLContext | None = None,
    data: bytes | None = None,
) -> Answer:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = f"https://127.0.0.1:{servers.secure_port}{path}"
    async with (
        aiohttp.ClientSession() as s,
        s.request(method, url, headers=headers, data=data, ssl=ctx or insecure()) as r,
    ):
        return r.status, dict(r.headers), await r.read()


def status_body(code: int, reason: str, message: str, *, details: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details:
        body["details"] = {}
    return {**body, "code": code}


# --- who gets what ----------------------------------------------------------------------------


async def test_anonymous_requests_get_only_the_health_paths(serve: Serve, auth: FakeAuthServer) -> None:
    servers = await serve()
    for path in ("/healthz", "/livez", "/readyz"):
        code, headers, body = await get(servers, path)
        assert (code, body) == (200, b"ok"), path
        assert headers["Cache-Control"] == "no-cache, private"
    for path in ("/metrics", "/metrics/resources", "/configz", "/livez/ping", "/nothing"):
        code, headers, body = await get(servers, path)
        assert code == 403, path
        assert headers["Content-Type"] == "application/json"
        assert headers["X-Content-Type-Options"] == "nosniff"
        message = f'forbidden: User "system:anonymous" cannot get path "{path}"'
        assert json.loads(body) == status_body(403, "Forbidden", message, details=True)
    sar = auth.reviews[-1]["spec"]
    assert sar["user"] == "system:anonymous" and sar["groups"] == ["system:unauthenticated"]


async def test_a_token_with_the_permission_reads_metrics_only(serve: Serve, auth: FakeAuthServer) -> None:
    servers = await serve()
    code, headers, body = await get(servers, "/metrics", token="scraper")
    assert code == 200 and b"scheduler_schedule_attempts_total" in body
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    code, _, body = await get(servers, "/configz", token="scraper")
    assert code == 403
    assert json.loads(body)["message"] == 'forbidden: User "prometheus" cannot get path "/configz"'
    code, _, body = await get(servers, "/metrics", token="nobody")
    assert code == 403
    assert json.loads(body)["message"] == 'forbidden: User "nobody" cannot get path "/metrics"'
    # HEAD is its own verb, as in kube-scheduler: "get /metrics" does not cover it.
    code, _, _ = await get(servers, "/metrics", token="scraper", method="HEAD")
    assert code == 403
    assert auth.reviews[-1]["spec"]["nonResourceAttributes"] == {"path": "/metrics", "verb": "head"}


async def test_metrics_resources_needs_its_own_permission(serve: Serve, auth: FakeAuthServer) -> None:
    """kube-scheduler's /metrics/resources: reviewed as "get /metrics/resources", not covered by
    "get /metrics"; with it, the pod resource families only."""
    auth.tokens["reader"] = ("resources-reader", [])
    auth.allowed.add(("resources-reader", "get", "/metrics/resources"))
    servers = await serve()
    code, _, body = await get(servers, "/metrics/resources", token="scraper")
    assert code == 403
    message = 'forbidden: User "prometheus" cannot get path "/metrics/resources"'
    assert json.loads(body)["message"] == message
    assert (await get(servers, "/metrics", token="reader"))[0] == 403
    code, headers, body = await get(servers, "/metrics/resources", token="reader")
    assert code == 200, body
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert b"# TYPE kube_pod_resource_request gauge" in body
    assert b"scheduler_" not in body


DEBUG_PATHS = (
    ("GET", "/debug/pprof/"),
    ("GET", "/debug/pprof/profile"),
    ("GET", "/debug/pprof/heap"),
    ("GET", "/debug/pprof/goroutine"),
    ("GET", "/debug/pprof/cmdline"),
    ("PUT", "/debug/flags/v"),
)


async def test_debug_paths_are_guarded_as_configz(serve: Serve, auth: FakeAuthServer) -> None:
    levels: list[int] = []
    servers = await serve(profiling=True, set_verbosity=levels.append)
    auth.tokens["debugger"] = ("debugger", [])
    auth.allowed.update({("debugger", "get", "/debug/pprof/cmdline"), ("debugger", "put", "/debug/flags/v")})
    for method, path in DEBUG_PATHS:
        verb = method.lower()
        # Anonymous, as /configz: 403 with apiserver's message, before anything is profiled.
        code, _, body = await get(servers, path, method=method)
        assert code == 403, path
        message = f'forbidden: User "system:anonymous" cannot {verb} path "{path}"'
        assert json.loads(body) == status_body(403, "Forbidden", message, details=True)
        # A token the API server does not know: 401.
        code, _, body = await get(servers, path, token="forged", method=method)
        assert (code, json.loads(body)) == (401, status_body(401, "Unauthorized", "Unauthorized")), path
        # The metrics scraper may read /metrics, not these.
        code, _, body = await get(servers, path, token="scraper", method=method)
        assert code == 403, path
        assert json.loads(body)["message"] == f'forbidden: User "prometheus" cannot {verb} path "{path}"'
    assert not any(s.app[CPU_PROFILER].busy for s in servers.servers if s.ssl_context is not None)
    assert levels == []
    # Allowed exactly what it was granted: the verb is the method's ("put" for the flag).
    assert (await get(servers, "/debug/pprof/cmdline", token="debugger"))[0] == 200
    assert (await get(servers, "/debug/pprof/goroutine", token="debugger"))[0] == 403
    code, _, body = await get(servers, "/debug/flags/v", token="debugger", method="PUT", data=b"5")
    assert (code, body) == (200, b"successfully set klog.logging.verbosity to 5\n")
    assert levels == [5]
    code, _, _ = await get(servers, "/debug/flags/v", token="debugger")
    assert code == 403  # "get" is another verb, refused before the handler's 406


async def test_debug_paths_are_absent_without_profiling(serve: Serve, auth: FakeAuthServer) -> None:
    auth.tokens["admin"] = ("admin", ["system:masters"])
    servers = await serve(set_verbosity=print)
    for method, path in DEBUG_PATHS:
        assert (await get(servers, path, token="admin", method=method))[0] == 404, path
    assert (await get(servers, "/configz", token="admin"))[0] == 200


async def test_a_bad_token_is_401_even_on_health_paths(serve: Serve) -> None:
    servers = await serve()
    for path in ("/metrics", "/livez"):
        code, headers, body = await get(servers, path, token="forged")
        assert code == 401, path
        assert json.loads(body) == status_body(401, "Unauthorized", "Unauthorized")
        assert headers["Content-Type"] == "application/json"


async def test_answers_are_cached_briefly(serve: Serve, auth: FakeAuthServer) -> None:
    servers = await serve()
    for _ in range(5):
        assert (await get(servers, "/metrics", token="scraper"))[0] == 200
    assert auth.calls[TOKEN_REVIEWS] == 1
    assert auth.calls[SUBJECT_ACCESS_REVIEWS] == 1
    for _ in range(3):
        assert (await get(servers, "/metrics"))[0] == 403
    assert auth.calls[SUBJECT_ACCESS_REVIEWS] == 2


async def test_a_failing_access_review_is_500_and_the_port_keeps_serving(
    serve: Serve, auth: FakeAuthServer
) -> None:
    servers = await serve(authorization=AuthorizationOptions(timeout=0.3))
    auth.stall.add(SUBJECT_ACCESS_REVIEWS)
    t0 = time.monotonic()
    code, headers, body = await get(servers, "/metrics", token="scraper")
    assert time.monotonic() - t0 < 3
    assert code == 500
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert body.startswith(b'Internal Server Error: "/metrics": SubjectAccessReview failed: POST ')
    assert (await get(servers, "/livez"))[0] == 200  # no review needed
    auth.stall.clear()
    assert (await get(servers, "/metrics", token="scraper"))[0] == 200


async def test_a_failing_token_review_is_401(serve: Serve, auth: FakeAuthServer) -> None:
    servers = await serve(authentication=AuthenticationOptions(timeout=0.3))
    auth.stall.add(TOKEN_REVIEWS)
    t0 = time.monotonic()
    assert (await get(servers, "/metrics", token="scraper"))[0] == 401
    assert time.monotonic() - t0 < 3
    assert (await get(servers, "/healthz"))[0] == 200


async def raw_get(port: int | None, target: str) -> int:
    """The status of a GET sent as written (HTTP clients normalize ``..`` away)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=insecure())
    try:
        writer.write(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        status_line = await reader.readline()
        return int(status_line.split()[1])
    finally:
        writer.close()


async def test_paths_the_router_would_not_serve_are_refused_first(serve: Serve) -> None:
    servers = await serve(authorization=AuthorizationOptions(always_allow_paths=("/livez*",)))
    port = servers.secure_port
    # The path authorized is the path routed: a prefix rule cannot be walked out of.
    assert await raw_get(port, "/livez/../metrics") == 404
    assert await raw_get(port, "/livez/%2e%2e/metrics") == 404
    assert await raw_get(port, "/livez/..%2fmetrics") == 404
    assert await raw_get(port, "/%6detrics") == 403  # decoded, as Go decodes URL.Path
    assert await raw_get(port, "//metrics") == 403
    assert await raw_get(port, "/livez/ping") == 200
    assert await raw_get(port, "/metrics") == 403


async def test_always_allow_paths_can_be_cleared(serve: Serve) -> None:
    servers = await serve(authorization=AuthorizationOptions(always_allow_paths=()))
    assert (await get(servers, "/livez"))[0] == 403


async def test_privileged_group_needs_no_access_review(serve: Serve, auth: FakeAuthServer) -> None:
    auth.tokens["admin"] = ("admin", ["system:masters"])
    servers = await serve()
    assert (await get(servers, "/configz", token="admin"))[0] == 200
    assert auth.calls[SUBJECT_ACCESS_REVIEWS] == 0


async def test_insecure_port_serves_health_only(serve: Serve) -> None:
    port = free_port()
    servers = await serve(insecure_port=port)
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{port}/livez") as r:
            assert (r.status, await r.text()) == (200, "ok")
        for path in ("/metrics", "/configz"):
            async with s.get(f"http://127.0.0.1:{port}{path}") as r:
                assert r.status == 404
                assert "served only over HTTPS on --secure-port" in await r.text()
    assert (await get(servers, "/livez"))[0] == 200


# --- certificates -----------------------------------------------------------------------------


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)] if cn else []
    attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name(attrs)


def make_ca(cn: str = "test-ca") -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def client_files(
    tmp_path: Path,
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    cn: str,
    orgs: tuple[str, ...] = (),
) -> tuple[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn, orgs))
        .issuer_name(ca[0].subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca[1], hashes.SHA256())
    )
    crt, pem_key = tmp_path / f"{cn or 'nocn'}.crt", tmp_path / f"{cn or 'nocn'}.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem_key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return str(crt), str(pem_key)


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def with_client_cert(files: tuple[str, str]) -> ssl.SSLContext:
    ctx = insecure()
    ctx.load_cert_chain(*files)
    return ctx


async def test_client_certificates_from_the_client_ca_file(
    serve: Serve, auth: FakeAuthServer, tmp_path: Path
) -> None:
    ca = make_ca()
    ca_file = tmp_path / "client-ca.crt"
    ca_file.write_bytes(pem(ca[0]))
    servers = await serve(authentication=AuthenticationOptions(client_ca_file=str(ca_file)))
    auth.allowed.add(("certificate-group", "get", "/configz"))
    ok = with_client_cert(client_files(tmp_path, ca, "carol", ("certificate-group", "other")))
    code, _, body = await get(servers, "/configz", ctx=ok)
    assert code == 200, body
    spec = auth.reviews[-1]["spec"]
    assert spec["user"] == "carol"
    assert spec["groups"] == ["certificate-group", "other", "system:authenticated"]
    assert auth.calls[TOKEN_REVIEWS] == 0
    assert auth.calls[CONFIGMAP] == 0  # --client-ca-file given: no lookup
    # A certificate without a CommonName names nobody: the token decides, else anonymous.
    nameless = with_client_cert(client_files(tmp_path, ca, "", ("certificate-group",)))
    assert (await get(servers, "/configz", ctx=nameless))[0] == 403
    assert (await get(servers, "/metrics", ctx=nameless, token="scraper"))[0] == 200
    # A certificate the CA did not sign never gets through the handshake.
    stranger = with_client_cert(client_files(tmp_path, make_ca("other-ca"), "carol"))
    with pytest.raises(aiohttp.ClientError):
        await get(servers, "/configz", ctx=stranger)
    assert (await get(servers, "/livez"))[0] == 200  # and the port serves on


async def test_client_ca_from_the_cluster(serve: Serve, auth: FakeAuthServer, tmp_path: Path) -> None:
    ca = make_ca()
    auth.configmap = {"data": {"client-ca-file": pem(ca[0]).decode()}}
    auth.allowed.add(("carol", "get", "/metrics"))
    servers = await serve()
    assert auth.calls[CONFIGMAP] == 1
    ctx = with_client_cert(client_files(tmp_path, ca, "carol"))
    assert (await get(servers, "/metrics", ctx=ctx))[0] == 200


async def test_skip_lookup_skips_it(serve: Serve, auth: FakeAuthServer) -> None:
    auth.configmap = 500
    await serve(authentication=AuthenticationOptions(skip_lookup=True))
    assert auth.calls[CONFIGMAP] == 0


@pytest.mark.parametrize("answer", [403, 500, {"data": {"client-ca-file": "not a certificate"}}])
async def test_a_failed_lookup_is_tolerated_by_default(
    serve: Serve, auth: FakeAuthServer, answer: int | dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    auth.configmap = answer
    servers = await serve()
    assert (await get(servers, "/metrics", token="scraper"))[0] == 200  # tokens still work
    assert "Error looking up in-cluster authentication configuration" in caplog.text
    if answer == 403:
        assert "--role=extension-apiserver-authentication-reader" in caplog.text


async def test_a_failed_lookup_stops_the_start_when_not_tolerated(serve: Serve, auth: FakeAuthServer) -> None:
    auth.configmap = 403
    with pytest.raises(DelegationError, match=r"unable to load configmap based client-ca-file: .*403") as err:
        await serve(authentication=AuthenticationOptions(tolerate_lookup_failure=False))
    assert err.value.code == 1


async def test_an_absent_configmap_is_no_client_ca(serve: Serve, auth: FakeAuthServer) -> None:
    servers = await serve(authentication=AuthenticationOptions(tolerate_lookup_failure=False))
    assert auth.calls[CONFIGMAP] == 1
    assert (await get(servers, "/livez"))[0] == 200


async def test_self_signed_certificate_is_kube_schedulers(serve: Serve) -> None:
    servers = await serve()
    der = await peer_certificate(servers.secure_port)
    cert = x509.load_der_x509_certificate(der)
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    assert str(cn).startswith("localhost@")
    assert str(cert.issuer.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value).startswith("localhost-ca@")
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert lifetime == datetime.timedelta(days=365)
    assert cert.not_valid_before_utc < datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=59)
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]


@pytest.mark.parametrize(
    ("bind", "dns", "ips"),
    [
        ("0.0.0.0", ["localhost"], ["127.0.0.1"]),
        ("", ["localhost"], ["127.0.0.1"]),
        ("10.1.2.3", ["localhost"], ["127.0.0.1", "10.1.2.3"]),
    ],
)
def test_self_signed_names(bind: str, dns: list[str], ips: list[str]) -> None:
    from koordsched.backends.kube.serving.tls import self_signed_pair

    chain, key = self_signed_pair(bind)
    cert, ca = x509.load_pem_x509_certificates(chain)
    assert key.startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    assert cert.issuer == ca.subject and ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == dns
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ips


async def peer_certificate(port: int | None) -> bytes:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=insecure())
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        assert isinstance(der, bytes)
        return der
    finally:
        writer.close()


async def test_cert_dir_keeps_the_pair_for_the_next_start(serve: Serve, tmp_path: Path) -> None:
    cert_dir = tmp_path / "certs"
    first = await serve(cert_dir=str(cert_dir))
    assert (cert_dir / f"{PAIR_NAME}.crt").is_file()
    assert (cert_dir / f"{PAIR_NAME}.key").stat().st_mode & 0o777 == 0o600
    der = await peer_certificate(first.secure_port)
    second = await serve(cert_dir=str(cert_dir))
    assert await peer_certificate(second.secure_port) == der


async def test_a_given_pair_is_served_and_verifies(serve: Serve, tmp_path: Path) -> None:
    from koordsched.backends.kube.serving.tls import self_signed_pair

    chain, key = self_signed_pair("127.0.0.1")
    (tmp_path / "tls.crt").write_bytes(chain)
    (tmp_path / "tls.key").write_bytes(key)
    servers = await serve(
        tls_cert_file=str(tmp_path / "tls.crt"), tls_private_key_file=str(tmp_path / "tls.key")
    )
    ca = x509.load_pem_x509_certificates(chain)[1]
    verify = ssl.create_default_context(cadata=pem(ca).decode())
    code, _, _ = await get(servers, "/livez", ctx=verify)  # hostname 127.0.0.1 is in the certificate
    assert code == 200


async def test_a_bad_pair_is_a_clear_error(serve: Serve, tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_text("junk")
    (tmp_path / "tls.key").write_text("junk")
    with pytest.raises(TLSConfigError, match=f"--tls-cert-file {tmp_path}/tls.crt.*not a usable certificate"):
        await serve(tls_cert_file=str(tmp_path / "tls.crt"), tls_private_key_file=str(tmp_path / "tls.key"))
    with pytest.raises(TLSConfigError, match="no such file"):
        await serve(
            tls_cert_file=str(tmp_path / "missing.crt"), tls_private_key_file=str(tmp_path / "tls.key")
        )
    with pytest.raises(
        DelegationError,
        match=r"--client-ca-file .*tls\.crt: data does not contain any valid RSA or ECDSA certificates",
    ):
        await serve(authentication=AuthenticationOptions(client_ca_file=str(tmp_path / "tls.crt")))


def test_status_bodies_are_valid_json() -> None:
    from koordsched.backends.kube.serving.authn import UserInfo
    from koordsched.backends.kube.serving.filters import forbidden

    resp = forbidden(UserInfo('a"<b>'), "get", "/x", "because")
    assert resp.body is not None
    message = msgspec.json.decode(bytes(resp.body))["message"]
    assert message == 'forbidden: User "a\\"&lt;b&gt;" cannot get path "/x": because'
