"""NodeNUMAResource's PreFilter: the pod's NUMA / CPU-binding request for one cycle.

:class:`PreFilterState` is Koordinator's ``preFilterState`` (spec 4.2, "Eligibility and
PreFilter"), read from the pod once per cycle by :func:`pod_request`; Filter, Score,
Reserve, PreBind and the hints read it back. Preemption (PreFilter's AddPod/RemovePod)
records in it what victims would free per node (:func:`record_preemption`).
"""

from __future__ import annotations

import functools
from collections.abc import Hashable
from typing import Final

import msgspec

from koordsched.api.annotations import decode_annotation
from koordsched.api.core import Pod
from koordsched.api.koordinator import (
    ANNOTATION_NUMA_TOPOLOGY_SPEC,
    ANNOTATION_RESERVATION_AFFINITY,
    ANNOTATION_RESOURCE_SPEC,
    NUMATopologySpec,
    ResourceSpec,
)
from koordsched.api.koordinator_checks import (
    CPU_EXCLUSIVE_POLICIES,
    AnnotationRefused,
    check_numa_topology_spec,
    resource_spec_problems,
)
from koordsched.api.priority import allow_use_cpuset
from koordsched.api.quantity import QuantityFormat, detect_format
from koordsched.api.resources import CPU
from koordsched.framework.cycle_state import StateData
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import Code, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.nodenumaresource.options import (
    CPU_BIND_DEFAULT,
    CPU_BIND_FULL_PCPUS,
    CPU_BIND_SPREAD_BY_PCPUS,
)
from koordsched.plugins.nodenumaresource.resource_manager import (
    PodAllocation,
    PreemptibleAlloc,
    ResourceManager,
)
from koordsched.plugins.topologymanager.policy import POLICIES

NAME: Final = "NodeNUMAResource"
ERR_INVALID_REQUESTED_CPUS = "the requested CPUs must be integer"
#: What Go's encoding/json says of an empty annotation (koord-scheduler fails PreFilter with it).
ERR_EMPTY_JSON = "unexpected end of JSON input"
#: ``PreFilterState.preemptible_for``: through any reservation the pod matched on the node.
ANY_RESERVATION = "*"


