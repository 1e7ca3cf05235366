"""Random gangs on random clusters through `simulate`: a gang never half binds, nothing is
over-committed, and whatever stays unbound says why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordsched.backends.sim.runner import SCHEDULED, simulate
from tests.builders import pod_manifest

GANG = "gang.scheduling.koordinator.sh/"

gangs = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=4),  # members
        st.integers(min_value=1, max_value=4),  # min-available
        st.sampled_from(["Strict", "NonStrict"]),
        st.integers(min_value=1, max_value=3),  # cpu per member
    ),
    min_size=1,
    max_size=4,
)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    nodes=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=3),
    spec=gangs,
    loose=st.integers(0, 3),
)
def test_gangs_bind_all_or_nothing(
    tmp_path: Path, nodes: list[int], spec: list[tuple[int, int, str, int]], loose: int
) -> None:
    docs: list[dict[str, Any]] = [
        {
            "kind": "Node",
            "metadata": {"name": f"n{i}"},
            "status": {"allocatable": {"cpu": str(c), "pods": "20"}},
        }
        for i, c in enumerate(nodes)
    ]
    cpu_of: dict[str, int] = {}
    gang_of: dict[str, tuple[str, int]] = {}
    for g, (members, minimum, mode, cpu) in enumerate(spec):
        for m in range(members):
            name = f"g{g}-{m}"
            cpu_of[name], gang_of[name] = cpu, (f"g{g}", minimum)
            notes = {
                GANG + "name": f"g{g}",
                GANG + "min-available": str(minimum),
                GANG + "mode": mode,
                GANG + "waiting-time": "5s",
            }
            docs.append(_pod(name, cpu, notes))
    for i in range(loose):  # pods of no gang compete for the same room
        cpu_of[f"loose-{i}"] = 1
        docs.append(_pod(f"loose-{i}", 1, {}))
    path = tmp_path / "cluster.yaml"
    path.write_text("\n---\n".join(json.dumps(d) for d in docs))
    result = simulate([path])

    bound: dict[str, int] = {}
    used: dict[str, int] = {}
    for p in result.pods:
        if p.status == SCHEDULED:
            assert p.node is not None
            used[p.node] = used.get(p.node, 0) + cpu_of[p.name]
            if p.name in gang_of:
                bound[gang_of[p.name][0]] = bound.get(gang_of[p.name][0], 0) + 1
        else:
            assert p.message, p
    for gang, minimum in gang_of.values():
        assert bound.get(gang, 0) in (0,) or bound[gang] >= minimum, (gang, bound, spec)
    for i, c in enumerate(nodes):
        assert used.get(f"n{i}", 0) <= c
    # Nothing assumed stays counted: the nodes hold exactly the bound pods.
    for n in result.nodes:
        assert n.resources["cpu"][0] == 1000 * used.get(n.name, 0), n


def _pod(name: str, cpu: int, annotations: dict[str, str]) -> dict[str, Any]:
    return pod_manifest(name, str(cpu), None, uid="", annotations=annotations)
