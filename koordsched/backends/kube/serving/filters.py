"""The aiohttp middleware in front of every endpoint: authenticate, authorize, answer as apiserver does.

kube-scheduler's handler chain (``buildHandlerChain``) runs authentication and authorization
before its mux, so even a path nothing serves is refused before a 404. The answers are
apiserver's: 401 is a ``Status`` with reason ``Unauthorized``; 403 a ``Status`` saying
``forbidden: User "<name>" cannot <verb> path "<path>"``; a review that could not be made is
500 ``Internal Server Error: "<uri>": <error>`` in plain text. Every answer carries
``Cache-Control: no-cache, private``.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable

import msgspec
from aiohttp import web

from koordsched.backends.kube.serving.authn import Authenticator, Unauthenticated, UserInfo
from koordsched.backends.kube.serving.authz import AuthorizationFailed, Authorizer

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Middleware = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]

#: apiserver escapes these in messages that echo the request (``responsewriters.sanitizer``).
_SANITIZE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
#: apiserver's ``WithCacheControl``: nothing here may be cached by a proxy.
CACHE_CONTROL = "no-cache, private"


def _status(code: int, reason: str, message: str, *, details: bool) -> web.Response:
    body: dict[str, object] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details:
        body["details"] = {}
    body["code"] = code
    return web.Response(status=code, body=msgspec.json.encode(body) + b"\n", content_type="application/json")


def unauthorized() -> web.Response:
    return _status(401, "Unauthorized", "Unauthorized", details=False)


def forbidden(user: UserInfo, verb: str, path: str, reason: str) -> web.Response:
    message = f"User {_quote(user.name)} cannot {verb} path {_quote(path)}".translate(_SANITIZE)
    if reason:
        message = f"{message}: {reason}"
    resp = _status(403, "Forbidden", f"forbidden: {message}", details=True)
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


def internal_error(request: web.Request, err: Exception) -> web.Response:
    text = f"Internal Server Error: {_quote(request.raw_path)}: {err}".translate(_SANITIZE)
    return web.Response(
        status=500,
        text=text + "\n",
        headers={"X-Content-Type-Options": "nosniff"},
        content_type="text/plain",
    )


def _quote(s: str) -> str:
    """Go's ``%q`` for the strings that appear here (JSON escaping is the same for printable text)."""
    return msgspec.json.encode(s).decode()


def peer_certificate(request: web.Request) -> bytes | None:
    """The client's certificate (DER), verified by the TLS handshake; None without one."""
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    if not isinstance(ssl_object, ssl.SSLObject):
        return None
    return ssl_object.getpeercert(binary_form=True)


def auth_middleware(authenticator: Authenticator, authorizer: Authorizer) -> Middleware:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            resp = await _guarded(request, handler)
        except web.HTTPException as exc:  # a 404 or 405 from the router
            exc.headers.setdefault("Cache-Control", CACHE_CONTROL)
            raise
        resp.headers.setdefault("Cache-Control", CACHE_CONTROL)
        return resp

    async def _guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            user = await authenticator.authenticate(
                request.headers.get("Authorization"), peer_certificate(request)
            )
        except Unauthenticated as err:
            log.warning("Unable to authenticate the request to %s: %s", request.path, err)
            return unauthorized()
        # Non-resource requests: the verb is the method in lower case (HEAD is "head").
        verb, path = request.method.lower(), request.path
        try:
            decision = await authorizer.authorize(user, verb, path)
        except AuthorizationFailed as err:
            log.error("authorizing %s %s for %s: %s", verb, path, user.name, err)
            return internal_error(request, err)
        if not decision.allowed:
            # Debug only: scrapers without the permission would fill the log otherwise.
            log.debug(
                "%s %s denied for %s: %s", verb, path, user.name, decision.reason or "no rule allows it"
            )
            return forbidden(user, verb, path, decision.reason)
        return await handler(request)

    return middleware
