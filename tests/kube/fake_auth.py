"""The API server's side of delegated authn/authz, in memory: TokenReview, SubjectAccessReview and the
``extension-apiserver-authentication`` ConfigMap, with counters and faults for the tests.

Kept apart from ``fake_apiserver.py`` (the scheduler's own traffic): these are the only calls the
serving port makes.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
CONFIGMAP = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason}
    return web.json_response({**body, "code": code}, status=code)


@dataclass
class FakeAuthServer:
    #: token -> (user name, groups)
    tokens: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    #: (user or group, verb, path) the SubjectAccessReview allows
    allowed: set[tuple[str, str, str]] = field(default_factory=set)
    #: (user or group, verb, path) the SubjectAccessReview denies outright (status.denied)
    denied: set[tuple[str, str, str]] = field(default_factory=set)
    #: status code, or a dict to answer as the ConfigMap (None: 404)
    configmap: int | dict[str, Any] | None = None
    #: path -> status code to answer instead (e.g. 500, 403)
    fail: dict[str, int] = field(default_factory=dict)
    #: paths whose requests hang until the server stops
    stall: set[str] = field(default_factory=set)
    calls: Counter[str] = field(default_factory=Counter)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None
    _stopped: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubeconfig(self) -> str:
        return (
            "apiVersion: v1\nkind: Config\n"
            f'clusters: [{{name: c, cluster: {{server: "{self.url}"}}}}]\n'
            "users: [{name: u, user: {token: scheduler-token}}]\n"
            "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
            "current-context: x\n"
        )

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        self._stopped.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.calls[path] += 1
        if path in self.stall:
            await self._stopped.wait()
        if path in self.fail:
            code = self.fail[path]
            return _status(code, "InternalError" if code >= 500 else "Forbidden", f"injected {code}")
        if request.method == "POST" and path == TOKEN_REVIEWS:
            return self._token_review(await request.json())
        if request.method == "POST" and path == SUBJECT_ACCESS_REVIEWS:
            return self._access_review(await request.json())
        if request.method == "GET" and path == CONFIGMAP:
            if isinstance(self.configmap, dict):
                return web.json_response(self.configmap)
            if isinstance(self.configmap, int):
                return _status(self.configmap, "Forbidden", "configmaps is forbidden")
        return _status(404, "NotFound", f"{path} not found")

    def _token_review(self, body: dict[str, Any]) -> web.Response:
        assert body["apiVersion"] == "authentication.k8s.io/v1" and body["kind"] == "TokenReview", body
        self.reviews.append(body)
        found = self.tokens.get(body["spec"]["token"])
        if found is None:
            status: dict[str, Any] = {"user": {}, "error": "invalid bearer token"}
        else:
            status = {"authenticated": True, "user": {"username": found[0], "uid": "u-1", "groups": found[1]}}
        return web.json_response({**body, "status": status}, status=201)

    def _access_review(self, body: dict[str, Any]) -> web.Response:
        assert body["apiVersion"] == "authorization.k8s.io/v1" and body["kind"] == "SubjectAccessReview", body
        self.reviews.append(body)
        spec = body["spec"]
        attrs = spec["nonResourceAttributes"]
        subjects = [spec["user"], *spec.get("groups", [])]
        keys = {(s, attrs["verb"], attrs["path"]) for s in subjects}
        status: dict[str, Any] = {"allowed": bool(keys & self.allowed)}
        if keys & self.denied:
            status = {"allowed": False, "denied": True, "reason": "denied by a test rule"}
        return web.json_response({**body, "status": status}, status=201)
