"""Extension-point interfaces, as Protocols, mirroring kube-scheduler's framework.

A plugin is any object with a ``name`` that implements one or more of these. Two
shapes exist for Filter and Score:

* per node (``filter``/``score``), exactly as upstream: the runtime calls it for each
  candidate node that survived the earlier filters;
* batch (``filter_batch``/``score_batch``): one call over an array of snapshot rows,
  returning one code or score per row. Resource fit, taints, affinity and the
  Koordinator device checks use this shape so they run as vector kernels.

A batch filter returns 0 for a feasible row and a plugin-defined non-zero code
otherwise; ``explain`` turns a code into the Status a person reads, and is called
only when a reason is needed (an unschedulable pod, ``--explain``).

PreBind and Bind are coroutines: they are the only extension points that may wait
on the output port (the API server or the simulator). Everything else is synchronous
CPU work inside one scheduling cycle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from koordsched.api.core import Pod
from koordsched.api.kinds import ObjectKind
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.reservation_points import ReservationPoints
from koordsched.framework.snapshot import NodeInfo, Snapshot
from koordsched.framework.status import Status
from koordsched.framework.types import BindingPlan, ClusterEvent, PodInfo, PostFilterResult, PreFilterResult
from koordsched.observability.metrics import PluginMetrics

T = TypeVar("T")

Rows = npt.NDArray[np.int64]
Codes = npt.NDArray[np.int64]
Scores = npt.NDArray[np.int64]


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds: real in a cluster, virtual in the simulator."""

    def wall(self) -> float:
        """Unix seconds, to compare with timestamps others wrote (a NodeMetric's updateTime).
        Real in a cluster; in the simulator a fixed start plus the virtual time elapsed."""


class Binder(Protocol):
    """The output port a bind goes through. Raises :class:`BindError` on failure."""

    async def bind(self, pod: Pod, node_name: str, plan: BindingPlan) -> None: ...


class BindError(Exception):
    """A bind the API server (or simulator) refused; the pod is forgotten and requeued."""


class WaitingPod(Protocol):
    pod: PodInfo
    node_name: str

    def pending_plugins(self) -> list[str]: ...
    def allow(self, plugin: str) -> None: ...
    def reject(self, plugin: str, message: str) -> None: ...


class NodeTrial(Protocol):
    """Pods taken off or put on one node hypothetically (preemption's dry run); ``undo`` restores
    the node. ``state`` is the cycle state the PreFilter extensions updated (a clone)."""

    state: CycleState

    def add(self, pod: PodInfo, other: PodInfo) -> Status: ...
    def remove(self, pod: PodInfo, other: PodInfo) -> Status: ...
    def put_back(self, pod: PodInfo, other: PodInfo) -> Status: ...
    def undo(self) -> None: ...


class Handle(Protocol):
    """What a plugin may use besides its own state. No I/O is reachable from here."""

    @property
    def snapshot(self) -> Snapshot: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def binder(self) -> Binder: ...
    @property
    def metrics(self) -> PluginMetrics:
        """Where a plugin records its own metrics (VolumeBinding's stage errors)."""

    def waiting_pod(self, uid: str) -> WaitingPod | None: ...
    def iterate_waiting_pods(self, fn: Callable[[WaitingPod], None]) -> None: ...
    def objects(self, kind: ObjectKind[T]) -> Mapping[str, T]:
        """Objects of a kind the plugin declared (CRDs and the like), keyed by ``namespace/name``
        or name."""

    def activate_pods(self, pods: list[PodInfo]) -> None:
        """Move these pods from the backoff or unschedulable queues to the active queue."""

    def warn(self, pod: Pod, reason: str, message: str) -> None:
        """Say on the pod (a Warning event; a ``simulate`` warning) that a value it carries was
        read as Koordinator reads it, not as written: the pod is scheduled all the same."""

    def plugins(self) -> Mapping[str, Plugin]:
        """This profile's plugins by name, in the order they were built (e.g. to find hint providers)."""

    def reservation_points(self) -> ReservationPoints:
        """This profile's implementers of the reservation points (restore, filter), found when the
        framework was built; none before then."""

    def run_filters_with_nominated(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """Every Filter plugin on ``node``, counting the pods nominated there with equal or higher
        priority (upstream's RunFilterPluginsWithNominatedPods)."""

    def node_trial(self, state: CycleState, node: NodeInfo) -> NodeTrial:
        """Start changing ``node`` hypothetically, on a clone of ``state``."""

    def is_assumed(self, uid: str) -> bool:
        """Whether the pod is assumed: reserved by a cycle, its bind not confirmed yet."""

    def nominated_node(self, pod: PodInfo) -> str:
        """The node the pod is nominated to: the scheduler's own record (set at once by a
        preemption, before the status patch comes back), else its ``status.nominatedNodeName``."""

    def filter_rows(self, state: CycleState, pod: PodInfo, rows: Rows) -> tuple[Rows, NodeStatusMap]:
        """Every Filter plugin over ``rows`` as they are now (nominees counted): the rows that
        pass, and the rejecting status of each of the others."""

    def pre_filter_extensions_active(self, state: CycleState) -> bool:
        """Whether a PreFilter plugin running in this cycle has AddPod/RemovePod extensions (its
        state then follows each hypothetical change, one node at a time)."""

    def filter_copies(self, state: CycleState, pods: Sequence[PodInfo], rows: Rows) -> Codes | None:
        """Per row of ``rows`` (which pass every Filter for ``pods[0]``): how many of ``pods`` fit
        one after the other, counted by every active Filter plugin (CopiesFilterPlugin); None when
        one of them cannot tell, or nominated pods would have to be counted in."""

    def lend_reserved(self, holders: list[str]) -> None:
        """For this cycle only, take these reserve pods (by uid) off their nodes: the pod being
        scheduled may use what they hold. The cycle's end puts them back."""

    def allocate_from(self, pod_uid: str, holder: str | None) -> None:
        """The assumed pod allocates from reserve pod ``holder`` (None: from none): the reserve
        pod then holds only what is left."""

    def reserved_owners(self, holder: str) -> Mapping[str, PodInfo]:
        """The pods (bound or assumed) allocated from reserve pod ``holder``, by uid."""


@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class FindOneNodePlugin(Plugin, Protocol):
    """Koordinator's FindOneNode extension, called right after PreFilter: the one node the pod
    is to be tried on (Filter and Score then see only it), or ``Skip`` to leave the cycle as it
    is. Any other status fails the cycle as a PreFilter rejection would."""

    def find_one_node(self, state: CycleState, pod: PodInfo, rows: Rows) -> tuple[str | None, Status]: ...


@dataclass(frozen=True)
class ClusterEventWithHint:
    event: ClusterEvent
    #: Called with (pod, old_obj, new_obj); returns True to requeue. None means always requeue.
    hint: Callable[[PodInfo, Any, Any], bool] | None = None


@runtime_checkable
class EnqueueExtensions(Plugin, Protocol):
    def events_to_register(self) -> list[ClusterEventWithHint]: ...


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: PodInfo) -> Status: ...


