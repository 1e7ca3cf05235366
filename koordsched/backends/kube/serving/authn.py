"""Delegated authentication, as apiserver's ``DelegatingAuthenticatorConfig`` builds it for kube-scheduler.

In order: a client certificate (verified against the client CA during the TLS handshake) names
the user by its CommonName and the groups by its Organizations; else a bearer token is checked
with a TokenReview (``authentication.k8s.io/v1``) against the API server; a request with
neither is anonymous (``system:anonymous`` in ``system:unauthenticated``). Authenticated users
get the ``system:authenticated`` group. A token that the review rejects, or a review that fails,
is an error: the request is answered 401 and never falls back to anonymous.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable

import msgspec
from cryptography import x509
from cryptography.x509.oid import NameOID

from koordsched.backends.kube.client import KubeClient
from koordsched.backends.kube.serving.options import DEFAULT_CACHE_TTL, DEFAULT_REVIEW_TIMEOUT
from koordsched.backends.kube.serving.review import ReviewError, post_review
from koordsched.backends.kube.serving.ttlcache import TTLCache

log = logging.getLogger(__name__)

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ANONYMOUS_USER = "system:anonymous"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
AUTHENTICATED_GROUP = "system:authenticated"
#: Distinct tokens remembered at once (the least recently used go first).
TOKEN_CACHE_SIZE = 4096


class UserInfo(msgspec.Struct, frozen=True):
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)


ANONYMOUS = UserInfo(ANONYMOUS_USER, groups=(UNAUTHENTICATED_GROUP,))


class Unauthenticated(Exception):
    """The request carried credentials that did not authenticate (answered 401)."""


# --- the TokenReview wire format -----------------------------------------------------------------


class _ReviewUser(msgspec.Struct):
    username: str = ""
    uid: str = ""
    groups: list[str] | None = None
    extra: dict[str, list[str]] | None = None


class _ReviewStatus(msgspec.Struct):
    authenticated: bool = False
    user: _ReviewUser = msgspec.field(default_factory=_ReviewUser)
    error: str = ""


class _TokenReview(msgspec.Struct):
    status: _ReviewStatus = msgspec.field(default_factory=_ReviewStatus)


class TokenReviewer:
    """Bearer tokens checked by TokenReview; answers (yes or no) cached for ``ttl`` seconds.

    The cache holds a keyed hash of each token, never the token. A review that fails is not
    cached, so the next request tries again.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        ttl: float = DEFAULT_CACHE_TTL,
        timeout: float = DEFAULT_REVIEW_TIMEOUT,
        maxsize: int = TOKEN_CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.ttl = ttl
        self.timeout = timeout
        self._cache: TTLCache[bytes, UserInfo | str] = TTLCache(maxsize, clock)
        self._key = secrets.token_bytes(32)

    async def review(self, token: str) -> UserInfo:
        """The token's user; raises :class:`Unauthenticated` when it is not valid or cannot be checked."""
        key = hmac.digest(self._key, token.encode(), hashlib.sha256)
        cached = self._cache.get(key)
        if cached is None:
            cached = await self._review(token)
            self._cache.put(key, cached, self.ttl)
        if isinstance(cached, str):
            raise Unauthenticated(cached)
        return cached

    async def _review(self, token: str) -> UserInfo | str:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        try:
            raw = await post_review(self.client, TOKEN_REVIEWS, body, limit=self.timeout)
            status = msgspec.json.decode(raw, type=_TokenReview).status
        except ReviewError as err:
            raise Unauthenticated(f"TokenReview failed: {err}") from err
        except msgspec.DecodeError as err:
            raise Unauthenticated(f"TokenReview failed: the answer is not a TokenReview: {err}") from err
        if not status.authenticated:
            return status.error or "invalid bearer token"
        user = status.user
        return UserInfo(
            user.username,
            uid=user.uid,
            groups=tuple(user.groups or ()),
            extra={k: tuple(v) for k, v in (user.extra or {}).items()},
        )


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, as apiserver's bearertoken reads it.

    Anything else (no header, another scheme, an empty token) is no token at all.
    """
    parts = (authorization or "").strip().split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    return parts[1]


def certificate_user(der: bytes) -> UserInfo | None:
    """The user a verified client certificate names: CommonName, and Organizations as groups.

    None when it has no CommonName (apiserver's x509 authenticator then tries the next way).
    """
    cert = x509.load_der_x509_certificate(der)
    names = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    # Go's pkix.Name keeps the last CommonName and every Organization.
    name = str(names[-1]) if names else ""
    if not name:
        return None
    groups = tuple(str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
    return UserInfo(name, groups=groups)


class Authenticator:
    """A request's user: client certificate, else bearer token, else anonymous.

    ``tokens`` is None when there is no connection to review tokens with; a bearer token is then
    ignored, as apiserver does without a TokenReview client (the request is anonymous).
    """

    def __init__(self, tokens: TokenReviewer | None) -> None:
        self.tokens = tokens

    async def authenticate(self, authorization: str | None, peer_certificate: bytes | None) -> UserInfo:
        if peer_certificate is not None:
            user = certificate_user(peer_certificate)
            if user is not None:
                return _with_authenticated(user)
        token = bearer_token(authorization)
        if token is not None and self.tokens is not None:
            return _with_authenticated(await self.tokens.review(token))
        return ANONYMOUS


def _with_authenticated(user: UserInfo) -> UserInfo:
    """apiserver's AuthenticatedGroupAdder: add ``system:authenticated`` unless either group is there."""
    if AUTHENTICATED_GROUP in user.groups or UNAUTHENTICATED_GROUP in user.groups:
        return user
    return UserInfo(user.name, uid=user.uid, groups=(*user.groups, AUTHENTICATED_GROUP), extra=user.extra)
