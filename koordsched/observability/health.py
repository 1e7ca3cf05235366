"""kube-scheduler's /healthz, /livez and /readyz as pure logic, answering in k8s.io/apiserver's format.

Probes, ``kubectl get --raw /readyz?verbose`` users and monitoring scripts parse these bodies, so
the text follows ``k8s.io/apiserver/pkg/server/healthz`` byte for byte. The check sets are those
kube-scheduler installs (``cmd/kube-scheduler/app/server.go``):

* healthz: [leaderElection] with leader election, else [ping] (apiserver adds ping to an empty set);
* livez: [ping];
* readyz: [leaderElection] (with leader election) + [shutdown, sched-handler-sync].

Serving HTTP is left to the caller; this module only decides status codes and bodies.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

PING = "ping"
LEADER_ELECTION = "leaderElection"
SHUTDOWN = "shutdown"
HANDLER_SYNC = "sched-handler-sync"

#: The reasons upstream reports (visible only on ``/readyz/<check>`` and in logs).
HANDLER_SYNC_PENDING = "handlers are not fully synchronized"
SHUTTING_DOWN = "process is shutting down"

HEALTHZ = "healthz"
LIVEZ = "livez"
READYZ = "readyz"

#: Content type apiserver sets on every health answer.
CONTENT_TYPE = "text/plain; charset=utf-8"

_NOT_FOUND = (404, "404 page not found\n")

#: A dynamic check: returns None when healthy, otherwise the reason it is not.
CheckFunc = Callable[[], str | None]


class HealthChecks:
    """Named checks grouped per endpoint, and their rendering as apiserver renders them."""

    def __init__(self, *, leader_elect: bool = True) -> None:
        leader = [LEADER_ELECTION] if leader_elect else []
        self._endpoints: dict[str, tuple[str, ...]] = {
            HEALTHZ: tuple(leader) if leader else (PING,),
            LIVEZ: (PING,),
            READYZ: (*leader, SHUTDOWN, HANDLER_SYNC),
        }
        # Static states; a not-yet-leading watchdog is healthy upstream, handlers start unsynced.
        self._states: dict[str, str | None] = {
            PING: None,
            LEADER_ELECTION: None,
            SHUTDOWN: None,
            HANDLER_SYNC: HANDLER_SYNC_PENDING,
        }
        self._funcs: dict[str, CheckFunc] = {}

    def checks(self, endpoint: str) -> tuple[str, ...]:
        """The check names of ``endpoint`` (healthz, livez, readyz), in the order they render."""
        return self._endpoints[endpoint.strip("/")]

    def set_ready(self, name: str, ok: bool, message: str = "") -> None:
        """Set a check's state; ``message`` is the reason shown when it fails."""
        if name not in self._states:
            raise KeyError(f"unknown health check {name!r}; known: {', '.join(sorted(self._states))}")
        self._funcs.pop(name, None)
        self._states[name] = None if ok else (message or f"{name} check failed")

    def set_check(self, name: str, func: CheckFunc) -> None:
        """Evaluate ``name`` on every request, e.g. the leader-election watchdog's lease freshness."""
        if name not in self._states:
            raise KeyError(f"unknown health check {name!r}; known: {', '.join(sorted(self._states))}")
        self._funcs[name] = func

    def check(self, name: str) -> str | None:
        """None when ``name`` is healthy, else why not; a check that raises counts as failing."""
        func = self._funcs.get(name)
        if func is None:
            return self._states[name]
        try:
            return func()
        except Exception as exc:  # a broken check must fail the probe, not crash the server
            return f"{type(exc).__name__}: {exc}"

    def failures(self, endpoint: str) -> list[tuple[str, str]]:
        """(check, reason) for each failing check, for the log line apiserver writes on failure."""
        out: list[tuple[str, str]] = []
        for name in self.checks(endpoint):
            reason = self.check(name)
            if reason is not None:
                out.append((name, reason))
        return out

    def render(self, endpoint: str, verbose: bool = False, exclude: Iterable[str] = ()) -> tuple[int, str]:
        """The HTTP status and body for ``endpoint``: "healthz", "/readyz", "readyz/<check>"...

        ``verbose`` and ``exclude`` are the ``?verbose`` and ``?exclude=<check>`` query parameters.
        """
        base, sep, sub = endpoint.lstrip("/").partition("/")
        names = self._endpoints.get(base)
        if names is None:
            return _NOT_FOUND
        if sep:
            return self._render_one(names, sub)

        excluded = set(exclude)
        lines: list[str] = []
        failed = False
        for name in names:
            if name in excluded:
                excluded.discard(name)
                lines.append(f"[+]{name} excluded: ok\n")
                continue
            if self.check(name) is None:
                lines.append(f"[+]{name} ok\n")
            else:
                # The reason is withheld: these endpoints are public. /<endpoint>/<check> shows it.
                lines.append(f"[-]{name} failed: reason withheld\n")
                failed = True
        if excluded:
            quoted = ",".join(json.dumps(n) for n in sorted(excluded))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}\n")
        if failed:
            # apiserver is always verbose on failure; http.Error appends the newline.
            return 500, "".join(lines) + f"{base} check failed\n"
        if not verbose:
            return 200, "ok"
        return 200, "".join(lines) + f"{base} check passed\n"

    def _render_one(self, names: tuple[str, ...], name: str) -> tuple[int, str]:
        """``/<endpoint>/<check>``: plain "ok", or the reason, which the aggregate withholds."""
        if name not in names:
            return _NOT_FOUND
        reason = self.check(name)
        if reason is None:
            return 200, "ok"
        return 500, f"internal server error: {reason}\n"
