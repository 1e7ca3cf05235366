"""Health endpoints answer as k8s.io/apiserver's healthz package does, with kube-scheduler's checks."""

from __future__ import annotations

import pytest

from koordsched.observability.health import (
    HANDLER_SYNC,
    HANDLER_SYNC_PENDING,
    LEADER_ELECTION,
    PING,
    SHUTDOWN,
    HealthChecks,
)


@pytest.fixture
def checks() -> HealthChecks:
    return HealthChecks()


def test_check_composition_matches_kube_scheduler() -> None:
    with_le = HealthChecks(leader_elect=True)
    assert with_le.checks("healthz") == (LEADER_ELECTION,)
    assert with_le.checks("livez") == (PING,)
    assert with_le.checks("/readyz") == (LEADER_ELECTION, SHUTDOWN, HANDLER_SYNC)
    without = HealthChecks(leader_elect=False)
    assert without.checks("healthz") == (PING,)  # apiserver installs ping into an empty set
    assert without.checks("readyz") == (SHUTDOWN, HANDLER_SYNC)


def test_not_ready_until_handlers_sync(checks: HealthChecks) -> None:
    assert checks.render("readyz") == (
        500,
        "[+]leaderElection ok\n[+]shutdown ok\n[-]sched-handler-sync failed: reason withheld\n"
        "readyz check failed\n",
    )
    # Failure output is verbose whether or not ?verbose was asked for.
    assert checks.render("readyz", verbose=True) == checks.render("readyz")
    assert checks.render("/healthz") == (200, "ok")
    assert checks.render("/livez") == (200, "ok")
    checks.set_ready(HANDLER_SYNC, True)
    assert checks.render("/readyz") == (200, "ok")


def test_verbose_success(checks: HealthChecks) -> None:
    checks.set_ready(HANDLER_SYNC, True)
    assert checks.render("readyz", verbose=True) == (
        200,
        "[+]leaderElection ok\n[+]shutdown ok\n[+]sched-handler-sync ok\nreadyz check passed\n",
    )
    assert checks.render("livez", verbose=True) == (200, "[+]ping ok\nlivez check passed\n")
    assert checks.render("healthz", verbose=True) == (200, "[+]leaderElection ok\nhealthz check passed\n")


def test_single_check_paths_show_the_reason(checks: HealthChecks) -> None:
    assert checks.render("/readyz/sched-handler-sync") == (
        500,
        f"internal server error: {HANDLER_SYNC_PENDING}\n",
    )
    assert checks.render("/readyz/shutdown") == (200, "ok")
    assert checks.render("/livez/ping") == (200, "ok")
    assert checks.render("/livez/shutdown")[0] == 404
    assert checks.render("/readyz/") == (404, "404 page not found\n")
    assert checks.render("/metrics") == (404, "404 page not found\n")


def test_exclude(checks: HealthChecks) -> None:
    assert checks.render("readyz", exclude=[HANDLER_SYNC]) == (200, "ok")
    assert checks.render("readyz", verbose=True, exclude=[HANDLER_SYNC, "nope", "also"]) == (
        200,
        "[+]leaderElection ok\n[+]shutdown ok\n[+]sched-handler-sync excluded: ok\n"
        'warn: some health checks cannot be excluded: no matches for "also","nope"\n'
        "readyz check passed\n",
    )


def test_shutdown_and_leader_loss(checks: HealthChecks) -> None:
    checks.set_ready(HANDLER_SYNC, True)
    checks.set_ready(SHUTDOWN, False, "process is shutting down")
    status, body = checks.render("readyz")
    assert status == 500
    assert "[-]shutdown failed: reason withheld\n" in body
    assert checks.render("healthz") == (200, "ok")
    checks.set_ready(LEADER_ELECTION, False, "failed election to renew leadership on lease koord-scheduler")
    assert checks.render("healthz") == (
        500,
        "[-]leaderElection failed: reason withheld\nhealthz check failed\n",
    )
    assert checks.failures("readyz") == [
        (LEADER_ELECTION, "failed election to renew leadership on lease koord-scheduler"),
        (SHUTDOWN, "process is shutting down"),
    ]


def test_dynamic_checks(checks: HealthChecks) -> None:
    state: dict[str, str | None] = {"reason": None}
    checks.set_check(LEADER_ELECTION, lambda: state["reason"])
    assert checks.render("healthz") == (200, "ok")
    state["reason"] = "lease expired"
    assert checks.render("/healthz/leaderElection") == (500, "internal server error: lease expired\n")

    def broken() -> str | None:
        raise RuntimeError("oops")

    checks.set_check(LEADER_ELECTION, broken)
    assert checks.render("/healthz/leaderElection") == (500, "internal server error: RuntimeError: oops\n")
    checks.set_ready(LEADER_ELECTION, True)  # a static state replaces the function
    assert checks.render("healthz") == (200, "ok")


def test_unknown_check_names_are_rejected(checks: HealthChecks) -> None:
    with pytest.raises(KeyError):
        checks.set_ready("sched-handler-sink", True)
    with pytest.raises(KeyError):
        checks.set_check("nope", lambda: None)
