"""``DevicePluginAdaption``'s API writes through the kube port (spec C.5): the node lock's read of
the Node and of the locking pod, its one merge patch of the Node (conditional on the
resourceVersion read, with the write timeout), and the pod labels a Binding cannot carry."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import msgspec
import pytest

from koordsched.api.core import Pod
from koordsched.backends.kube.client import MERGE_PATCH, STRATEGIC_MERGE_PATCH, KubeClient
from koordsched.backends.kube.port import KubePort
from koordsched.framework.interface import BindError
from koordsched.framework.types import BindingPlan
from koordsched.plugins.deviceshare.node_lock import NodeLockError, NodeLocks, NodeLockWriter, lock_value
from tests.kube.fake_apiserver import NODES, PODS, FakeApiServer, node_json, pod_json

LOCK = "hami.io/mutex.lock"
NODE_PATH = "/api/v1/nodes/n1"


@pytest.fixture
async def port(client: KubeClient) -> AsyncIterator[KubePort]:
    p = KubePort(client, write_timeout=0.5)
    try:
        yield p
    finally:
        await p.close()


async def take(port: KubePort, now: float) -> None:
    await NodeLocks().lock(port, "n1", LOCK, "default", "p", now)


async def test_a_free_node_is_patched_once_on_the_resource_version_read(
    api: FakeApiServer, port: KubePort
) -> None:
    assert isinstance(port, NodeLockWriter)
    stored = api.add(NODES, node_json("n1", annotations={"keep": "me"}))
    now = time.time()
    await take(port, now)
    (req,) = api.requests_to("PATCH", NODE_PATH)
    assert req.content_type.startswith(MERGE_PATCH)
    value = lock_value(now, "default", "p")
    assert req.body == {
        "metadata": {"annotations": {LOCK: value}, "resourceVersion": stored["metadata"]["resourceVersion"]}
    }
    assert api.get(NODES, "n1")["metadata"]["annotations"] == {"keep": "me", LOCK: value}


async def test_a_lock_an_existing_pod_took_a_minute_ago_is_kept(api: FakeApiServer, port: KubePort) -> None:
    now = time.time()
    api.add(PODS, pod_json("holder", node="n1"))
    held = lock_value(now - 60, "default", "holder")
    api.add(NODES, node_json("n1", annotations={LOCK: held}))
    with pytest.raises(NodeLockError, match=r'^failed to lock node: node "n1" has been locked$'):
        await take(port, now)
    assert api.requests_to("GET", "/api/v1/namespaces/default/pods/holder")
    assert not api.requests_to("PATCH", NODE_PATH)
    assert api.get(NODES, "n1")["metadata"]["annotations"] == {LOCK: held}


@pytest.mark.parametrize(
    ("ago", "holder_exists"), [(360, True), (60, False)], ids=["expired", "locker deleted"]
)
async def test_a_stale_lock_is_replaced(
    api: FakeApiServer, port: KubePort, ago: float, holder_exists: bool
) -> None:
    now = time.time()
    if holder_exists:
        api.add(PODS, pod_json("holder", node="n1"))
    api.add(NODES, node_json("n1", annotations={LOCK: lock_value(now - ago, "default", "holder")}))
    await take(port, now)
    assert api.get(NODES, "n1")["metadata"]["annotations"] == {LOCK: lock_value(now, "default", "p")}


async def test_an_invalid_lock_and_a_missing_node_are_errors(api: FakeApiServer, port: KubePort) -> None:
    with pytest.raises(NodeLockError, match=r'^failed to lock node: node "n1" not found$'):
        await take(port, time.time())
    api.add(NODES, node_json("n1", annotations={LOCK: "x"}))
    with pytest.raises(NodeLockError, match=r'^failed to lock node: invalid node lock value "x"$'):
        await take(port, time.time())
    assert not api.requests_to("PATCH", NODE_PATH)


async def test_a_node_changed_since_the_read_is_refused(api: FakeApiServer, port: KubePort) -> None:
    """The patch carries the resourceVersion read: a conflict fails the lock instead of overwriting."""

    class Stale(KubePort):
        async def read_node_annotations(self, node_name: str) -> tuple[dict[str, str], str]:
            return {}, "1"

    api.add(NODES, node_json("n1"))
    stale = Stale(port.client, write_timeout=0.5)
    try:
        with pytest.raises(NodeLockError, match=r"failed to lock node: .*modified"):
            await NodeLocks().lock(stale, "n1", LOCK, "default", "p", time.time())
    finally:
        await stale.close()


async def test_a_hung_patch_ends_at_the_write_timeout(api: FakeApiServer, port: KubePort) -> None:
    api.add(NODES, node_json("n1"))
    api.stall("PATCH", NODE_PATH)
    with pytest.raises(NodeLockError, match=r"^failed to lock node: "):
        await take(port, time.time())


async def test_plan_labels_are_patched_onto_the_pod_before_the_binding(
    api: FakeApiServer, port: KubePort
) -> None:
    created = api.add(PODS, pod_json("p"))
    pod = msgspec.convert(api.get(PODS, "default/p"), Pod)
    plan = BindingPlan(annotations={"a": "1"}, labels={"hami.io/vgpu-node": "n1"})
    await port.bind(pod, "n1", plan)
    patch, binding = [r for r in api.requests if r.path.startswith("/api/v1/namespaces/default/pods/p")]
    assert (patch.method, binding.method) == ("PATCH", "POST")
    assert patch.content_type.startswith(STRATEGIC_MERGE_PATCH)
    assert patch.body == {
        "metadata": {"labels": {"hami.io/vgpu-node": "n1"}, "uid": created["metadata"]["uid"]}
    }
    bound = api.get(PODS, "default/p")
    assert bound["metadata"]["labels"]["hami.io/vgpu-node"] == "n1"
    assert bound["spec"]["nodeName"] == "n1"


async def test_a_refused_label_patch_is_a_bind_error(api: FakeApiServer, port: KubePort) -> None:
    api.add(PODS, pod_json("p"))
    pod = msgspec.convert(api.get(PODS, "default/p"), Pod)
    api.fail("PATCH", "/api/v1/namespaces/default/pods/p", 403)
    with pytest.raises(BindError):
        await port.bind(pod, "n1", BindingPlan(labels={"hami.io/vgpu-node": "n1"}))
    assert not api.get(PODS, "default/p")["spec"].get("nodeName")
