"""Delegated authorization, as apiserver's ``DelegatingAuthorizationOptions`` builds it for kube-scheduler.

A union, first answer wins: members of ``system:masters`` are allowed; so is any request to an
always-allowed path (``--authorization-always-allow-paths``); everything else is a
SubjectAccessReview (``authorization.k8s.io/v1``) with the user and a non-resource attribute,
the request's path and its method in lower case (``get /metrics``). Without a connection to the
API server only the first two can allow. Answers are cached (allowed and denied apart); a review
that fails is not cached and the request is answered 500.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import msgspec

from koordsched.backends.kube.client import KubeClient
from koordsched.backends.kube.serving.authn import UserInfo
from koordsched.backends.kube.serving.options import DEFAULT_CACHE_TTL, DEFAULT_REVIEW_TIMEOUT
from koordsched.backends.kube.serving.review import ReviewError, post_review
from koordsched.backends.kube.serving.ttlcache import TTLCache

SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
#: apiserver's webhook authorizer keeps 8192 answers (an LRU with expiry).
DECISION_CACHE_SIZE = 8192


class Decision(msgspec.Struct, frozen=True):
    allowed: bool
    reason: str = ""


class AuthorizationFailed(Exception):
    """No decision could be had (answered 500)."""


def path_matcher(paths: Sequence[str]) -> Callable[[str], bool]:
    """apiserver's path authorizer: exact paths, or prefixes written with a trailing ``*``.

    Leading slashes do not matter (``/healthz`` and ``healthz`` are the same path); ``/livez``
    does not cover ``/livez/ping``, ``/livez/*`` does, and ``/livez*`` covers both.
    """
    exact: set[str] = set()
    prefixes: list[str] = []
    for p in paths:
        p = p.removeprefix("/")
        if not p:
            exact.add(p)  # "/" itself
            continue
        if "*" in p[:-1]:
            raise ValueError(f"only trailing * allowed in {p!r}")
        if p.endswith("*"):
            prefixes.append(p[:-1])
        else:
            exact.add(p)

    def matches(path: str) -> bool:
        path = path.removeprefix("/")
        return path in exact or any(path.startswith(prefix) for prefix in prefixes)

    return matches


class _SarStatus(msgspec.Struct):
    allowed: bool = False
    denied: bool = False
    reason: str = ""


class _SubjectAccessReview(msgspec.Struct):
    status: _SarStatus = msgspec.field(default_factory=_SarStatus)


class AccessReviewer:
    """SubjectAccessReviews for non-resource requests, cached per (user, verb, path)."""

    def __init__(
        self,
        client: KubeClient,
        *,
        allow_ttl: float = DEFAULT_CACHE_TTL,
        deny_ttl: float = DEFAULT_CACHE_TTL,
        timeout: float = DEFAULT_REVIEW_TIMEOUT,
        maxsize: int = DECISION_CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.allow_ttl = allow_ttl
        self.deny_ttl = deny_ttl
        self.timeout = timeout
        self._cache: TTLCache[bytes, Decision] = TTLCache(maxsize, clock)

    async def review(self, user: UserInfo, verb: str, path: str) -> Decision:
        """Allowed, or not (denied, or no opinion: the reviewer is the union's last member, so both
        end in a 403 with the review's reason)."""
        spec = {
            "user": user.name,
            "uid": user.uid,
            "groups": list(user.groups),
            "extra": {k: list(v) for k, v in user.extra.items()},
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        key = msgspec.json.encode(spec)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        try:
            raw = await post_review(self.client, SUBJECT_ACCESS_REVIEWS, body, limit=self.timeout)
            status = msgspec.json.decode(raw, type=_SubjectAccessReview).status
        except ReviewError as err:
            raise AuthorizationFailed(f"SubjectAccessReview failed: {err}") from err
        except msgspec.DecodeError as err:
            raise AuthorizationFailed(
                f"SubjectAccessReview failed: the answer is not a SubjectAccessReview: {err}"
            ) from err
        if status.allowed and status.denied:
            raise AuthorizationFailed("webhook subject access review returned both allow and deny response")
        decision = Decision(status.allowed, status.reason)
        self._cache.put(key, decision, self.allow_ttl if status.allowed else self.deny_ttl)
        return decision


class Authorizer:
    """The union: privileged groups, then always-allowed paths, then the SubjectAccessReview."""

    def __init__(
        self,
        *,
        always_allow_paths: Sequence[str],
        always_allow_groups: Sequence[str],
        reviewer: AccessReviewer | None,
    ) -> None:
        self.always_allow_groups = frozenset(always_allow_groups)
        self.always_allowed = path_matcher(always_allow_paths)
        self.reviewer = reviewer

    async def authorize(self, user: UserInfo, verb: str, path: str) -> Decision:
        """Raises :class:`AuthorizationFailed` when the review could not be made."""
        if self.always_allow_groups.intersection(user.groups) or self.always_allowed(path):
            return Decision(True)
        if self.reviewer is None:
            return Decision(False)
        return await self.reviewer.review(user, verb, path)
