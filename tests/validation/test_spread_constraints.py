"""Pods whose topologySpreadConstraints the API server would refuse are refused where they enter,
with its message, and only they: a misspelt ``whenUnsatisfiable`` must not silently drop the
constraint, nor ``maxSkew: 0`` refuse every node."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from koordsched.api.core import Pod
from koordsched.api.field_errors import Refused
from koordsched.api.validation import check_pending_pod, pod_errors
from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, simulate
from tests.scenario.helpers import WriteYaml

ZONE = {
    "maxSkew": 1,
    "topologyKey": "zone",
    "whenUnsatisfiable": "DoNotSchedule",
    "labelSelector": {"matchLabels": {"app": "web"}},
}


def errors(*constraints: dict[str, Any]) -> list[str]:
    pod = msgspec.convert(
        {"metadata": {"name": "web"}, "spec": {"topologySpreadConstraints": list(constraints)}}, Pod
    )
    return pod_errors(pod)


P = "spec.topologySpreadConstraints[0]"


@pytest.mark.parametrize(
    ("constraints", "message"),
    [
        ([{**ZONE, "maxSkew": 0}], f"{P}.maxSkew: Invalid value: 0: must be greater than zero"),
        ([{**ZONE, "topologyKey": ""}], f"{P}.topologyKey: Required value: can not be empty"),
        (
            [{**ZONE, "whenUnsatisfiable": "DoNotScheduleX"}],
            f'{P}.whenUnsatisfiable: Unsupported value: "DoNotScheduleX": '
            'supported values: "DoNotSchedule", "ScheduleAnyway"',
        ),
        (
            [ZONE, {**ZONE, "maxSkew": 2}],
            f'{P}.{{topologyKey, whenUnsatisfiable}}: Duplicate value: "{{zone, DoNotSchedule}}"',
        ),
        ([{**ZONE, "minDomains": 0}], f"{P}.minDomains: Invalid value: 0: must be greater than zero"),
        (
            [{**ZONE, "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2}],
            f"{P}.minDomains: Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, "
            "not ScheduleAnyway",
        ),
        (
            [{**ZONE, "nodeAffinityPolicy": "Always"}],
            f'{P}.nodeAffinityPolicy: Unsupported value: "Always": supported values: "Honor", "Ignore"',
        ),
        (
            [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "matchLabelKeys": ["rev"],
                }
            ],
            f"{P}.matchLabelKeys: Forbidden: must not be specified when labelSelector is not set",
        ),
        (
            [{**ZONE, "matchLabelKeys": ["app"]}],
            f'{P}.matchLabelKeys[0]: Invalid value: "app": exists in both matchLabelKeys and labelSelector',
        ),
        (
            [{**ZONE, "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}],
            f"{P}.labelSelector.matchExpressions[0].values: Required value: must be specified when "
            "`operator` is 'In' or 'NotIn'",
        ),
        (
            [
                {
                    **ZONE,
                    "labelSelector": {
                        "matchExpressions": [{"key": "app", "operator": "Equals", "values": ["a"]}]
                    },
                }
            ],
            f'{P}.labelSelector.matchExpressions[0].operator: Invalid value: "Equals": '
            "not a valid selector operator",
        ),
        (
            [
                {
                    **ZONE,
                    "labelSelector": {
                        "matchExpressions": [{"key": "app", "operator": "Exists", "values": ["a"]}]
                    },
                }
            ],
            f"{P}.labelSelector.matchExpressions[0].values: Forbidden: may not be specified when `operator` "
            "is 'Exists' or 'DoesNotExist'",
        ),
    ],
)
def test_field_errors(constraints: list[dict[str, Any]], message: str) -> None:
    assert errors(*constraints) == [message]


def test_valid_constraints_pass() -> None:
    assert errors(ZONE, {**ZONE, "whenUnsatisfiable": "ScheduleAnyway", "matchLabelKeys": ["rev"]}) == []
    assert (
        errors({**ZONE, "minDomains": 3, "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"}) == []
    )


def test_the_refusal_names_the_pod_and_lists_every_problem() -> None:
    pod = msgspec.convert(
        {
            "metadata": {"name": "web"},
            "spec": {"topologySpreadConstraints": [{**ZONE, "maxSkew": 0, "topologyKey": ""}]},
        },
        Pod,
    )
    with pytest.raises(Refused) as exc:
        check_pending_pod(pod)
    assert str(exc.value) == (
        f'Pod "web" is invalid: [{P}.maxSkew: Invalid value: 0: must be greater than zero, '
        f"{P}.topologyKey: Required value: can not be empty]"
    )


NODE = """
kind: Node
metadata: {name: n1, labels: {zone: z1}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
"""


def _pod(name: str, when: str) -> str:
    return f"""
kind: Pod
metadata: {{name: {name}, labels: {{app: web}}}}
spec:
  schedulerName: koord-scheduler
  topologySpreadConstraints:
  - {{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: {when}, labelSelector: {{matchLabels: {{app: web}}}}}}
  containers: [{{name: c, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def test_simulate_refuses_that_pod_only(write_yaml: WriteYaml) -> None:
    path = write_yaml("---\n".join([NODE, _pod("bad", "DoNotScheduleX"), _pod("good", "DoNotSchedule")]))
    result = simulate([path])
    assert result.pod("default/good").status == SCHEDULED
    bad = result.pod("default/bad")
    expected = (
        'Pod "bad" is invalid: spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: '
        '"DoNotScheduleX": supported values: "DoNotSchedule", "ScheduleAnyway"'
    )
    assert (bad.status, bad.message) == (UNSCHEDULABLE, expected)
    assert any(f"(Pod default/bad): {expected}; not scheduled" in w for w in result.warnings), result.warnings
