"""NodeNUMAResource's PreBind: the pod's allocation written to its annotations (spec 2.2).

``scheduling.koordinator.sh/resource-status`` gets the cpuset and the NUMA resources, exactly
as Go's ``json.Marshal`` writes them; a pod bound to CPUs whose ``resource-spec`` named no
bind policy gets the policy in force written back (``appendResourceSpecIfMissed``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import msgspec

from koordsched.api.koordinator import ANNOTATION_RESOURCE_SPEC, ANNOTATION_RESOURCE_STATUS, ResourceSpec
from koordsched.api.quantity import QuantityFormat, format_milli_cpu, format_quantity
from koordsched.api.resources import CPU
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import BindingPlan, PodInfo
from koordsched.plugins.nodenumaresource.cpuset import format_cpuset
from koordsched.plugins.nodenumaresource.effective import cpu_bind_policy, request_cpu_bind
from koordsched.plugins.nodenumaresource.options import CPU_BIND_DEFAULT, NodeView
from koordsched.plugins.nodenumaresource.prefilter import PreFilterState
from koordsched.plugins.nodenumaresource.resource_manager import PodAllocation


def annotate(
    st: PreFilterState, alloc: PodAllocation, view: NodeView, pod: PodInfo, plan: BindingPlan
) -> Status:
    """Put in ``plan`` the annotations recording ``alloc``, what Reserve allocated on the node of ``view``."""
    bind, status = request_cpu_bind(st, view.node_cpu_bind_policy)
    if not status.ok:
        return status
    if bind:
        spec = resource_spec_write_back(pod.pod.metadata.annotations, *cpu_bind_policy(view, st))
        if spec is not None:
            plan.annotations[ANNOTATION_RESOURCE_SPEC] = spec
    plan.annotations[ANNOTATION_RESOURCE_STATUS] = resource_status_json(alloc, st.request_formats)
    return SUCCESS


def _quantity_text(name: str, amount: int, fmt: QuantityFormat | None) -> str:
    if name == CPU:
        return format_milli_cpu(amount)
    return format_quantity(amount, fmt or "DecimalSI")


def resource_status_json(alloc: PodAllocation, formats: Mapping[str, QuantityFormat]) -> str:
    """``scheduling.koordinator.sh/resource-status`` exactly as Go's json.Marshal writes it.

    Struct fields in declaration order, ``cpuset`` and ``numaNodeResources`` omitted when
    empty, ``node`` always present (even 0), resource names sorted, quantities canonical.
    """
    out: dict[str, object] = {}
    if alloc.cpuset:
        out["cpuset"] = format_cpuset(alloc.cpuset)
    if alloc.numa:
        entries = []
        for n in sorted(alloc.numa, key=lambda x: x.node):
            entry: dict[str, object] = {"node": n.node}
            if n.resources:
                entry["resources"] = {
                    k: _quantity_text(k, n.resources[k], n.formats.get(k) or formats.get(k))
                    for k in sorted(n.resources)
                }
            entries.append(entry)
        out["numaNodeResources"] = entries
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False)


def resource_spec_write_back(annotations: Mapping[str, str], policy: str, required: bool) -> str | None:
    """``appendResourceSpecIfMissed``: the ``resource-spec`` to write for a bound pod that named no policy."""
    raw = annotations.get(ANNOTATION_RESOURCE_SPEC)
    try:
        spec = msgspec.json.decode(raw, type=ResourceSpec) if raw else ResourceSpec()
    except (msgspec.DecodeError, msgspec.ValidationError):
        spec = ResourceSpec()
    write = False
    if required and spec.required_cpu_bind_policy in ("", CPU_BIND_DEFAULT):
        spec.required_cpu_bind_policy = policy
        write = True
    if spec.preferred_cpu_bind_policy == CPU_BIND_DEFAULT:
        spec.preferred_cpu_bind_policy = policy
        write = True
    if not spec.required_cpu_bind_policy and not spec.preferred_cpu_bind_policy and policy:
        spec.preferred_cpu_bind_policy = policy
        write = True
    if not write:
        return None
    return msgspec.json.encode(spec).decode()
