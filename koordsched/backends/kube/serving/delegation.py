"""The connections delegated authn/authz use, and the client CA looked up in the cluster.

As kube-scheduler: ``--authentication-kubeconfig`` and ``--authorization-kubeconfig`` name
the API server that reviews tokens and access (empty: here, the scheduler's own connection;
kube-scheduler would try in-cluster config only). Without a usable connection tokens are
ignored and only the always-allowed paths answer. The client CA is ``--client-ca-file``, else
(unless ``--authentication-skip-lookup``) ``client-ca-file`` of the ConfigMap
``kube-system/extension-apiserver-authentication``, read once at start; a failed lookup only
turns client certificates off unless ``--authentication-tolerate-lookup-failure=false``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import msgspec

from koordsched.backends.kube.client import (
    TRANSPORT_ERRORS,
    ApiError,
    ClientConfigError,
    KubeClient,
    build_client,
)
from koordsched.backends.kube.lifecycle import EXIT_FAILURE, EXIT_INVALID
from koordsched.backends.kube.serving.authn import Authenticator, TokenReviewer
from koordsched.backends.kube.serving.authz import AccessReviewer, Authorizer
from koordsched.backends.kube.serving.options import ServingOptions
from koordsched.backends.kube.serving.tls import TLSConfigError, ca_bundle, read_file
from koordsched.observability.metrics import RestClientMetrics

log = logging.getLogger(__name__)

CONFIGMAP_NAMESPACE = "kube-system"
CONFIGMAP_NAME = "extension-apiserver-authentication"
CONFIGMAP_PATH = f"/api/v1/namespaces/{CONFIGMAP_NAMESPACE}/configmaps/{CONFIGMAP_NAME}"
CONFIGMAP_KEY = "client-ca-file"
READER_ROLE = "extension-apiserver-authentication-reader"
LOOKUP_TIMEOUT = 10.0
#: apiserver gives its delegation clients a high limit: it bounds how fast the port answers.
QPS, BURST = 200.0, 400


class DelegationError(Exception):
    """Delegation cannot be set up; ``code`` is the exit status (2 for a bad flag or file)."""

    def __init__(self, message: str, code: int = EXIT_INVALID) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Delegation:
    authenticator: Authenticator
    authorizer: Authorizer
    client_ca: bytes | None
    clients: list[KubeClient] = field(default_factory=list)

    async def close(self) -> None:
        for c in self.clients:
            await c.close()


async def delegate(
    options: ServingOptions, *, default_kubeconfig: str | None, metrics: RestClientMetrics | None = None
) -> Delegation:
    """Connect, look the client CA up, and build the authenticator and authorizer."""
    authn, authz = options.authentication, options.authorization
    clients: dict[str, KubeClient | None] = {}
    try:
        authn_client = await _client(clients, authn.kubeconfig, "authentication", default_kubeconfig, metrics)
        authz_client = await _client(clients, authz.kubeconfig, "authorization", default_kubeconfig, metrics)
        client_ca = await _client_ca(options, authn_client)
    except BaseException:
        for c in clients.values():
            if c is not None:
                await c.close()
        raise
    tokens = TokenReviewer(authn_client, ttl=authn.cache_ttl, timeout=authn.timeout) if authn_client else None
    reviewer = (
        AccessReviewer(
            authz_client,
            allow_ttl=authz.allow_cache_ttl,
            deny_ttl=authz.deny_cache_ttl,
            timeout=authz.timeout,
        )
        if authz_client
        else None
    )
    if reviewer is None:
        log.warning(
            "No authorization-kubeconfig provided, so SubjectAccessReview of authorization tokens won't work."
        )
    authorizer = Authorizer(
        always_allow_paths=authz.always_allow_paths,
        always_allow_groups=authz.always_allow_groups,
        reviewer=reviewer,
    )
    return Delegation(
        Authenticator(tokens), authorizer, client_ca, [c for c in clients.values() if c is not None]
    )


async def _client(
    clients: dict[str, KubeClient | None],
    flag_value: str,
    what: str,
    default_kubeconfig: str | None,
    metrics: RestClientMetrics | None,
) -> KubeClient | None:
    """A client for ``--<what>-kubeconfig``, else the scheduler's own connection (shared when the same)."""
    source = flag_value or default_kubeconfig or ""
    if source in clients:
        return clients[source]
    try:
        client: KubeClient | None = await build_client(source or None, qps=QPS, burst=BURST, metrics=metrics)
    except ClientConfigError as err:
        if flag_value:
            raise DelegationError(f"failed to get delegated {what} kubeconfig: {err}") from err
        # The scheduler's own connection: the run fails on it right after, with this message.
        log.warning("no connection for delegated %s: %s", what, err)
        client = None
    clients[source] = client
    return client


