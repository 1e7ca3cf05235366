"""Smoke test of the e2e control plane: objects round-trip, survive an apiserver restart, RBAC holds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.rest import ApiException

from tests.e2e.apiserver import KubeEnv
from tests.e2e.fixtures import control_plane

pytestmark = pytest.mark.e2e

LIMITED_USER = "e2e-limited"
LIMITED_GROUP = "koordsched:e2e-limited"


kube_env = control_plane({LIMITED_USER: [LIMITED_GROUP]})


@asynccontextmanager
async def core_v1(kubeconfig: Path) -> AsyncIterator[client.CoreV1Api]:
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
    async with client.ApiClient(configuration=cfg) as api:
        yield client.CoreV1Api(api)


def make_node(name: str) -> client.V1Node:
    return client.V1Node(
        metadata=client.V1ObjectMeta(name=name, labels={"koordsched.io/e2e": "true"}),
        status=client.V1NodeStatus(
            capacity={"cpu": "8", "memory": "32Gi", "pods": "110"},
            allocatable={"cpu": "8", "memory": "32Gi", "pods": "110"},
        ),
    )


def make_pod(name: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, namespace="default"),
        spec=client.V1PodSpec(
            scheduler_name="koord-scheduler",
            containers=[
                client.V1Container(
                    name="main",
                    image="registry.k8s.io/pause:3.2",
                    resources=client.V1ResourceRequirements(requests={"cpu": "500m", "memory": "1Gi"}),
                )
            ],
        ),
    )


async def bind(v1: client.CoreV1Api, pod: str, node: str) -> None:
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
    )
    # The generated client cannot deserialize the Status that the binding subresource returns.
    resp = await v1.create_namespaced_pod_binding(pod, "default", body, _preload_content=False)
    assert resp.status == 201, await resp.text()
    resp.release()


async def test_node_and_pod_round_trip(kube_env: KubeEnv) -> None:
    async with core_v1(kube_env.kubeconfig_path) as v1:
        await v1.create_node(make_node("smoke-node-1"))
        await v1.create_namespaced_pod("default", make_pod("smoke-pod-1"))

        node = await v1.read_node("smoke-node-1")
        assert node.status.allocatable["cpu"] == "8"
        assert not node.spec.taints, "TaintNodesByCondition must be disabled (no node controller)"

        pod = await v1.read_namespaced_pod("smoke-pod-1", "default")
        assert pod.spec.scheduler_name == "koord-scheduler"
        assert pod.spec.node_name is None
        assert pod.status.phase == "Pending"

        await bind(v1, "smoke-pod-1", "smoke-node-1")
        pod = await v1.read_namespaced_pod("smoke-pod-1", "default")
        assert pod.spec.node_name == "smoke-node-1"


async def test_objects_survive_apiserver_restart(kube_env: KubeEnv) -> None:
    async with core_v1(kube_env.kubeconfig_path) as v1:
        await v1.create_node(make_node("restart-node-1"))
        await v1.create_namespaced_pod("default", make_pod("restart-pod-1"))
        await bind(v1, "restart-pod-1", "restart-node-1")
        rv = (await v1.list_namespaced_pod("default")).metadata.resource_version

    await asyncio.to_thread(kube_env.restart_apiserver)

    # A fresh client (the old connections died with the server); same kubeconfig, CA and token.
    async with core_v1(kube_env.kubeconfig_path) as v1:
        node = await v1.read_node("restart-node-1")
        assert node.metadata.labels["koordsched.io/e2e"] == "true"
        pod = await v1.read_namespaced_pod("restart-pod-1", "default")
        assert pod.spec.node_name == "restart-node-1"
        names = {p.metadata.name for p in (await v1.list_namespaced_pod("default")).items}
        assert {"restart-pod-1"} <= names

        # Watching from a pre-restart resourceVersion either resumes, or (the new watch cache
        # starts at a later revision) answers 410 Expired, after which a relist + watch works:
        # what an informer does, and what the scheduler's watches must survive.
        await v1.create_namespaced_pod("default", make_pod("restart-pod-2"))
        try:
            seen = await watch_until(v1, rv, "restart-pod-2")
            assert ("ADDED", "restart-pod-2") in seen
        except ApiException as exc:
            assert exc.status == 410, exc
            listed = await v1.list_namespaced_pod("default")
            assert "restart-pod-2" in {p.metadata.name for p in listed.items}
            watching = asyncio.create_task(watch_until(v1, listed.metadata.resource_version, "restart-pod-3"))
            try:
                await asyncio.sleep(0.5)
                await v1.create_namespaced_pod("default", make_pod("restart-pod-3"))
                assert ("ADDED", "restart-pod-3") in await watching
            finally:
                watching.cancel()


async def watch_until(v1: client.CoreV1Api, rv: str, name: str) -> list[tuple[str, str]]:
    seen = []
    async with watch.Watch() as w:
        async for event in w.stream(
            v1.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=10
        ):
            seen.append((event["type"], event["object"].metadata.name))
            if event["object"].metadata.name == name:
                break
    return seen


async def test_token_user_is_subject_to_rbac(kube_env: KubeEnv) -> None:
    async with core_v1(kube_env.kubeconfig_for(LIMITED_USER)) as limited:
        with pytest.raises(ApiException) as denied:
            await limited.list_node()
        assert denied.value.status == 403

        async with core_v1(kube_env.kubeconfig_path) as admin_v1:
            rbac = client.RbacAuthorizationV1Api(admin_v1.api_client)
            await rbac.create_cluster_role(
                client.V1ClusterRole(
                    metadata=client.V1ObjectMeta(name="e2e-node-reader"),
                    rules=[client.V1PolicyRule(api_groups=[""], resources=["nodes"], verbs=["list"])],
                )
            )
            await rbac.create_cluster_role_binding(
                client.V1ClusterRoleBinding(
                    metadata=client.V1ObjectMeta(name="e2e-node-reader"),
                    role_ref=client.V1RoleRef(
                        api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="e2e-node-reader"
                    ),
                    subjects=[
                        client.RbacV1Subject(
                            api_group="rbac.authorization.k8s.io", kind="Group", name=LIMITED_GROUP
                        )
                    ],
                )
            )

        # The RBAC authorizer reads roles from an informer cache: allow it a moment.
        for _ in range(50):
            try:
                nodes = await limited.list_node()
                break
            except ApiException as exc:
                assert exc.status == 403
                await asyncio.sleep(0.1)
        else:
            pytest.fail("limited user still forbidden 5 s after the ClusterRoleBinding")
        assert nodes.items is not None
