"""A pod with neither ``resource-spec`` nor ``numa-topology-spec`` is read without decoding either
annotation: the reading equals the one from the annotations written out with their defaults
(``{}``), for every QoS class and request shape, and annotations that are present are still
decoded and checked."""

from __future__ import annotations

from typing import Any

import pytest

from koordsched.api.koordinator import ANNOTATION_NUMA_TOPOLOGY_SPEC, ANNOTATION_RESOURCE_SPEC
from koordsched.framework.status import Code, Status
from koordsched.plugins.nodenumaresource.prefilter import PreFilterState, pod_request
from tests.plugins.numa.helpers import add_nrt, make_pod, pod_info


@pytest.mark.parametrize("qos", [None, "LSR", "LSE", "LS", "BE"])
@pytest.mark.parametrize("requests", [{"cpu": "4", "memory": "1Gi"}, {"cpu": "1500m"}, {"memory": "1Gi"}, {}])
@pytest.mark.parametrize("default_policy", ["", "FullPCPUs"])
def test_no_annotation_reads_as_the_defaults(
    qos: str | None, requests: dict[str, Any], default_policy: str
) -> None:
    plain = pod_request(pod_info(make_pod(requests=requests, qos=qos)), default_policy)
    explicit = pod_request(
        pod_info(
            make_pod(
                requests=requests,
                qos=qos,
                annotations={ANNOTATION_RESOURCE_SPEC: "{}", ANNOTATION_NUMA_TOPOLOGY_SPEC: "{}"},
            )
        ),
        default_policy,
    )
    if isinstance(plain, Status):
        assert isinstance(explicit, Status)
        assert (plain.code, plain.reasons) == (explicit.code, explicit.reasons)
    else:
        assert isinstance(explicit, PreFilterState)
        assert plain.skip == explicit.skip
        assert plain.signature() == explicit.signature()


def test_annotations_present_are_still_checked() -> None:
    odd = pod_request(
        pod_info(make_pod(requests={"cpu": "2"}, resource_spec={"preferredCPUBindPolicy": "Nope"})), ""
    )
    # Read as koord-scheduler reads it (no CPU binding), with a note the plugin warns of.
    assert isinstance(odd, PreFilterState) and not odd.request_cpu_bind
    assert odd.notes and '"Nope"' in odd.notes[0]
    empty = pod_request(
        pod_info(make_pod(requests={"cpu": "2"}, annotations={ANNOTATION_NUMA_TOPOLOGY_SPEC: ""})), ""
    )
    assert isinstance(empty, Status) and empty.code is Code.ERROR


# --- the plugin: one reading per template, one state for a pod no node needs the NUMA logic for ---


def _shared(pods: list[Any]) -> list[Any]:
    from koordsched.api.sharing import PodSharing

    sharing = PodSharing()
    return [sharing.pod(p) for p in pods]


def test_pods_of_a_template_read_once(monkeypatch: Any) -> None:
    """Pods sharing annotations, labels, spec and requests (api.sharing) are read once; a pod that
    differs in a part pod_request reads (a label, the priority) is read on its own."""
    from koordsched.framework.cycle_state import CycleState
    from koordsched.plugins.nodenumaresource import plugin as plugin_module
    from koordsched.scheduler.podinfo import RequestsMemo
    from tests.plugins.numa.helpers import Env, make_node

    calls: list[str] = []
    real = plugin_module.pod_request

    def counting(pod: Any, policy: str) -> Any:
        calls.append(pod.key)
        return real(pod, policy)

    monkeypatch.setattr(plugin_module, "pod_request", counting)
    env = Env()
    env.add_node(make_node("n0"))
    memo = RequestsMemo()
    pods = _shared([make_pod(f"p{i}", {"cpu": "2", "memory": "1Gi"}, uid=f"u{i}") for i in range(5)])
    lsr = _shared([make_pod("lsr", {"cpu": "2", "memory": "1Gi"}, qos="LSR", uid="lsr")])
    infos = [pod_info(p) for p in pods + lsr]
    for info in infos:
        info.requests = memo.pending(info.pod)  # one requests dict per spec, as the scheduler's
    states = []
    for info in infos[:5]:
        state = CycleState()
        _, status = env.plugin.pre_filter(state, info)
        assert status.code is Code.SKIP
        states.append(state.get("NodeNUMAResource"))
    assert calls == ["default/p0"]
    # One state for all of them: nothing writes into it (Filter, Reserve and PreBind are skipped).
    assert all(st is states[0] for st in states)
    _, status = env.plugin.pre_filter(CycleState(), infos[5])
    assert calls == ["default/p0", "default/lsr"]


def test_plain_state_is_left_once_a_node_needs_the_logic() -> None:
    """The first node with a NUMA policy (its NRT arrives later) ends the shortcut: PreFilter
    succeeds with the pod's own state, Filter runs, and Reserve records the allocation."""
    from koordsched.framework.cycle_state import CycleState
    from tests.plugins.numa.helpers import Env, make_node, make_nrt

    env = Env()
    env.add_node(make_node("n0"))
    template = _shared([make_pod(f"p{i}", {"cpu": "2", "memory": "1Gi"}, uid=f"u{i}") for i in range(3)])
    state = CycleState()
    _, status = env.plugin.pre_filter(state, pod_info(template[0]))
    assert status.code is Code.SKIP and "NodeNUMAResource" in state.skip_binding
    plain = state.get("NodeNUMAResource")
    assert isinstance(plain, PreFilterState) and plain.nrts_synced
    add_nrt(env.handle, make_nrt("n0", policies=["SingleNUMANodePodLevel"]))
    state = CycleState()
    _, status = env.plugin.pre_filter(state, pod_info(template[1]))
    assert status.code is Code.SUCCESS and "NodeNUMAResource" not in state.skip_binding
    own = state.get("NodeNUMAResource")
    assert isinstance(own, PreFilterState) and own is not plain and own.nrts_synced
    node, _, _ = env.schedule(pod_info(template[2]))
    assert node == "n0"
    # The shared plain state was never written into.
    assert plain.allocation is None and not plain.preemptible