class PreFilterState(StateData):
    """The pod's NUMA/CPU-binding request for one cycle (Koordinator's ``preFilterState``)."""

    def __init__(self, skip: bool = False) -> None:
        self.skip = skip
        self.request_cpu_bind = False
        self.requests: dict[str, int] = {}
        self.request_formats: dict[str, QuantityFormat] = {}
        self.required_cpu_bind_policy = ""
        self.preferred_cpu_bind_policy = ""
        self.preferred_cpu_exclusive_policy = ""
        self.pod_numa_policy = ""
        self.pod_numa_exclusive = ""
        self.num_cpus_needed = 0
        self.has_reservation_affinity = False
        self.allocation: PodAllocation | None = None
        self.allocation_node = ""
        self.preemptible: dict[str, PreemptibleAlloc] = {}
        #: (node, reservation uid) -> what victims allocated from that reservation free (inside it
        #: only: Koordinator's ``preemptibleInRRs``).
        self.preemptible_in_rrs: dict[tuple[str, str], PreemptibleAlloc] = {}
        #: node -> the reservations the pod matched there (read when the first such victim is seen).
        self.matched: dict[str, list[str]] = {}
        #: NRT changes were looked for in this cycle (once is enough: objects change between cycles).
        self.nrts_synced = False
        #: What was read as koord-scheduler reads it, not as written (the pod is warned once).
        self.notes: tuple[str, ...] = ()

    @property
    def cpu_milli(self) -> int:
        return self.requests.get(CPU, 0)

    def signature(self) -> Hashable:
        """Everything Filter, Score and the hints read from the pod (not its identity)."""
        cached = self.__dict__.get("_signature")
        if cached is None:
            cached = self.__dict__["_signature"] = self._make_signature()
        return cached

    def _make_signature(self) -> Hashable:
        return (
            tuple(sorted(self.requests.items())),
            tuple(sorted(self.request_formats.items())),
            self.request_cpu_bind,
            self.required_cpu_bind_policy,
            self.preferred_cpu_bind_policy,
            self.preferred_cpu_exclusive_policy,
            self.pod_numa_policy,
            self.pod_numa_exclusive,
            self.num_cpus_needed,
            self.has_reservation_affinity,
        )

    def clone(self) -> PreFilterState:
        new = PreFilterState(self.skip)
        new.__dict__.update(self.__dict__)
        new.preemptible = {k: v.clone() for k, v in self.preemptible.items()}
        new.preemptible_in_rrs = {k: v.clone() for k, v in self.preemptible_in_rrs.items()}
        return new

    @property
    def preempting(self) -> bool:
        return bool(self.preemptible or self.preemptible_in_rrs)

    def preemptible_for(self, node: str, through: str | None = ANY_RESERVATION) -> PreemptibleAlloc | None:
        """What victims free on ``node`` for an allocation through reservation ``through`` (None:
        through none; :data:`ANY_RESERVATION`: any the pod matched there): victims outside
        reservations, and those allocated from the reservation(s) it may use."""
        own = self.preemptible.get(node)
        if not self.preemptible_in_rrs:
            return own
        uids = self.matched.get(node, []) if through == ANY_RESERVATION else [through] if through else []
        inside = [p for uid in uids if (p := self.preemptible_in_rrs.get((node, uid))) is not None]
        if not inside:
            return own
        out = own.clone() if own is not None else PreemptibleAlloc()
        for p in inside:
            out.merge(p)
        return out


@functools.lru_cache(maxsize=4096, typed=True)
def _format_of(quantity: str | int | float) -> QuantityFormat | None:
    try:
        return detect_format(quantity)
    except ValueError:
        return None


def request_formats(pod: Pod) -> dict[str, QuantityFormat]:
    """The format of each requested quantity, as Go's ``PodRequests`` keeps it (the first container's)."""
    out: dict[str, QuantityFormat] = {}
    for c in (*pod.spec.containers, *pod.spec.init_containers):
        merged = {**c.resources.limits, **c.resources.requests}
        for name, q in merged.items():
            if name not in out:
                fmt = _format_of(q)
                if fmt is not None:
                    out[name] = fmt
    return out


#: What a pod without either annotation reads as: read only, never written to.
_NO_RESOURCE_SPEC = ResourceSpec()
_NO_NUMA_SPEC = NUMATopologySpec()


def pod_request(pod: PodInfo, default_bind_policy: str) -> PreFilterState | Status:
    """PreFilter's reading of the pod: its state (a skipping one when it requests nothing), or
    the Status that rejects it (an unreadable annotation: Error, as Koordinator; a value no
    Koordinator policy has: UnschedulableAndUnresolvable, where Koordinator reads it as "no
    policy"; a fractional cpu request with CPU binding)."""
    ann = pod.pod.metadata.annotations
    # Present but empty is unreadable JSON to Koordinator, not "absent".
    spec_raw = ann.get(ANNOTATION_RESOURCE_SPEC)
    numa_raw = ann.get(ANNOTATION_NUMA_TOPOLOGY_SPEC)
    if spec_raw is None and numa_raw is None:
        # The common pod: neither annotation, so the defaults (which pass the checks).
        spec, numa_spec = _NO_RESOURCE_SPEC, _NO_NUMA_SPEC
    else:
        try:
            if spec_raw == "" or numa_raw == "":
                return Status(Code.ERROR, ERR_EMPTY_JSON)
            spec = decode_annotation(spec_raw, ResourceSpec) if spec_raw is not None else ResourceSpec()
            numa_spec = (
                decode_annotation(numa_raw, NUMATopologySpec) if numa_raw is not None else NUMATopologySpec()
            )
        except (msgspec.DecodeError, msgspec.ValidationError) as err:
            return Status(Code.ERROR, str(err))
        try:
            check_numa_topology_spec(numa_spec)
        except AnnotationRefused as err:
            return Status.unresolvable(str(err))
        problems = resource_spec_problems(spec)
        if problems:
            notes = tuple(
                f"annotation {ANNOTATION_RESOURCE_SPEC}: {problem}; scheduled as koord-scheduler reads "
                "it: no policy"
                for problem in problems
            )
            st = _pod_state(pod, spec, numa_spec, default_bind_policy)
            if isinstance(st, PreFilterState):
                st.notes = notes
            return st
    return _pod_state(pod, spec, numa_spec, default_bind_policy)


