"""Fixtures of the end-to-end suite: one control plane for the session, one namespace per test.

The control plane (etcd + kube-apiserver 1.20.2, see ``apiserver.py``) writes an audit log of
every request (watches and the apiserver's own traffic left out), which the tests read to count
binding attempts and to find any request that was refused. Token users:

* ``e2e-koordsched``: the scheduler's identity in most tests (``system:masters``);
* ``system:serviceaccount:koordinator-system:koordsched``: the identity the ServiceAccount in
  ``deploy/rbac.yaml`` would have, so that the file's bindings apply to it verbatim.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.e2e.apiserver import KubeEnv
from tests.e2e.fixtures import create_lease_namespace
from tests.e2e.helpers import Api, AuditLog, Cluster, audited_kube_env, unique

SCHEDULER_USER = "e2e-koordsched"
RBAC_SA_NAMESPACE = "koordinator-system"
RBAC_SA_NAME = "koordsched"
RBAC_USER = f"system:serviceaccount:{RBAC_SA_NAMESPACE}:{RBAC_SA_NAME}"
RBAC_GROUPS = ["system:serviceaccounts", f"system:serviceaccounts:{RBAC_SA_NAMESPACE}"]


@pytest.fixture(scope="session")
def e2e_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="session")
def audit_log(e2e_dir: Path) -> AuditLog:
    return AuditLog(e2e_dir / "audit.log")


@pytest.fixture(scope="session")
def kube_env(e2e_dir: Path, audit_log: AuditLog) -> Iterator[KubeEnv]:
    env = audited_kube_env(e2e_dir, audit_log, {SCHEDULER_USER: ["system:masters"], RBAC_USER: RBAC_GROUPS})
    with env:
        create_lease_namespace(env)
        yield env


@pytest.fixture
async def api(kube_env: KubeEnv) -> AsyncIterator[Api]:
    async with Api(kube_env) as a:
        yield a


@pytest.fixture
async def cluster(api: Api, request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    """A fresh namespace for the test; its pods, the test's nodes and leases go at teardown."""
    short = request.node.name.removeprefix("test_").replace("_", "-")[:30].strip("-")
    c = await Cluster(api, unique(short)).setup()
    try:
        yield c
    finally:
        await c.cleanup()


@pytest.fixture
def scheduler_kubeconfig(kube_env: KubeEnv) -> Path:
    return kube_env.kubeconfig_for(SCHEDULER_USER)
