"""The serving port against a real API server: anonymous and authorized access to /metrics and /configz.

The scheduler runs as a subprocess with exactly deploy/rbac.yaml (the identity of
tests/e2e/test_rbac.py), so its TokenReviews and SubjectAccessReviews are allowed by the shipped
``system:auth-delegator`` binding and its client-CA lookup by the ``extension-apiserver-
authentication-reader`` one. The scrapers are real ServiceAccounts with tokens from the
TokenRequest API, authorized by RBAC: one bound to deploy/metrics-reader.yaml's ClusterRole, one
bound to nothing, one allowed ``get /configz`` only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.apiserver import REPO_ROOT, KubeEnv
from tests.e2e.conftest import RBAC_USER
from tests.e2e.helpers import (
    Api,
    AuditLog,
    Cluster,
    SchedulerProcess,
    forbidden_lines,
    scheduler_processes,
    serving_request,
    unique,
    wait_for,
    write_profile,
)
from tests.e2e.test_rbac import RBAC_FILE, SA_FILE, apply, manifests

pytestmark = pytest.mark.e2e

METRICS_READER_FILE = REPO_ROOT / "deploy" / "metrics-reader.yaml"
CLUSTER_ROLES = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
CLUSTER_ROLE_BINDINGS = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"


async def service_account_token(api: Api, namespace: str, name: str) -> str:
    """A ServiceAccount and a token for it, from the TokenRequest API (no controller needed)."""
    await api.post(f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": name}})
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    answer = await api.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", request)
    token: str = answer["status"]["token"]
    return token


def binding(name: str, role: str, namespace: str, account: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }


async def test_anonymous_and_authorized_access(
    api: Api, cluster: Cluster, kube_env: KubeEnv, tmp_path: Path, audit_log: AuditLog
) -> None:
    applied = await apply(api, manifests(SA_FILE) + manifests(RBAC_FILE) + manifests(METRICS_READER_FILE))
    ns = cluster.ns
    configz_role = unique("e2e-configz-reader")
    extra = [f"{CLUSTER_ROLES}/{configz_role}"]
    try:
        await api.post(
            CLUSTER_ROLES,
            {
                "metadata": {"name": configz_role},
                "rules": [{"nonResourceURLs": ["/configz"], "verbs": ["get"]}],
            },
        )
        reader = await service_account_token(api, ns, "scraper")
        stranger = await service_account_token(api, ns, "stranger")
        debugger = await service_account_token(api, ns, "debugger")
        for name, role, account in (
            (unique("e2e-metrics"), "koordsched-metrics-reader", "scraper"),
            (unique("e2e-configz"), configz_role, "debugger"),
        ):
            await api.post(CLUSTER_ROLE_BINDINGS, binding(name, role, ns, account))
            extra.append(f"{CLUSTER_ROLE_BINDINGS}/{name}")
        await check_access(kube_env, tmp_path, audit_log, ns, reader, stranger, debugger)
    finally:
        for path in reversed(applied + extra):
            await api.delete(path, grace=None)


async def check_access(
    kube_env: KubeEnv,
    tmp_path: Path,
    audit_log: AuditLog,
    ns: str,
    reader: str,
    stranger: str,
    debugger: str,
) -> None:
    config = write_profile(tmp_path / "profile.yaml", lease_name=unique("unused"), leader_elect=False)
    kubeconfig = tmp_path / "kubeconfig-rbac"  # a plain name: see test_rbac.py
    kubeconfig.write_bytes(kube_env.kubeconfig_for(RBAC_USER).read_bytes())
    kubeconfig.chmod(0o600)
    mark = audit_log.mark()
    # Long cache lifetimes, so that the number of reviews below does not depend on timing.
    ttl = "5m"
    flags = [
        f"--authentication-token-webhook-cache-ttl={ttl}",
        f"--authorization-webhook-cache-authorized-ttl={ttl}",
        f"--authorization-webhook-cache-unauthorized-ttl={ttl}",
    ]
    with scheduler_processes() as procs:
        sched = SchedulerProcess("sched-serving", config, kubeconfig, tmp_path, extra_args=flags)
        procs.append(sched)

        async def ready() -> bool:
            assert sched.alive, sched.tail()
            answer = await serving_request(sched.port, "/readyz")
            return answer is not None and answer[0] == 200

        await wait_for(ready, what="/readyz over HTTPS without credentials", detail=sched.tail)

        async def get(path: str, token: str | None = None) -> tuple[int, Any]:
            answer = await serving_request(sched.port, path, token=token)
            assert answer is not None, f"no answer to {path}\n{sched.tail()}"
            code, body = answer
            try:
                return code, json.loads(body)
            except ValueError:
                return code, body.decode(errors="replace")

        # The probes need no credentials.
        for path in ("/healthz", "/livez", "/readyz"):
            assert await get(path) == (200, "ok"), path
        # Anonymous: 403 for everything else, with kube-scheduler's message.
        for path in ("/metrics", "/configz", "/livez/ping"):
            code, body = await get(path)
            assert code == 403, (path, body)
            assert body["reason"] == "Forbidden"
            assert body["message"] == f'forbidden: User "system:anonymous" cannot get path "{path}"'
        # A token the API server does not know: 401, whatever the path.
        for path in ("/metrics", "/livez"):
            code, body = await get(path, "not-a-token")
            assert (code, body["reason"], body["message"]) == (401, "Unauthorized", "Unauthorized")
        # The scraper: /metrics, and nothing more.
        for _ in range(2):
            code, body = await get("/metrics", reader)
            assert code == 200 and "scheduler_schedule_attempts_total" in body, body
        code, body = await get("/configz", reader)
        assert code == 403
        user = f"system:serviceaccount:{ns}:scraper"
        assert body["message"] == f'forbidden: User "{user}" cannot get path "/configz"'
        # A ServiceAccount without a binding.
        code, body = await get("/metrics", stranger)
        assert code == 403
        assert (
            body["message"]
            == f'forbidden: User "system:serviceaccount:{ns}:stranger" cannot get path "/metrics"'
        )
        # Allowed /configz only.
        code, body = await get("/configz", debugger)
        assert code == 200 and body["componentconfig"]["kind"] == "KubeSchedulerConfiguration", body
        assert (await get("/metrics", debugger))[0] == 403
        # Once more, everything: answered from the caches.
        assert (await get("/metrics"))[0] == 403
        assert (await get("/metrics", reader))[0] == 200
        assert (await get("/metrics", "not-a-token"))[0] == 401
        log = sched.log_text()

    assert "Traceback" not in log, log
    # The scrapers' 403s are logged at debug level only; the scheduler's own requests were all allowed.
    assert forbidden_lines(log) == [], "\n".join(forbidden_lines(log))
    mine = [e for e in audit_log.events(mark) if e.user == RBAC_USER]
    assert [(e.verb, e.uri, e.code) for e in mine if e.code == 403] == []
    reviews = [e for e in mine if e.resource == "tokenreviews"]
    accesses = [e for e in mine if e.resource == "subjectaccessreviews"]
    assert all(e.verb == "create" and e.code == 201 for e in reviews + accesses), reviews + accesses
    # One TokenReview per distinct token (a rejected one is remembered too) and one
    # SubjectAccessReview per distinct user and path: the rest came from the caches.
    assert len(reviews) == 4, [e.uri for e in reviews]
    assert len(accesses) == 8, [e.uri for e in accesses]
    lookups = [e for e in mine if (e.verb, e.resource, e.namespace) == ("get", "configmaps", "kube-system")]
    assert len(lookups) == 1 and lookups[0].code in (200, 404), lookups
