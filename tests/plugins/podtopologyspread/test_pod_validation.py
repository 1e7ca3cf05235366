"""A pod's constraints that the API server would refuse are refused, with its message, for that pod only.

A cluster never sends such pods (admission rejects them); a simulator manifest can. Half-honouring
them (an unknown whenUnsatisfiable silently dropping a constraint) is what the issue reports, so
PreFilter refuses the pod as unresolvable, naming the field and value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import Code
from tests.plugins.podtopologyspread.helpers import FOO, cluster, info, labelled, node, plugin, pod, spread

ZONE = spread(1, "zone", selector=FOO)


def refusal(*constraints: dict[str, Any]) -> str:
    h = cluster([node("n1", zone="z1")])
    _, status = plugin(h).pre_filter(CycleState(), info(pod("web", *constraints, labels=labelled("foo"))))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE, status
    return status.message()


@pytest.mark.parametrize(
    ("constraints", "message"),
    [
        (
            [{**ZONE, "maxSkew": 0}],
            "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
        ),
        (
            [{**ZONE, "topologyKey": ""}],
            "spec.topologySpreadConstraints[0].topologyKey: Required value: can not be empty",
        ),
        (
            [{**ZONE, "whenUnsatisfiable": "DoNotScheduleX"}],
            'spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: "DoNotScheduleX": '
            'supported values: "DoNotSchedule", "ScheduleAnyway"',
        ),
        (
            [ZONE, {**ZONE, "maxSkew": 2}],
            "spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}: "
            'Duplicate value: "{zone, DoNotSchedule}"',
        ),
        (
            [{**ZONE, "minDomains": 0}],
            "spec.topologySpreadConstraints[0].minDomains: Invalid value: 0: must be greater than zero",
        ),
        (
            [spread(1, "zone", "ScheduleAnyway", FOO, min_domains=2)],
            "spec.topologySpreadConstraints[0].minDomains: Invalid value: 2: can only use minDomains if "
            "whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway",
        ),
        (
            [{**ZONE, "nodeAffinityPolicy": "Always"}],
            'spec.topologySpreadConstraints[0].nodeAffinityPolicy: Unsupported value: "Always": '
            'supported values: "Honor", "Ignore"',
        ),
        (
            [spread(1, "zone", match_label_keys=["app"])],
            "spec.topologySpreadConstraints[0].matchLabelKeys: Forbidden: must not be specified when "
            "labelSelector is not set",
        ),
        (
            [spread(1, "zone", selector={"matchLabels": {"app": "web"}}, match_label_keys=["app"])],
            'spec.topologySpreadConstraints[0].matchLabelKeys[0]: Invalid value: "app": exists in both '
            "matchLabelKeys and labelSelector",
        ),
        (
            [spread(1, "zone", selector={"matchExpressions": [{"key": "app", "operator": "In"}]})],
            "spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0]: key 'app': "
            "operator In needs at least one value",
        ),
    ],
)
def test_invalid_constraints_refuse_the_pod(constraints: list[dict[str, Any]], message: str) -> None:
    assert refusal(*constraints) == f'Pod "web" is invalid: {message}'


def test_every_problem_is_listed() -> None:
    got = refusal({**ZONE, "maxSkew": 0, "topologyKey": ""})
    assert got == (
        'Pod "web" is invalid: [spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be '
        "greater than zero, spec.topologySpreadConstraints[0].topologyKey: Required value: can not be empty]"
    )


def test_an_invalid_pod_does_not_affect_others() -> None:
    h = cluster([node("n1", zone="z1")])
    pl = plugin(h)
    bad = info(pod("bad", {**ZONE, "maxSkew": 0}, labels=labelled("foo")))
    good = info(pod("good", ZONE, labels=labelled("foo")))
    assert pl.pre_filter(CycleState(), bad)[1].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert pl.pre_filter(CycleState(), good)[1].ok
    # PreScore of an invalid pod skips (its PreFilter already refused it).
    assert pl.pre_score(CycleState(), bad, np.zeros(1, dtype=np.int64)).code is Code.SKIP
