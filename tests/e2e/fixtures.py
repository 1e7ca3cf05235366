"""Set-up that e2e modules share: a control plane of the module's own, and a scheduler lease.

A module that needs its own etcd + kube-apiserver (one that restarts it, reads its audit log
alone, or runs a binder that would disturb other tests' nodes) writes

    module_dir, audit_log, kube_env = audited_control_plane("e2e-gang", {USER: ["system:masters"]})

or ``kube_env = control_plane(users)`` when it reads no audit log; the session's ``api`` and
``cluster`` fixtures then use it.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.apiserver import KubeEnv, bin_dir_or_skip
from tests.e2e.helpers import LEASE_NAMESPACE, Api, AuditLog, Cluster, audited_kube_env, unique


def post_as_admin(env: KubeEnv, path: str, obj: object) -> tuple[int, bytes]:
    """POST with the admin token, before any event loop runs (module- and session-scoped set-up)."""
    ctx = ssl.create_default_context(cafile=str(env.ca_file))
    req = urllib.request.Request(
        env.url + path,
        method="POST",
        data=json.dumps(obj).encode(),
        headers={"Authorization": f"Bearer {env.admin_token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def create_lease_namespace(env: KubeEnv) -> None:
    status, body = post_as_admin(env, "/api/v1/namespaces", {"metadata": {"name": LEASE_NAMESPACE}})
    assert status in (201, 409), body


def audited_control_plane(
    prefix: str, users: dict[str, list[str]], *, lease_namespace: bool = False
) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """Module-scoped ``module_dir``, ``audit_log`` and ``kube_env`` fixtures: an etcd +
    kube-apiserver of the module's own, writing its audit log under ``module_dir``, with these
    token users; ``lease_namespace`` creates the leases' namespace first."""

    @pytest.fixture(scope="module")
    def module_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
        return tmp_path_factory.mktemp(prefix)

    @pytest.fixture(scope="module")
    def audit_log(module_dir: Path) -> AuditLog:
        return AuditLog(module_dir / "audit.log")

    @pytest.fixture(scope="module")
    def kube_env(module_dir: Path, audit_log: AuditLog) -> Iterator[KubeEnv]:
        with audited_kube_env(module_dir, audit_log, users) as env:
            if lease_namespace:
                create_lease_namespace(env)
            yield env

    return module_dir, audit_log, kube_env


def control_plane(users: dict[str, list[str]] | None = None, **options: Any) -> Callable[..., Any]:
    """A module-scoped ``kube_env`` fixture: an etcd + kube-apiserver of the module's own, with
    these token users; ``options`` go to KubeEnv."""

    @pytest.fixture(scope="module")
    def kube_env() -> Iterator[KubeEnv]:
        extra = {"extra_users": users} if users else {}
        with KubeEnv(bin_dir=bin_dir_or_skip(), **options, **extra) as env:
            yield env

    return kube_env


async def own_lease(api: Api, cluster: Cluster, name: str | None = None) -> str:
    """A leader-election lease name for this test's scheduler (unique unless ``name`` is given),
    in a namespace that exists, deleted at the cluster's teardown."""
    await api.ensure_namespace(LEASE_NAMESPACE)
    lease = name or unique("koord-scheduler")
    cluster.leases.append((LEASE_NAMESPACE, lease))
    return lease
