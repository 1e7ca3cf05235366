"""Delegated authn and authz: what is asked of the API server, what is cached, and for how long."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio.client import Configuration

from koordsched.backends.kube.client import KubeClient, new_client
from koordsched.backends.kube.serving.authn import (
    ANONYMOUS,
    Authenticator,
    TokenReviewer,
    Unauthenticated,
    UserInfo,
    bearer_token,
)
from koordsched.backends.kube.serving.authz import (
    AccessReviewer,
    AuthorizationFailed,
    Authorizer,
    Decision,
    path_matcher,
)
from koordsched.backends.kube.serving.options import AuthorizationOptions, OptionsError, ServingOptions
from koordsched.backends.kube.serving.ttlcache import TTLCache
from tests.kube.fake_auth import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS, FakeAuthServer


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def auth() -> AsyncIterator[FakeAuthServer]:
    server = FakeAuthServer(tokens={"good": ("alice", ["team"])})
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def client(auth: FakeAuthServer) -> AsyncIterator[KubeClient]:
    c = new_client(Configuration(host=auth.url), qps=1000, burst=1000)
    try:
        yield c
    finally:
        await c.close()


# --- the cache --------------------------------------------------------------------------------


def test_ttl_cache_expires_and_evicts_the_least_recently_used() -> None:
    clock = FakeClock()
    cache: TTLCache[str, int] = TTLCache(2, clock)
    cache.put("a", 1, 10)
    cache.put("b", 2, 10)
    assert cache.get("a") == 1  # a is now the most recently used
    cache.put("c", 3, 10)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    clock.now += 10
    assert cache.get("a") is None and len(cache) == 1
    cache.put("d", 4, 0)  # a zero TTL keeps nothing
    assert cache.get("d") is None


# --- tokens -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("BEARER abc extra", "abc"),
        ("  Bearer abc  ", "abc"),
        ("Bearer ", None),
        ("Bearer  abc", None),  # an empty token before the space: no token (apiserver warns)
        ("Basic dXNlcjpwYXNz", None),
        ("abc", None),
        ("", None),
        (None, None),
    ],
)
def test_bearer_token_is_read_as_apiserver_reads_it(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


async def test_token_review_result_is_cached_for_the_ttl(auth: FakeAuthServer, client: KubeClient) -> None:
    clock = FakeClock()
    reviewer = TokenReviewer(client, ttl=10, clock=clock)
    user = await reviewer.review("good")
    assert user == UserInfo("alice", uid="u-1", groups=("team",))
    assert auth.reviews[-1]["spec"] == {"token": "good"}
    await reviewer.review("good")
    assert auth.calls[TOKEN_REVIEWS] == 1
    clock.now += 9.9
    await reviewer.review("good")
    assert auth.calls[TOKEN_REVIEWS] == 1
    clock.now += 0.1
    await reviewer.review("good")
    assert auth.calls[TOKEN_REVIEWS] == 2


async def test_a_rejected_token_is_cached_too(auth: FakeAuthServer, client: KubeClient) -> None:
    clock = FakeClock()
    reviewer = TokenReviewer(client, ttl=10, clock=clock)
    for _ in range(3):
        with pytest.raises(Unauthenticated, match="invalid bearer token"):
            await reviewer.review("bad")
    assert auth.calls[TOKEN_REVIEWS] == 1
    clock.now += 10
    auth.tokens["bad"] = ("bob", [])
    assert (await reviewer.review("bad")).name == "bob"


async def test_the_token_cache_is_bounded_and_holds_no_token(
    auth: FakeAuthServer, client: KubeClient
) -> None:
    reviewer = TokenReviewer(client, ttl=60, maxsize=3)
    # Long tokens: a two-byte token could turn up inside a random digest by chance.
    tokens = [f"token-{i:02d}-of-the-cache-test" for i in range(10)]
    for i, token in enumerate(tokens):
        auth.tokens[token] = (f"u{i}", [])
        await reviewer.review(token)
    assert len(reviewer._cache) == 3
    assert all(t.encode() not in key for key in reviewer._cache._entries for t in tokens)
    await reviewer.review(tokens[9])
    assert auth.calls[TOKEN_REVIEWS] == 10
    await reviewer.review(tokens[0])  # evicted: asked again
    assert auth.calls[TOKEN_REVIEWS] == 11


async def test_a_failed_review_is_unauthenticated_and_not_cached(
    auth: FakeAuthServer, client: KubeClient
) -> None:
    reviewer = TokenReviewer(client, ttl=60)
    auth.fail[TOKEN_REVIEWS] = 403  # no system:auth-delegator binding
    with pytest.raises(Unauthenticated, match=r"TokenReview failed: .*403"):
        await reviewer.review("good")
    del auth.fail[TOKEN_REVIEWS]
    assert (await reviewer.review("good")).name == "alice"


async def test_a_failing_server_is_retried_within_the_timeout(
    auth: FakeAuthServer, client: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("koordsched.backends.kube.serving.review.BACKOFF_START", 0.01)
    auth.fail[TOKEN_REVIEWS] = 500
    reviewer = TokenReviewer(client, timeout=5)
    with pytest.raises(Unauthenticated, match="gave up after 5 tries"):
        await reviewer.review("good")
    assert auth.calls[TOKEN_REVIEWS] == 5


async def test_a_stalled_review_ends_at_its_timeout(auth: FakeAuthServer, client: KubeClient) -> None:
    auth.stall.add(TOKEN_REVIEWS)
    reviewer = TokenReviewer(client, timeout=0.3)
    t0 = time.monotonic()
    with pytest.raises(Unauthenticated, match=r"no answer within 0\.3s"):
        await reviewer.review("good")
    assert time.monotonic() - t0 < 2


async def test_authenticator_order(auth: FakeAuthServer, client: KubeClient) -> None:
    authn = Authenticator(TokenReviewer(client))
    assert await authn.authenticate(None, None) == ANONYMOUS
    assert UserInfo("system:anonymous", groups=("system:unauthenticated",)) == ANONYMOUS
    assert await authn.authenticate("Basic x", None) == ANONYMOUS
    alice = await authn.authenticate("Bearer good", None)
    assert alice.groups == ("team", "system:authenticated")
    with pytest.raises(Unauthenticated):
        await authn.authenticate("Bearer nope", None)  # never anonymous once a token is given
    # Without a connection to review tokens with, a token is ignored.
    assert await Authenticator(None).authenticate("Bearer good", None) == ANONYMOUS


# --- paths ------------------------------------------------------------------------------------


def test_default_always_allowed_paths_are_exact() -> None:
    allowed = path_matcher(ServingOptions().authorization.always_allow_paths)
    for path in ("/healthz", "/readyz", "/livez", "healthz"):
        assert allowed(path), path
    for path in ("/livez/ping", "/readyz/shutdown", "/healthz/", "/metrics", "/configz", "/", "/livezz"):
        assert not allowed(path), path


def test_trailing_star_is_a_prefix() -> None:
    allowed = path_matcher(["/livez/*", "/metrics*", "/"])
    assert allowed("/livez/ping") and allowed("/livez/")
    assert not allowed("/livez")
    assert allowed("/metrics") and allowed("/metrics/resources") and allowed("/metricsx")
    assert allowed("/")
    assert not allowed("/configz")


def test_a_star_elsewhere_is_refused() -> None:
    with pytest.raises(ValueError, match="only trailing \\* allowed in 'a\\*/b'"):
        path_matcher(["/a*/b"])
    options = ServingOptions(authorization=AuthorizationOptions(always_allow_paths=("/a*/b",)))
    with pytest.raises(OptionsError, match="--authorization-always-allow-paths: only trailing"):
        options.validate()


# --- access reviews ---------------------------------------------------------------------------


async def test_access_review_asks_for_the_non_resource_path(auth: FakeAuthServer, client: KubeClient) -> None:
    auth.allowed.add(("alice", "get", "/metrics"))
    reviewer = AccessReviewer(client)
    user = UserInfo("alice", uid="u-1", groups=("team", "system:authenticated"), extra={"k": ("v",)})
    assert await reviewer.review(user, "get", "/metrics") == Decision(True)
    assert auth.reviews[-1]["spec"] == {
        "user": "alice",
        "uid": "u-1",
        "groups": ["team", "system:authenticated"],
        "extra": {"k": ["v"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }
    assert not (await reviewer.review(user, "get", "/configz")).allowed
    assert not (await reviewer.review(user, "head", "/metrics")).allowed


async def test_allowed_and_denied_answers_have_their_own_ttl(
    auth: FakeAuthServer, client: KubeClient
) -> None:
    clock = FakeClock()
    auth.allowed.add(("alice", "get", "/metrics"))
    reviewer = AccessReviewer(client, allow_ttl=30, deny_ttl=5, clock=clock)
    alice, bob = UserInfo("alice"), UserInfo("bob")
    for _ in range(2):
        assert (await reviewer.review(alice, "get", "/metrics")).allowed
        assert not (await reviewer.review(bob, "get", "/metrics")).allowed
    assert auth.calls[SUBJECT_ACCESS_REVIEWS] == 2
    clock.now += 5
    auth.allowed.add(("bob", "get", "/metrics"))
    assert (await reviewer.review(bob, "get", "/metrics")).allowed  # the denial expired
    assert (await reviewer.review(alice, "get", "/metrics")).allowed  # still cached
    assert auth.calls[SUBJECT_ACCESS_REVIEWS] == 3
    clock.now += 25
    await reviewer.review(alice, "get", "/metrics")
    assert auth.calls[SUBJECT_ACCESS_REVIEWS] == 4


async def test_a_denial_carries_its_reason(auth: FakeAuthServer, client: KubeClient) -> None:
    auth.denied.add(("bob", "get", "/metrics"))
    reviewer = AccessReviewer(client)
    assert await reviewer.review(UserInfo("bob"), "get", "/metrics") == Decision(
        False, "denied by a test rule"
    )


async def test_a_failed_access_review_fails_and_is_not_cached(
    auth: FakeAuthServer, client: KubeClient
) -> None:
    reviewer = AccessReviewer(client, timeout=0.3)
    auth.stall.add(SUBJECT_ACCESS_REVIEWS)
    with pytest.raises(AuthorizationFailed, match="no answer within"):
        await reviewer.review(UserInfo("alice"), "get", "/metrics")
    auth.stall.clear()
    auth.fail[SUBJECT_ACCESS_REVIEWS] = 403
    with pytest.raises(AuthorizationFailed, match="403"):
        await reviewer.review(UserInfo("alice"), "get", "/metrics")
    del auth.fail[SUBJECT_ACCESS_REVIEWS]
    auth.allowed.add(("alice", "get", "/metrics"))
    assert (await reviewer.review(UserInfo("alice"), "get", "/metrics")).allowed


async def test_authorizer_union(auth: FakeAuthServer, client: KubeClient) -> None:
    authz = Authorizer(
        always_allow_paths=["/healthz", "/readyz", "/livez"],
        always_allow_groups=["system:masters"],
        reviewer=AccessReviewer(client),
    )
    assert (await authz.authorize(ANONYMOUS, "get", "/livez")).allowed
    assert (await authz.authorize(ANONYMOUS, "post", "/healthz")).allowed  # paths ignore the verb
    assert (await authz.authorize(UserInfo("root", groups=("system:masters",)), "get", "/configz")).allowed
    assert auth.calls[SUBJECT_ACCESS_REVIEWS] == 0
    assert not (await authz.authorize(ANONYMOUS, "get", "/metrics")).allowed
    assert not (await authz.authorize(ANONYMOUS, "get", "/livez/ping")).allowed
    assert auth.calls[SUBJECT_ACCESS_REVIEWS] == 2
    # Without a connection only the paths and the privileged groups allow.
    alone = Authorizer(always_allow_paths=["/livez"], always_allow_groups=["system:masters"], reviewer=None)
    assert not (await alone.authorize(UserInfo("alice"), "get", "/metrics")).allowed
    assert (await alone.authorize(ANONYMOUS, "get", "/livez")).allowed


async def test_concurrent_reviews_do_not_wedge(auth: FakeAuthServer, client: KubeClient) -> None:
    auth.allowed.add(("system:authenticated", "get", "/metrics"))
    reviewer = AccessReviewer(client)
    users = [UserInfo(f"u{i}", groups=("system:authenticated",)) for i in range(50)]
    results = await asyncio.gather(*(reviewer.review(u, "get", "/metrics") for u in users))
    assert all(r.allowed for r in results)
