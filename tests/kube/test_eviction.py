"""The Eviction API version, read once from discovery, and the descheduler's evictions in it."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from koordsched.api.core import Pod
from koordsched.backends.kube.client import KubeClient
from koordsched.backends.kube.deschedule_port import KubeMigrationPort
from koordsched.backends.kube.eviction import EvictionApi, eviction_version
from koordsched.descheduler.migration import job as pmj
from koordsched.descheduler.migration.controller import BLOCKED, ERROR, EVICTED, GONE
from tests.kube.fake_apiserver import PODS, FakeApiServer, pod_json

EVICTION_PATH = "/api/v1/namespaces/default/pods/p/eviction"


def _resource(**fields: Any) -> dict[str, Any]:
    return {"name": "pods/eviction", "namespaced": True, "kind": "Eviction", "verbs": ["create"], **fields}


@pytest.mark.parametrize(
    ("discovery", "version"),
    [
        # kube-apiserver 1.20/1.21: pods/eviction is policy/v1beta1.
        ({"resources": [{"name": "pods"}, _resource(group="policy", version="v1beta1")]}, "v1beta1"),
        # 1.22 on: policy/v1.
        ({"resources": [_resource(group="policy", version="v1")]}, "v1"),
        # No group/version on the entry, or no entry: what servers before 1.22 take.
        ({"resources": [_resource()]}, "v1beta1"),
        ({"resources": [{"name": "pods"}]}, "v1beta1"),
        ({"resources": [_resource(group="policy", version="")]}, "v1beta1"),
        ({"resources": "nonsense"}, "v1beta1"),
        (None, "v1beta1"),
        ([], "v1beta1"),
    ],
)
def test_the_version_is_pods_evictions_in_core_discovery(discovery: Any, version: str) -> None:
    assert eviction_version(discovery) == version


def _job(delete_options: dict[str, Any] | None = None) -> pmj.PodMigrationJob:
    return pmj.PodMigrationJob(
        metadata=pmj.ObjectMeta(name="j"),
        spec=pmj.PodMigrationJobSpec(
            mode="EvictDirectly",
            pod_ref=pmj.PodRef(namespace="default", name="p"),
            delete_options=delete_options,
        ),
    )


def _port(client: KubeClient) -> KubeMigrationPort:
    return KubeMigrationPort(client, None, None)  # type: ignore[arg-type]  # neither is used to evict


@pytest.mark.parametrize(
    ("served", "sent"),
    [(("v1beta1",), "policy/v1beta1"), (("v1beta1", "v1"), "policy/v1"), (("v1",), "policy/v1")],
)
async def test_the_descheduler_evicts_in_the_version_the_server_takes(
    api: FakeApiServer, client: KubeClient, served: tuple[str, ...], sent: str
) -> None:
    api.eviction_versions = served
    port = _port(client)
    for name in ("p", "q"):
        api.add(PODS, pod_json(name))
    options = {"gracePeriodSeconds": 5}
    for name in ("p", "q"):
        pod = msgspec.convert(api.get(PODS, f"default/{name}"), Pod)
        result = await port.evict(pod, _job(options), "Eviction")
        assert result.outcome == EVICTED, result
    assert [r.body["apiVersion"] for r in api.requests if r.path.endswith("/eviction")] == [sent, sent]
    assert api.requests_to("POST", EVICTION_PATH)[0].body == {
        "apiVersion": sent,
        "kind": "Eviction",
        "metadata": {"name": "p", "namespace": "default"},
        "deleteOptions": options,
    }
    assert len(api.requests_to("GET", "/api/v1")) == 1  # looked up once, for both
    assert not api.collections[PODS].objects


async def test_a_server_taking_only_v1_refuses_v1beta1(api: FakeApiServer, client: KubeClient) -> None:
    """The fake server tells the versions apart, so the test above can fail."""
    api.eviction_versions = ("v1",)
    api.add(PODS, pod_json("p"))
    port = _port(client)
    port.evictions._version = "v1beta1"  # as the port used to send, whatever the server
    result = await port.evict(msgspec.convert(api.get(PODS, "default/p"), Pod), _job(), "Eviction")
    assert result.outcome == ERROR
    assert 'no kind "Eviction" is registered for version "policy/v1beta1"' in result.message


async def test_a_failed_lookup_is_retried_by_the_next_eviction(
    api: FakeApiServer, client: KubeClient
) -> None:
    api.eviction_versions = ("v1",)
    api.add(PODS, pod_json("p"))
    api.fail("GET", "/api/v1", 503)
    port = _port(client)
    pod = msgspec.convert(api.get(PODS, "default/p"), Pod)
    first = await port.evict(pod, _job(), "Eviction")
    assert first.outcome == BLOCKED  # transient: the job tries again
    assert not api.requests_to("POST", EVICTION_PATH)
    assert (await port.evict(pod, _job(), "Eviction")).outcome == EVICTED
    assert api.requests_to("POST", EVICTION_PATH)[0].body["apiVersion"] == "policy/v1"
    assert len(api.requests_to("GET", "/api/v1")) == 2


async def test_a_gone_pod_is_gone_in_either_version(api: FakeApiServer, client: KubeClient) -> None:
    api.eviction_versions = ("v1",)
    pod = msgspec.convert(pod_json("p", uid="u1"), Pod)
    assert (await _port(client).evict(pod, _job(), "Eviction")).outcome == GONE


async def test_the_body_carries_delete_options_only_when_given(
    api: FakeApiServer, client: KubeClient
) -> None:
    api.eviction_versions = ("v1beta1",)
    evictions = EvictionApi(client, timeout=5.0)
    assert await evictions.body("p", "ns", None) == {
        "apiVersion": "policy/v1beta1",
        "kind": "Eviction",
        "metadata": {"name": "p", "namespace": "ns"},
    }
    precondition = {"preconditions": {"uid": "u1"}}
    assert (await evictions.body("p", "ns", precondition))["deleteOptions"] == precondition
    assert len(api.requests_to("GET", "/api/v1")) == 1


async def test_an_old_server_without_the_entry_gets_v1beta1(api: FakeApiServer, client: KubeClient) -> None:
    api.eviction_versions = ()
    assert await EvictionApi(client, timeout=5.0).version() == "v1beta1"