async def _client_ca(options: ServingOptions, client: KubeClient | None) -> bytes | None:
    authn = options.authentication
    if authn.client_ca_file:
        try:
            return ca_bundle(
                read_file(authn.client_ca_file, "--client-ca-file"),
                f"--client-ca-file {authn.client_ca_file}",
            )
        except TLSConfigError as err:
            raise DelegationError(str(err)) from err
    if authn.skip_lookup:
        return None
    if client is None:
        log.warning(
            "No authentication-kubeconfig provided in order to lookup client-ca-file in configmap/%s in %s, "
            "so client certificate authentication won't work.",
            CONFIGMAP_NAME,
            CONFIGMAP_NAMESPACE,
        )
        return None
    try:
        return await lookup_client_ca(client)
    except LookupFailed as err:
        if not authn.tolerate_lookup_failure:
            raise DelegationError(
                f"unable to load configmap based client-ca-file: {err}", code=EXIT_FAILURE
            ) from err
        log.warning("Error looking up in-cluster authentication configuration: %s", err)
        log.warning(
            "Continuing without authentication configuration. This may treat all requests as anonymous."
        )
        log.warning(
            "To require authentication configuration lookup to succeed, "
            "set --authentication-tolerate-lookup-failure=false"
        )
        return None


class LookupFailed(Exception):
    pass


class _ConfigMap(msgspec.Struct):
    data: dict[str, str] | None = None


async def lookup_client_ca(client: KubeClient) -> bytes | None:
    """``client-ca-file`` of the authentication ConfigMap; None when the map or the key is absent."""
    try:
        raw = await client.request_bytes("GET", CONFIGMAP_PATH, request_timeout=LOOKUP_TIMEOUT)
    except ApiError as err:
        if err.status == 404:
            return None
        if err.status == 403:
            log.warning(
                "Unable to get configmap/%s in %s.  Usually fixed by 'kubectl create rolebinding "
                "-n %s ROLEBINDING_NAME --role=%s --serviceaccount=YOUR_NS:YOUR_SA'",
                CONFIGMAP_NAME,
                CONFIGMAP_NAMESPACE,
                CONFIGMAP_NAMESPACE,
                READER_ROLE,
            )
        raise LookupFailed(str(err)) from err
    except TRANSPORT_ERRORS as err:
        raise LookupFailed(f"GET {CONFIGMAP_PATH}: {type(err).__name__}: {err}") from err
    try:
        data = msgspec.json.decode(raw, type=_ConfigMap).data or {}
    except msgspec.DecodeError as err:
        raise LookupFailed(f"configmap/{CONFIGMAP_NAME} in {CONFIGMAP_NAMESPACE}: {err}") from err
    pem = data.get(CONFIGMAP_KEY, "")
    if not pem:
        return None
    try:
        return ca_bundle(
            pem.encode(), f"configmap/{CONFIGMAP_NAME} in {CONFIGMAP_NAMESPACE}, key {CONFIGMAP_KEY}"
        )
    except TLSConfigError as err:
        raise LookupFailed(str(err)) from err
