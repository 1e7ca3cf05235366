"""The Koordinator CRDs on the real apiserver: custom resources are created and read back.

kube-apiserver 1.20.2 built with Go >= 1.18 against the vendored reflect2 v1.0.1 accepts
CustomResourceDefinitions but dies with SIGSEGV on the first create of any custom resource;
``scripts/kube-env`` builds it with Debian's reflect2 1.0.2 instead. This test guards that: it
applies ``deploy/crds/``, then creates, reads, lists, patches and deletes one Device and one
NodeResourceTopology taken from ``examples/gpu-numa-cluster.yaml`` and one NodeMetric from
``examples/mixed-workloads.yaml`` (its status written through the status subresource, as koordlet
does), and checks that the apiserver is still running afterwards.

It runs its own control plane, so that the CRDs stay out of the shared one of the other tests.
"""

from __future__ import annotations

import contextlib
import copy
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.apiserver import REPO_ROOT, KubeEnv, _tail
from tests.e2e.fixtures import control_plane
from tests.e2e.helpers import Api, ApiError, wait_for

pytestmark = pytest.mark.e2e

CRD_DIR = REPO_ROOT / "deploy" / "crds"
EXAMPLE = REPO_ROOT / "examples" / "gpu-numa-cluster.yaml"
MIXED_EXAMPLE = REPO_ROOT / "examples" / "mixed-workloads.yaml"
RESERVATION_EXAMPLE = REPO_ROOT / "examples" / "reservations.yaml"
TOPOLOGY_EXAMPLE = REPO_ROOT / "examples" / "network-topology.yaml"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CRD_NAMES = {
    "devices.scheduling.koordinator.sh",
    "noderesourcetopologies.topology.node.k8s.io",
    "nodemetrics.slo.koordinator.sh",
    "reservations.scheduling.koordinator.sh",
    "podgroups.scheduling.sigs.k8s.io",
    "elasticquotas.scheduling.sigs.k8s.io",
    "clusternetworktopologies.scheduling.koordinator.sh",
}
# kind -> collection path of the cluster-scoped custom resource
COLLECTIONS = {
    "Device": "/apis/scheduling.koordinator.sh/v1alpha1/devices",
    "NodeResourceTopology": "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies",
    "NodeMetric": "/apis/slo.koordinator.sh/v1alpha1/nodemetrics",
    "Reservation": "/apis/scheduling.koordinator.sh/v1alpha1/reservations",
    "ClusterNetworkTopology": "/apis/scheduling.koordinator.sh/v1alpha1/clusternetworktopologies",
}
SERVER_METADATA = {"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"}


kube_env = control_plane()


@pytest.fixture
async def api(kube_env: KubeEnv) -> AsyncIterator[Api]:
    async with Api(kube_env) as a:
        yield a


def crds() -> list[dict[str, Any]]:
    docs = [
        doc
        for path in sorted(CRD_DIR.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
    ]
    assert {d["metadata"]["name"] for d in docs} == CRD_NAMES
    return docs


def first_example(kind: str) -> dict[str, Any]:
    for path in (EXAMPLE, MIXED_EXAMPLE, RESERVATION_EXAMPLE, TOPOLOGY_EXAMPLE):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == kind:
                return doc
    raise AssertionError(f"no {kind} in {EXAMPLE}, {MIXED_EXAMPLE} or {RESERVATION_EXAMPLE}")


def crash_report(log: Path) -> str:
    """The start of a Go crash in ``log`` (the tail is only goroutine dumps), else its last lines."""
    lines = log.read_text(errors="replace").splitlines()
    for i, line in enumerate(lines):
        if line.startswith(("panic:", "fatal error:", "unexpected fault", "[signal ")):
            return "\n".join(lines[max(0, i - 2) : i + 25])
    return _tail(log)


def assert_alive(env: KubeEnv) -> None:
    proc = env._apiserver
    assert proc is not None, "KubeEnv not running"
    try:
        status, body = env.request("/readyz")
    except OSError as exc:  # refused: it is probably dying, give it a moment to exit
        status, body = 0, repr(exc).encode()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.popen.wait(5)
    assert proc.alive(), (
        f"kube-apiserver died (exit status {proc.popen.returncode}); "
        f"from {env.apiserver_log}:\n{crash_report(env.apiserver_log)}"
    )
    assert (status, body.strip()) == (200, b"ok"), (status, body[-500:])


def content(obj: dict[str, Any]) -> dict[str, Any]:
    """What the client wrote: everything but metadata the server fills in."""
    out = copy.deepcopy(obj)
    meta = out.get("metadata", {})
    for key in SERVER_METADATA:
        meta.pop(key, None)
    return out


async def install_crds(api: Api) -> None:
    for crd in crds():
        try:
            await api.post(CRD_PATH, crd)
        except ApiError as err:
            if err.status != 409:  # already there (module fixture, test rerun)
                raise

    async def established() -> bool:
        for name in CRD_NAMES:
            crd = await api.get(f"{CRD_PATH}/{name}")
            status = crd.get("status") or {}
            conds = {c["type"]: c["status"] for c in status.get("conditions") or []}
            if conds.get("Established") != "True" or conds.get("NamesAccepted") != "True":
                return False
        return True

    await wait_for(established, what="CRDs Established")

    async def served() -> bool:
        # Established can precede the handler by a moment: wait for the collections to answer.
        for path in COLLECTIONS.values():
            try:
                await api.get(path)
            except ApiError as err:
                if err.status == 404:
                    return False
                raise
        return True

    await wait_for(served, what="custom resource collections served")


@pytest.mark.parametrize("kind", sorted(COLLECTIONS))
async def test_custom_resource_round_trip(kube_env: KubeEnv, api: Api, kind: str) -> None:
    await install_crds(api)
    assert_alive(kube_env)

    obj = first_example(kind)
    name = obj["metadata"]["name"]
    path = COLLECTIONS[kind]
    await api.delete(f"{path}/{name}")  # a leftover of an earlier parametrization or rerun

    try:
        created = await api.post(path, obj)
    except Exception:
        assert_alive(kube_env)  # a crash (the reflect2 bug) says so, with the apiserver's log
        raise
    assert_alive(kube_env)
    assert created["metadata"]["uid"]
    if "status" in obj:
        # The status subresource: a create keeps only the spec; status is written on its own.
        without = {k: v for k, v in obj.items() if k != "status"}
        assert content(created) == content(without), "the server changed (pruned or defaulted) the object"
        created = await api.put(f"{path}/{name}/status", {**created, "status": obj["status"]})
        assert_alive(kube_env)
    assert content(created) == content(obj), "the server changed (pruned or defaulted) the object"

    read = await api.get(f"{path}/{name}")
    assert content(read) == content(obj)
    assert read["metadata"]["uid"] == created["metadata"]["uid"]

    listed = await api.get(path)
    assert [item["metadata"]["name"] for item in listed["items"]] == [name]
    assert content(listed["items"][0]) == content(obj)

    patched = await api.patch(f"{path}/{name}", {"metadata": {"labels": {"koordsched.io/e2e": "crd"}}})
    assert patched["metadata"]["labels"]["koordsched.io/e2e"] == "crd"
    expected = content(obj)
    expected["metadata"].setdefault("labels", {})["koordsched.io/e2e"] = "crd"
    assert content(await api.get(f"{path}/{name}")) == expected

    await api.delete(f"{path}/{name}", missing_ok=False)
    assert await api.get_or_none(f"{path}/{name}") is None
    assert_alive(kube_env)