def _pod_state(
    pod: PodInfo, spec: ResourceSpec, numa_spec: NUMATopologySpec, default_bind_policy: str
) -> PreFilterState | Status:
    ann = pod.pod.metadata.annotations
    if not any(pod.requests.values()):
        return PreFilterState(skip=True)
    if numa_spec.numa_topology_policy and numa_spec.numa_topology_policy not in POLICIES:
        # check_numa_topology_spec has refused anything else; kept in step with the merger.
        return Status.unresolvable(f"unsupported numaTopologyPolicy {numa_spec.numa_topology_policy!r}")
    st = PreFilterState()
    st.requests = {k: v for k, v in pod.requests.items() if v}
    st.request_formats = request_formats(pod.pod)
    cpu = st.cpu_milli
    st.num_cpus_needed = cpu // 1000
    st.pod_numa_policy = numa_spec.numa_topology_policy
    st.pod_numa_exclusive = numa_spec.single_numa_node_exclusive
    st.has_reservation_affinity = ANNOTATION_RESERVATION_AFFINITY in ann
    if allow_use_cpuset(pod.pod, pod.priority):
        policy = spec.preferred_cpu_bind_policy
        if policy in ("", CPU_BIND_DEFAULT):
            policy = default_bind_policy
        required = spec.required_cpu_bind_policy
        if required == CPU_BIND_DEFAULT:
            required = default_bind_policy
        if required:
            policy = required
        if policy in (CPU_BIND_FULL_PCPUS, CPU_BIND_SPREAD_BY_PCPUS):
            if cpu % 1000:
                return Status.unresolvable(ERR_INVALID_REQUESTED_CPUS)
            if cpu > 0:
                st.request_cpu_bind = True
                st.required_cpu_bind_policy = required
                st.preferred_cpu_bind_policy = policy
                exclusive = spec.preferred_cpu_exclusive_policy
                # An exclusive policy Koordinator does not define excludes nothing there.
                st.preferred_cpu_exclusive_policy = exclusive if exclusive in CPU_EXCLUSIVE_POLICIES else ""
    return st


def record_preemption(
    st: PreFilterState,
    manager: ResourceManager,
    other: PodInfo,
    node: NodeInfo,
    *,
    removed: bool,
    holder: str | None = None,
) -> None:
    """Preemption: what ``other`` holds on ``node`` counts as free while it is removed (a victim),
    and no longer once it is added back; for a victim allocated from reservation ``holder``, free
    inside that reservation only. Nothing to record for a skipped pod, or when ``other`` holds no
    CPUs or NUMA resources."""
    if st.skip:
        return
    alloc = manager.get(node.name, other.uid)
    if alloc is None or (not alloc.cpuset and not alloc.numa):
        return
    if holder is not None:
        preemptible = st.preemptible_in_rrs.setdefault((node.name, holder), PreemptibleAlloc())
    else:
        preemptible = st.preemptible.setdefault(node.name, PreemptibleAlloc())
    if removed:
        preemptible.accumulate(alloc)
    else:
        preemptible.subtract(alloc)
