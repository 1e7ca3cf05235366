"""Reservation: pods allocate from the reservations their owners match (Koordinator v1.6, spec 4.3).

A Reservation is scheduled as its reserve pod (``api.reservation.reserve_pod``) through the
same queue and plugins as any pod; once Available it stands on its node in the cache and holds
what its owners have not taken. A pod that matches reservations on a node is lent their
remainder for its cycle (``Handle.lend_reserved``), Filter checks that it fits through one of
them, PreScore nominates one per node, Score prefers nodes with a good reservation, Reserve
allocates the pod from the nominated one (``Handle.allocate_from``) and PreBind writes
``reservation-allocated`` on the pod. A pod that matches no reservation pays one empty-index
check (PreFilter Skip).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from koordsched.api.kinds import RESERVATIONS
from koordsched.api.reservation import (
    ANNOTATION_RESERVATION_ALLOCATED,
    ANNOTATION_RESERVATION_NAME,
    ANNOTATION_RESERVATION_NODE,
    LABEL_OPERATING_MODE,
    LABEL_RESERVATION_IGNORED,
    PHASE_FAILED,
    POLICY_DEFAULT,
    encode_allocated,
    is_reserve_pod,
    reservation_errors,
)
from koordsched.api.reservation import Reservation as ReservationObject
from koordsched.api.selectors import pod_matches_node_selector_and_affinity
from koordsched.framework.cycle_state import CycleState, StateData
from koordsched.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    BindPlugin,
    ClusterEventWithHint,
    Codes,
    EnqueueExtensions,
    Handle,
    NodeStatusMap,
    NormalizeScorePlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    Rows,
    Scores,
)
from koordsched.framework.reservations import (
    NominatedReservation,
    set_nominated_reservation,
    set_nominated_reservations,
)
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.framework.types import (
    ASSIGNED_POD_DELETE,
    ActionType,
    BindingPlan,
    ClusterEvent,
    PodInfo,
    PostFilterResult,
    PreFilterResult,
)
from koordsched.plugins.reservation.args import ReservationArgs
from koordsched.plugins.reservation.fit import (
    Candidate,
    held_by_others,
    node_shortfalls,
    nominated_of,
    policy_conflict,
    reservation_shortfalls,
    score_reservation,
)
from koordsched.plugins.reservation.index import ReservationIndex, ReservationInfo
from koordsched.plugins.reservation.matching import (
    MatchDiagnosis,
    PodSpecError,
    matches_reservation,
    pod_spec,
)
from koordsched.plugins.reservation.preemption import (
    ERR_PREEMPTION_FAILED,
    NodePreemptible,
    ReservationPreemption,
    ReservedPreemptible,
    held_in_rrs,
    preemptible_in_rr,
    preemption_args,
    record_victim,
)

NAME = "Reservation"
STATE_KEY = "PreFilterReservation"

ERR_NO_MATCH = "node(s) no reservations match reservation affinity"
ERR_NODE_NAME = "node(s) didn't match the nodeName specified by reservation"
ERR_POLICY_CONFLICT = "node(s) reservation allocate policy conflict"
ERR_NO_RESERVATION_FITS = "node(s) no reservation(s) to meet the requirements"
ERR_NOT_ACTIVE = "reservation is not active"
ERR_OPERATING_MODE = (
    "pod label scheduling.koordinator.sh/operating-mode: Reservation (a pod acting as a reservation) "
    "is not implemented by koordsched"
)
PREFERRED_NODE_SCORE = 1000
MAX_NODE_SCORE = 100


@dataclass
class ReservationState(StateData):
    reserve_pod: bool = False
    #: The reservation a reserve pod stands for: its pinned node and policy.
    pinned_node: str = ""
    policy: str = POLICY_DEFAULT
    ignored: bool = False
    has_affinity: bool = False
    affinity_name: str = ""
    #: Node -> matched reservations with what their owners took.
    matched: dict[str, list[Candidate]] = field(default_factory=dict)
    #: Node -> the matched reservations the pod fits through (Filter's finding).
    fits: dict[str, list[Candidate]] = field(default_factory=dict)
    nominated: dict[str, Candidate] = field(default_factory=dict)
    preferred_node: str = ""
    diagnosis: MatchDiagnosis = field(default_factory=MatchDiagnosis)
    #: The reservation Reserve allocated the pod from.
    assumed: ReservationInfo | None = None
    #: For a reserve pod: nodes holding a reservation whose policy cannot share a node with its own.
    conflicts: set[str] = field(default_factory=set)
    #: The cycle's state (for the other plugins' reservation checks); not cloned with it.
    cycle: CycleState | None = None
    #: Filter codes: code k is ``statuses[k - 1]``.
    statuses: list[Status] = field(default_factory=list)
    #: Preemption dry run: what victims free outside any reservation, and inside each.
    preemptible: NodePreemptible = field(default_factory=dict)
    in_rrs: ReservedPreemptible = field(default_factory=dict)

    def clone(self) -> ReservationState:
        # A dry run's victims and verdicts must not reach the cycle's own state.
        new = copy.copy(self)
        new.fits, new.nominated = dict(self.fits), dict(self.nominated)
        new.preemptible = {n: dict(r) for n, r in self.preemptible.items()}
        new.in_rrs = {n: {u: dict(r) for u, r in by.items()} for n, by in self.in_rrs.items()}
        return new

    def code(self, status: Status) -> int:
        for i, known in enumerate(self.statuses):
            if known.code is status.code and known.reasons == status.reasons:
                return i + 1
        self.statuses.append(status)
        return len(self.statuses)


class Reservation:
    name = NAME

    def __init__(self, args: ReservationArgs | None, handle: Handle) -> None:
        args = args if args is not None else ReservationArgs()
        args.validate()
        self._handle = handle
        self._preemption = (
            ReservationPreemption(NAME, preemption_args(args), handle) if args.enable_preemption else None
        )
        self._index = ReservationIndex()
        #: Reservation name -> (the object, what is wrong with it) for reserve pods' PreFilter.
        self._checked: dict[str, tuple[ReservationObject, list[str]]] = {}

    @property
    def handle(self) -> Handle:
        return self._handle

    def _available(self) -> ReservationIndex:
        return self._index.refresh(self._handle.objects(RESERVATIONS))

    # --- queueing -------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ASSIGNED_POD_DELETE),
            ClusterEventWithHint(ClusterEvent(RESERVATIONS.kind, ActionType.ADD, "ReservationAdd")),
            ClusterEventWithHint(ClusterEvent(RESERVATIONS.kind, ActionType.UPDATE, "ReservationUpdate")),
            ClusterEventWithHint(ClusterEvent(RESERVATIONS.kind, ActionType.DELETE, "ReservationDelete")),
        ]

    # --- PreFilter ------------------------------------------------------------------------------

    def _candidate(self, info: ReservationInfo) -> Candidate:
        owners = self._handle.reserved_owners(info.uid)
        return Candidate(info, info.allocated(owners), info.remaining(owners), len(owners))

    def _pre_filter_reserve_pod(
        self, state: CycleState, pod: PodInfo
    ) -> tuple[PreFilterResult | None, Status]:
        ann = pod.pod.metadata.annotations
        name = ann.get(ANNOTATION_RESERVATION_NAME, "")
        r = self._handle.objects(RESERVATIONS).get(name)
        if r is None:
            return None, Status(
                Code.ERROR,
                f'cannot get reservation, err: reservations.scheduling.koordinator.sh "{name}" not found',
            )
        if r.spec.template is None:
            return None, Status(Code.ERROR, "the reservation misses the template spec")
        if not r.spec.owners:
            return None, Status(Code.ERROR, "the reservation misses the owner spec")
        known = self._checked.get(name)
        if known is None or known[0] is not r:
            # Checked once per object version, not per attempt.
            known = self._checked[name] = (r, reservation_errors(r))
            if len(self._checked) > 1 << 16:
                self._checked.clear()
        errors = known[1]
        if errors:
            return None, Status(Code.ERROR, f"invalid reservation {name}: " + "; ".join(errors))
        st = ReservationState(
            reserve_pod=True,
            pinned_node=ann.get(ANNOTATION_RESERVATION_NODE, ""),
            policy=r.spec.allocate_policy,
        )
        # Legacy ("") and other policies do not share a node (QUIRK 15, kept).
        for policy, nodes in self._available().policy_nodes.items():
            if policy_conflict(st.policy, policy):
                st.conflicts |= nodes
        state.write(STATE_KEY, st)
        if not st.pinned_node and not st.conflicts:
            return None, Status(Code.SKIP)
        return None, SUCCESS

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        if is_reserve_pod(pod.pod):
            return self._pre_filter_reserve_pod(state, pod)
        if pod.pod.metadata.labels.get(LABEL_OPERATING_MODE) == "Reservation":
            # Refused out loud rather than scheduled as an ordinary pod.
            return None, Status.unresolvable(ERR_OPERATING_MODE)
        try:
            spec = pod_spec(pod)
        except PodSpecError as err:
            return None, Status.unresolvable(str(err))
        index = self._available()
        if not index:
            if spec.has_affinity:
                return None, Status.unresolvable(ERR_NO_MATCH)
            # No state is written: Reserve, Unreserve and PreBind would do nothing, and Bind would
            # answer Skip (the pod is not a reserve pod).
            state.skip_binding.add(NAME)
            return None, Status(Code.SKIP)
        if pod.pod.metadata.labels.get(LABEL_RESERVATION_IGNORED) == "true":
            # Node-free resources plus every unallocated reserved resource (Koordinator's semantics).
            self._handle.lend_reserved([i.uid for infos in index.by_node.values() for i in infos])
            state.write(STATE_KEY, ReservationState(ignored=True))
            return None, Status(Code.SKIP)
        st = ReservationState(
            has_affinity=spec.has_affinity, affinity_name=spec.affinity.name if spec.affinity else ""
        )
        snap = self._handle.snapshot
        lent: list[str] = []
        node_ok: dict[str, NodeInfo | None] = {}
        for info in index.candidates(pod.pod):
            if info.node not in node_ok:
                node = snap.by_name.get(info.node)
                fits = node is not None and pod_matches_node_selector_and_affinity(
                    pod.pod, node.labels, info.node
                )
                node_ok[info.node] = node if fits else None
            node = node_ok[info.node]
            if node is None:
                continue
            if info.allocate_once and self._handle.reserved_owners(info.uid):
                continue
            if matches_reservation(pod.pod, pod.requests, spec, info, node, st.diagnosis):
                st.matched.setdefault(info.node, []).append(self._candidate(info))
                lent.append(info.uid)
        st.cycle = state
        state.write(STATE_KEY, st)
        if not st.matched:
            if spec.has_affinity:
                return None, Status.unresolvable(ERR_NO_MATCH)
            # Not Skip: in a preemption dry run, what a victim allocated from a reservation frees
            # is that reservation's (Filter); otherwise Filter passes every node at once.
            return None, SUCCESS
        self._handle.lend_reserved(lent)
        restored = self._handle.reservation_points().run_restore_reservation(
            state, pod, {n: [nominated_of(c.info, n) for c in cs] for n, cs in st.matched.items()}
        )
        if not restored.ok:
            return None, restored
        if spec.has_affinity:
            return PreFilterResult(set(st.matched)), SUCCESS
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        """Preemption dry run: a victim put back holds again what it held."""
        st = state.read_optional(STATE_KEY, ReservationState)
        if st is not None:
            record_victim(st.preemptible, st.in_rrs, to_add, node.name, removed=False)
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status:
        """Preemption dry run: a victim taken off frees its requests, inside the reservation it was
        allocated from when it was (``preemptibleInRRs``), else on the node."""
        st = state.read_optional(STATE_KEY, ReservationState)
        if st is not None:
            record_victim(st.preemptible, st.in_rrs, to_remove, node.name, removed=True)
        return SUCCESS

    # --- Filter ---------------------------------------------------------------------------------

    def filter_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Codes:
        """0 for a feasible row; a reserve pod is checked against its pinned node and the policies
        already on each node, any other pod only on the nodes where it matched reservations (a
        pod with reservation-affinity reaches no other node: PreFilter narrowed the nodes)."""
        codes: Codes = np.zeros(len(rows), dtype=np.int64)
        st = state.read_optional(STATE_KEY, ReservationState)
        if st is None or st.ignored:
            return codes
        snap = self._handle.snapshot
        if st.reserve_pod:
            if st.pinned_node:
                pinned = snap.by_name.get(st.pinned_node)
                codes[rows != (pinned.row if pinned is not None else -1)] = st.code(
                    Status.unresolvable(ERR_NODE_NAME)
                )
            if st.conflicts:
                conflict_rows = [snap.by_name[n].row for n in st.conflicts if n in snap.by_name]
                clash = np.isin(rows, np.asarray(conflict_rows, dtype=np.int64)) & (codes == 0)
                codes[clash] = st.code(Status.unresolvable(ERR_POLICY_CONFLICT))
            return codes
        if st.has_affinity:
            matched_rows = [snap.by_name[n].row for n in st.matched if n in snap.by_name]
            outside = ~np.isin(rows, np.asarray(matched_rows, dtype=np.int64))
            codes[outside] = st.code(Status.unresolvable(ERR_NO_MATCH))
        for name in st.matched.keys() | st.preemptible.keys() | st.in_rrs.keys():
            info = snap.by_name.get(name)
            if info is None:
                continue
            for i in np.flatnonzero(rows == info.row).tolist():
                status = self._filter_node(st, pod, info)
                if not status.ok:
                    codes[i] = st.code(status)
        return codes

    def _plugin_reasons(
        self, st: ReservationState, pod: PodInfo, node: NodeInfo, c: Candidate | None
    ) -> list[str]:
        """FilterNominateReservation of the profile's plugins (DeviceShare, NodeNUMAResource): why
        the pod cannot be given what it asks through ``c`` (None: beside every matched
        reservation); empty when it can."""
        if st.cycle is None:
            return []
        nominated = nominated_of(c.info, node.name) if c is not None else None
        return self._handle.reservation_points().run_filter_reservation(st.cycle, pod, node, nominated)

    def explain(self, state: CycleState, pod: PodInfo, code: int) -> Status:
        st = state.read_optional(STATE_KEY, ReservationState)
        if st is None or not 0 < code <= len(st.statuses):
            return Status(Code.ERROR, f"Reservation: unknown filter code {code}")
        return st.statuses[code - 1]

    def _filter_node(self, st: ReservationState, pod: PodInfo, node: NodeInfo) -> Status:
        matched = st.matched.get(node.name)
        if not matched:
            if st.has_affinity:
                return Status.unresolvable(ERR_NO_MATCH)
            # A dry run freed pods here: what victims free inside reservations stays theirs.
            preempting = node.name in st.preemptible or node.name in st.in_rrs
            if preempting and node_shortfalls(pod, node, held_in_rrs(st.in_rrs, node.name, None), 0):
                return Status.unresolvable(ERR_PREEMPTION_FAILED)
            return SUCCESS
        fits: list[Candidate] = []
        node_reasons: list[str] = []
        resv_reasons: list[str] = []
        for c in matched:
            if st.affinity_name and c.info.name != st.affinity_name:
                continue
            held = held_by_others(matched, c, held_in_rrs(st.in_rrs, node.name, c.info.uid))
            short = node_shortfalls(pod, node, held, len(matched) - 1)
            node_reasons.extend(
                f"Insufficient {n} by node" for n in short if f"Insufficient {n} by node" not in node_reasons
            )
            preempted = preemptible_in_rr(st.in_rrs, node.name, c.info.uid)
            resv = reservation_shortfalls(pod, c, bool(st.affinity_name), preempted)
            resv_reasons.extend(r for r in resv if r not in resv_reasons)
            if not short and not resv:
                resv = self._plugin_reasons(st, pod, node, c)
                resv_reasons.extend(r for r in resv if r not in resv_reasons)
            if not short and not resv:
                fits.append(c)
        st.fits[node.name] = fits
        if fits:
            return SUCCESS
        held = held_by_others(matched, None, held_in_rrs(st.in_rrs, node.name, None))
        if (
            not st.has_affinity
            and not node_shortfalls(pod, node, held, len(matched))
            and not self._plugin_reasons(st, pod, node, None)
        ):
            # It fits beside the reservations without using any of them.
            return SUCCESS
        reasons = node_reasons + resv_reasons
        return Status.unschedulable(*(reasons or [ERR_NO_RESERVATION_FITS]))

    # --- PostFilter -----------------------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status]:
        st = state.read_optional(STATE_KEY, ReservationState)
        if self._preemption is not None:
            # enablePreemption: preempt first; anything but Unschedulable is the answer.
            result, status = self._preemption.evaluator.preempt(state, pod, statuses)
            if status.code is not Code.UNSCHEDULABLE:
                message = status.message()
                if message and not status.ok:
                    status = Status(status.code, "preemption: " + message, plugin=NAME)
                return result, status
        if st is not None and st.reserve_pod:
            # As Koordinator: an Error ends the PostFilter chain, so a reserve pod (priority
            # MaxInt32 unless its template says otherwise) never preempts through
            # DefaultPreemption; it waits for room like any unschedulable pod.
            return None, Status(Code.ERROR, plugin=self.name)
        if st is None or st.ignored:
            return None, Status.unschedulable()
        d = st.diagnosis
        if not d.owner_matched and not st.has_affinity:
            return None, Status.unschedulable()
        reasons = d.reasons()
        node_reasons: dict[str, int] = {}
        for name, status in statuses.items():
            if name in st.matched:
                for reason in status.reasons:
                    node_reasons[reason] = node_reasons.get(reason, 0) + len(st.matched[name])
        for reason, n in sorted(node_reasons.items()):
            reasons.insert(
                len(reasons) - (1 if d.owner_matched else 0),
                f"{n} Reservation(s) for node reason that {reason}",
            )
        return None, Status.unschedulable(*reasons)

    # --- PreScore and Score ---------------------------------------------------------------------

    def _nominate(self, pod: PodInfo, st: ReservationState, node_name: str) -> Candidate | None:
        known = st.nominated.get(node_name)
        if known is not None:
            return known
        fits = st.fits.get(node_name)
        if fits is None:
            node = self._handle.snapshot.by_name.get(node_name)
            if node is None:
                return None
            self._filter_node(st, pod, node)
            fits = st.fits.get(node_name, [])
        if not fits:
            return None
        if len(fits) == 1:
            chosen = fits[0]
        else:
            ordered = [c for c in fits if c.info.order > 0]
            if ordered:
                chosen = min(ordered, key=lambda c: (c.info.order, c.info.name))
            else:
                # Highest score; ties go to the first by name (a stable order, QUIRK 20).
                chosen = max(sorted(fits, key=lambda c: c.info.name), key=lambda c: score_reservation(pod, c))
        st.nominated[node_name] = chosen
        return chosen

    def _matched_rows(self, st: ReservationState, rows: Rows) -> list[tuple[int, str]]:
        """(index into ``rows``, node name) of the rows where the pod matched reservations."""
        snap = self._handle.snapshot
        out: list[tuple[int, str]] = []
        for name in st.matched:
            info = snap.by_name.get(name)
            if info is not None:
                out.extend((int(i), name) for i in np.flatnonzero(rows == info.row))
        return out

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        st = state.read_optional(STATE_KEY, ReservationState)
        if st is None or st.reserve_pod or st.ignored or not st.matched:
            return Status(Code.SKIP)
        best_order = 0
        nominated: dict[str, NominatedReservation] = {}
        for _, name in sorted(self._matched_rows(st, rows)):
            chosen = self._nominate(pod, st, name)
            if chosen is not None:
                nominated[name] = nominated_of(chosen.info, name)
            for c in st.matched[name]:
                if c.info.order > 0 and (best_order == 0 or c.info.order < best_order):
                    best_order, st.preferred_node = c.info.order, name
        set_nominated_reservations(state, nominated)
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        """1000 on the node with the lowest reservation-order, the nominated reservation's score on
        the others where the pod matched, 0 elsewhere (and for reserve pods)."""
        scores: Scores = np.zeros(len(rows), dtype=np.int64)
        st = state.read_optional(STATE_KEY, ReservationState)
        if st is None or st.reserve_pod:
            return scores
        for i, name in self._matched_rows(st, rows):
            if st.preferred_node == name:
                scores[i] = PREFERRED_NODE_SCORE
            else:
                c = st.nominated.get(name)
                scores[i] = 0 if c is None else score_reservation(pod, c)
        return scores

    def normalize_score(self, state: CycleState, pod: PodInfo, rows: Rows, scores: Scores) -> Status:
        top = int(scores.max()) if len(scores) else 0
        if top > 0:
            scores[:] = scores * MAX_NODE_SCORE // top
        return SUCCESS

    # --- Reserve --------------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        st = state.read_optional(STATE_KEY, ReservationState)
        if st is None or st.reserve_pod or st.ignored:
            return SUCCESS
        chosen = self._nominate(pod, st, node_name) if node_name in st.matched else None
        if chosen is None:
            return Status.unschedulable(ERR_NO_MATCH) if st.has_affinity else SUCCESS
        self._handle.allocate_from(pod.uid, chosen.info.uid)
        st.assumed = chosen.info
        set_nominated_reservation(state, nominated_of(chosen.info, node_name))
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        st = state.read_optional(STATE_KEY, ReservationState)
        if st is not None and st.assumed is not None:
            self._handle.allocate_from(pod.uid, None)
            st.assumed = None
            set_nominated_reservation(state, None)

    # --- PreBind and Bind -----------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        st = state.read_optional(STATE_KEY, ReservationState)
        if st is None or st.reserve_pod:
            return SUCCESS
        if st.assumed is not None:
            plan.annotations[ANNOTATION_RESERVATION_ALLOCATED] = encode_allocated(st.assumed.obj)
        elif st.has_affinity:
            return Status.unschedulable(ERR_NO_MATCH)
        return SUCCESS

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        """Reserve pods only: the Reservation becomes Available on the node (its status is written
        through the output port); any other pod is left to DefaultBinder."""
        if not is_reserve_pod(pod.pod):
            return Status(Code.SKIP)
        name = pod.pod.metadata.annotations.get(ANNOTATION_RESERVATION_NAME, "")
        r = self._handle.objects(RESERVATIONS).get(name)
        if r is None or r.status.phase == PHASE_FAILED or r.metadata.deletion_timestamp:
            return Status(Code.ERROR, ERR_NOT_ACTIVE)
        try:
            await self._handle.binder.bind(pod.pod, node_name, plan)
        except Exception as err:
            return Status.from_error(err)
        return SUCCESS


if TYPE_CHECKING:
    # The extension points Reservation implements; mypy checks each line, nothing runs.
    _pf: type[PreFilterPlugin] = Reservation
    _f: type[BatchFilterPlugin] = Reservation
    _post: type[PostFilterPlugin] = Reservation
    _ps: type[PreScorePlugin] = Reservation
    _s: type[BatchScorePlugin] = Reservation
    _ns: type[NormalizeScorePlugin] = Reservation
    _r: type[ReservePlugin] = Reservation
    _pb: type[PreBindPlugin] = Reservation
    _b: type[BindPlugin] = Reservation
    _e: type[EnqueueExtensions] = Reservation