@runtime_checkable
class PodEventsPlugin(Plugin, Protocol):
    """Follows every pod change the scheduler sees, as Koordinator's plugins do with their own pod
    informer handlers: Coscheduling's gangs count pending children, ElasticQuota charges pods'
    requests to their quota.

    Called once per pod add (``old`` None), update and delete (``new`` None), bound or not, of any
    scheduler, outside any cycle and before the cache and the queue see the change. ``info`` is
    the parsed ``new`` when the scheduler follows it (bound, or pending for one of its profiles),
    None otherwise (another scheduler's pending pod, one that cannot be parsed, a finished pod, a
    change of status only). Must be cheap for pods the plugin does not track; a profile without
    such a plugin pays nothing.
    """

    def on_pod_event(self, old: Pod | None, new: Pod | None, info: PodInfo | None) -> None: ...


@runtime_checkable
class VictimGroups(Plugin, Protocol):
    """A plugin whose pods only make sense together (Coscheduling's gangs). Preemption asks it
    what evicting some pods does to their groups, so that it never leaves a group below its
    minimum without knowing (``docs/gangs.md``). Called only at PostFilter, by the evaluator."""

    def groups_broken_by(self, victims: Sequence[PodInfo]) -> dict[str, list[Pod]]:
        """Group id -> the group's other bound members, for each group that holds at least its
        minimum of bound members now and would hold fewer without ``victims``."""


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def sort_key(self, pod: PodInfo) -> Any:
        """A key such that smaller sorts first; equal keys keep arrival order."""


class PreFilterExtensions(Protocol):
    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status: ...
    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status: ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]: ...
    def pre_filter_extensions(self) -> PreFilterExtensions | None: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status: ...


@runtime_checkable
class BatchFilterPlugin(Plugin, Protocol):
    def filter_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Codes: ...
    def explain(self, state: CycleState, pod: PodInfo, code: int) -> Status: ...


@runtime_checkable
class PassAllFilterPlugin(BatchFilterPlugin, Protocol):
    """A batch Filter plugin that can tell, in O(1), that it passes every node for this pod's cycle
    (e.g. LoadAwareScheduling while no node has a NodeMetric). The framework then does not call its
    Filter in the search: a filter that rejects nothing changes no verdict and no reason. Unlike
    a PreFilter Skip, ``--explain`` still shows its verdict per node."""

    def passes_all(self, state: CycleState, pod: PodInfo) -> bool: ...


@runtime_checkable
class CopiesFilterPlugin(Plugin, Protocol):
    """A Filter plugin that counts, without adding them to the snapshot, how many of a run of pods
    fit a node one after the other: the network-topology solver's offer slots (spec A.4 step 2)
    then cost one call instead of one snapshot change per pod and node."""

    def filter_copies(self, state: CycleState, pods: Sequence[PodInfo], rows: Rows) -> Codes | None:
        """``rows`` pass this plugin's Filter for ``pods[0]`` as the nodes are now. Per row, how
        many of ``pods``, from the first, pass it in turn, each earlier one added to the node
        (``len(pods)`` when all do); None when it cannot tell without adding them."""
        ...


