"""What ``koordsched run``'s serving flags set: kube-scheduler's secure serving, authn and authz options.

Defaults are kube-scheduler's (``cmd/kube-scheduler/app/options``: ``NewSecureServingOptions``,
``NewDelegatingAuthenticationOptions``, ``NewDelegatingAuthorizationOptions`` and the overrides
kube-scheduler applies to them).
"""

from __future__ import annotations

import ipaddress

import msgspec

DEFAULT_BIND_ADDRESS = "0.0.0.0"
#: kube-scheduler's ``DefaultKubeSchedulerPort``.
DEFAULT_SECURE_PORT = 10259
#: The health paths kubelets probe; apiserver's delegating authorizer leaves them open by default.
DEFAULT_ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
#: A delegated authorizer allows this group without a SubjectAccessReview: the API server's own
#: authorizer grants ``system:masters`` everything anyway.
DEFAULT_ALWAYS_ALLOW_GROUPS = ("system:masters",)
#: The cache lifetimes of apiserver's delegating authenticator and authorizer.
DEFAULT_CACHE_TTL = 10.0
#: How long one TokenReview or SubjectAccessReview may take, retries included (kube: 10 s).
DEFAULT_REVIEW_TIMEOUT = 10.0


class OptionsError(ValueError):
    """A serving flag with a value kube-scheduler would refuse."""


class AuthenticationOptions(msgspec.Struct, frozen=True, kw_only=True):
    #: Empty: the scheduler's own connection (``--kubeconfig``, ``clientConnection.kubeconfig``,
    #: else in-cluster).
    kubeconfig: str = ""
    client_ca_file: str = ""
    #: Do not read ``client-ca-file`` from ``kube-system/extension-apiserver-authentication``.
    skip_lookup: bool = False
    #: kube-scheduler sets this to true: a failed lookup only disables client certificates.
    tolerate_lookup_failure: bool = True
    cache_ttl: float = DEFAULT_CACHE_TTL
    timeout: float = DEFAULT_REVIEW_TIMEOUT


class AuthorizationOptions(msgspec.Struct, frozen=True, kw_only=True):
    kubeconfig: str = ""
    always_allow_paths: tuple[str, ...] = DEFAULT_ALWAYS_ALLOW_PATHS
    always_allow_groups: tuple[str, ...] = DEFAULT_ALWAYS_ALLOW_GROUPS
    allow_cache_ttl: float = DEFAULT_CACHE_TTL
    deny_cache_ttl: float = DEFAULT_CACHE_TTL
    timeout: float = DEFAULT_REVIEW_TIMEOUT


class ServingOptions(msgspec.Struct, frozen=True, kw_only=True):
    bind_address: str = DEFAULT_BIND_ADDRESS
    #: 0: no HTTPS at all (kube-scheduler's meaning).
    secure_port: int = DEFAULT_SECURE_PORT
    #: Plain HTTP with the health paths only; 0 (the default): none. See ``flags.py``.
    insecure_port: int = 0
    cert_dir: str = ""
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    authentication: AuthenticationOptions = msgspec.field(default_factory=AuthenticationOptions)
    authorization: AuthorizationOptions = msgspec.field(default_factory=AuthorizationOptions)

    def validate(self) -> None:
        """Raise :class:`OptionsError` naming the flag and value kube-scheduler would refuse."""
        if self.bind_address:
            try:
                ipaddress.ip_address(self.bind_address)
            except ValueError:
                raise OptionsError(
                    f'invalid argument "{self.bind_address}" for "--bind-address" flag: '
                    f'failed to parse IP: "{self.bind_address}"'
                ) from None
        for flag, port, what in (
            ("--secure-port", self.secure_port, "secure port"),
            ("--port", self.insecure_port, "insecure (HTTP) port"),
        ):
            if not 0 <= port <= 65535:
                raise OptionsError(
                    f"{flag} {port} must be between 0 and 65535, inclusive. 0 for turning off {what}"
                )
        if self.secure_port and self.secure_port == self.insecure_port:
            raise OptionsError(f"--port and --secure-port are both {self.secure_port}: use two ports")
        if bool(self.tls_cert_file) != bool(self.tls_private_key_file):
            given, missing = (
                ("--tls-cert-file", "--tls-private-key-file")
                if self.tls_cert_file
                else ("--tls-private-key-file", "--tls-cert-file")
            )
            raise OptionsError(f"{given} is set but {missing} is not: give both, or neither")
        for path in self.authorization.always_allow_paths:
            trimmed = path.removeprefix("/")
            # apiserver's path authorizer: only a trailing * (a prefix match) is allowed.
            if "*" in trimmed[:-1]:
                raise OptionsError(
                    f"--authorization-always-allow-paths: only trailing * allowed in {trimmed!r}"
                )

    @property
    def listen_address(self) -> str:
        """The address to bind: blank means every interface, as kube-scheduler reads it."""
        return self.bind_address or DEFAULT_BIND_ADDRESS
