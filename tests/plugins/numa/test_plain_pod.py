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
from tests.plugins.numa.helpers import make_pod, pod_info


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
    bad = pod_request(
        pod_info(make_pod(requests={"cpu": "2"}, resource_spec={"preferredCPUBindPolicy": "Nope"})), ""
    )
    assert isinstance(bad, Status) and bad.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    empty = pod_request(
        pod_info(make_pod(requests={"cpu": "2"}, annotations={ANNOTATION_NUMA_TOPOLOGY_SPEC: ""})), ""
    )
    assert isinstance(empty, Status) and empty.code is Code.ERROR