#: Node name -> the status that rejected the pod there.
NodeStatusMap = dict[str, Status]


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status]: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]: ...


@runtime_checkable
class BatchScorePlugin(Plugin, Protocol):
    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores: ...


@runtime_checkable
class CacheSyncedPlugin(Plugin, Protocol):
    """A plugin with catching up to do once the cluster is loaded (the caches synced, the simulator's
    input fed), before the first cycle: what it would otherwise do lazily in the first pod's cycle,
    for every node at once (DeviceShare reading every Device)."""

    def cache_synced(self) -> None: ...


@runtime_checkable
class WatchScopedPlugin(Plugin, Protocol):
    """A plugin that reads one object of a namespaced kind, named by its args (DeviceShare's vNPU
    templates' ConfigMap): kind name -> (namespace, name). A backend that watches may watch only
    that object when every reader of the kind in every profile names the same one."""

    def watch_scopes(self) -> Mapping[str, tuple[str, str]]: ...


@runtime_checkable
class RowLocalScorePlugin(BatchScorePlugin, Protocol):
    """A batch Score plugin whose score of a row, for some pods, depends only on what that row holds.

    ``score_signature`` returns, for this pod's cycle, a key such that any pod with an equal key
    gets an equal score on a row whose ``row_gen`` has not moved (the contract a plugin's own
    RowMemo already relies on), or None when that does not hold for this pod. The framework then
    keeps the weighted sum of such plugins per row (``framework/rowmemo.py``), and calls
    ``score_batch`` only for rows that changed. Such a plugin has no NormalizeScore, and its
    ``score_batch`` has no effect beyond its result.
    """

    def score_signature(self, state: CycleState, pod: PodInfo) -> Hashable | None: ...


@runtime_checkable
class ScoreDetailsPlugin(Plugin, Protocol):
    """A Score plugin that can say what its score of one node was made of (``--explain``)."""

    def explain_score(self, state: CycleState, pod: PodInfo, row: int) -> Mapping[str, object]: ...


@runtime_checkable
class ConstantScorePlugin(BatchScorePlugin, Protocol):
    """A batch Score plugin that can tell, in O(1), when it gives every node the same score.

    ``constant_score`` returns that score (in [0, 100]) when, for this pod's cycle, every node in
    the cluster scores it, else None. A score added equally to every feasible node changes neither
    which node has the highest total nor which nodes tie, so the framework does not call Score for
    it unless the scores are shown (``--explain``). Such a plugin has no NormalizeScore.
    """

    def constant_score(self, state: CycleState, pod: PodInfo) -> int | None: ...


@runtime_checkable
class NormalizeScorePlugin(Plugin, Protocol):
    def normalize_score(self, state: CycleState, pod: PodInfo, rows: Rows, scores: Scores) -> Status:
        """Rescale ``scores`` (aligned with ``rows``) in place into [0, 100]."""


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...
    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        """Success, Wait (with a timeout in seconds) or a rejection."""


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    def pre_bind(
        self, state: CycleState, pod: PodInfo, node_name: str, plan: BindingPlan
    ) -> Awaitable[Status]: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    def bind(
        self, state: CycleState, pod: PodInfo, node_name: str, plan: BindingPlan
    ) -> Awaitable[Status]: ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


#: Extension point name (as in the config's ``plugins`` section) -> the interface it needs.
EXTENSION_POINTS: dict[str, tuple[type, ...]] = {
    "preEnqueue": (PreEnqueuePlugin,),
    "queueSort": (QueueSortPlugin,),
    "preFilter": (PreFilterPlugin,),
    "filter": (FilterPlugin, BatchFilterPlugin),
    "postFilter": (PostFilterPlugin,),
    "preScore": (PreScorePlugin,),
    "score": (ScorePlugin, BatchScorePlugin),
    "reserve": (ReservePlugin,),
    "permit": (PermitPlugin,),
    "preBind": (PreBindPlugin,),
    "bind": (BindPlugin,),
    "postBind": (PostBindPlugin,),
}


def implemented_points(cls: type) -> frozenset[str]:
    """The extension points a plugin class implements, judged by its methods."""
    methods = {
        "preEnqueue": "pre_enqueue",
        "queueSort": "sort_key",
        "preFilter": "pre_filter",
        "filter": ("filter", "filter_batch"),
        "postFilter": "post_filter",
        "preScore": "pre_score",
        "score": ("score", "score_batch"),
        "reserve": "reserve",
        "permit": "permit",
        "preBind": "pre_bind",
        "bind": "bind",
        "postBind": "post_bind",
    }
    out = set()
    for point, names in methods.items():
        options = (names,) if isinstance(names, str) else names
        if any(callable(getattr(cls, m, None)) for m in options):
            out.add(point)
    return frozenset(out)
