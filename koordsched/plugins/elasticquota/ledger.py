"""What each quota's pods ask for and hold (Koordinator's ``QuotaInfo`` request, used and
non-preemptible used, kept by ``GroupQuotaManager.OnPod*`` and ``Reserve/UnreservePod``).

Every pod the scheduler parsed is here under the quota it is charged to:

* ``request`` counts every pod, pending or not: it is what the runtime quota is shared by;
* ``used`` counts the *assigned* ones: bound (``spec.nodeName``) or reserved by this scheduler
  (assumed), until Unreserve;
* ``np_used`` is ``used`` of the non-preemptible pods (label ``preemptible: "false"``), held
  against the quota's min.

Sums are kept per quota as pods come and go, so nothing here walks the pods in a cycle; only a
change of the quota tree re-charges every pod (:meth:`Ledger.recharge`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import msgspec

from koordsched.api.elastic_quota import LABEL_POD_PREEMPTIBLE
from koordsched.api.resources import INT64_MAX
from koordsched.framework.shared_memo import IdentityMemo
from koordsched.framework.types import PodInfo

log = logging.getLogger(__name__)

Amounts = dict[str, int]

#: The pod-count "resource" is not a quota dimension.
_PODS = "pods"


#: A request this large (in the pod's own units) is absurd: it is Koordinator's ceiling for the
#: default and system quota groups (``MaxInt64/5``), more than any node can hold.
ABSURD_REQUEST = INT64_MAX // 5


def quota_requests(pod: PodInfo) -> Amounts:
    """The pod's requests as a quota counts them (``PodRequests``; the pods count left out).

    A bound pod's request that cannot be read is held as ``INT64_MAX`` (its node counts it as
    full, :class:`~koordsched.api.resources.HeldRequests`); it is not charged to the quota, nor
    is an absurd one (at least :data:`ABSURD_REQUEST`): either would stop every pod of the
    quota (of the default quota: every pod without one) for one bad object. The ledger logs
    it (:func:`unreadable`); a pending pod asking so much still fits no node.

    One dict per requests dict (pods of one template share theirs): never changed in place."""
    requests = pod.requests
    found = _QUOTA_REQUESTS.get(requests)
    if found is None:
        found = {r: v for r, v in requests.items() if 0 < v < ABSURD_REQUEST and r != _PODS}
        _QUOTA_REQUESTS.put(requests, found)
    return found


_QUOTA_REQUESTS: IdentityMemo[Amounts] = IdentityMemo()


def unreadable(pod: PodInfo) -> list[str]:
    """The resources whose request is unreadable (held as ``INT64_MAX``) or absurd."""
    return sorted(r for r, v in pod.requests.items() if v >= ABSURD_REQUEST and r != _PODS)


def non_preemptible(pod: PodInfo) -> bool:
    return pod.pod.metadata.labels.get(LABEL_POD_PREEMPTIBLE) == "false"


def _add(into: Amounts, amounts: Amounts, sign: int) -> None:
    for r, v in amounts.items():
        left = into.get(r, 0) + sign * v
        if left > 0:
            into[r] = left
        else:
            # Non-negative, as Koordinator's addUsedNonNegative; a zero entry is dropped.
            into.pop(r, None)


class PodEntry(msgspec.Struct, gc=False):
    """One per pod seen: a struct the cyclic collector does not track (nothing it refers to
    leads back to it)."""

    pod: PodInfo
    quota: str
    requests: Amounts
    assigned: bool
    non_preemptible: bool
    #: The quota tree the quota was resolved in (a new tree re-charges every pod).
    charged_at: object = None


class Ledger:
    def __init__(self) -> None:
        self.pods: dict[str, PodEntry] = {}
        self.request: dict[str, Amounts] = {}
        self.used: dict[str, Amounts] = {}
        self.np_used: dict[str, Amounts] = {}
        #: Moves whenever some quota's request changes (the runtime quota depends on it).
        self.request_version = 0
        #: Moves whenever some quota's used changes.
        self.used_version = 0

    def __iter__(self) -> Iterator[PodEntry]:
        return iter(self.pods.values())

    def _charge(self, entry: PodEntry, sign: int) -> None:
        if not entry.requests:
            return
        _add(self.request.setdefault(entry.quota, {}), entry.requests, sign)
        self.request_version += 1
        if entry.assigned:
            self._charge_used(entry, sign)

    def _charge_used(self, entry: PodEntry, sign: int) -> None:
        if not entry.requests:
            return
        _add(self.used.setdefault(entry.quota, {}), entry.requests, sign)
        if entry.non_preemptible:
            _add(self.np_used.setdefault(entry.quota, {}), entry.requests, sign)
        self.used_version += 1

    def upsert(self, pod: PodInfo, quota: str, assigned: bool | None = None, tree: object = None) -> None:
        """Record the pod (a new version of it) under ``quota``; ``assigned`` None keeps what
        was known (a pod reserved by us stays assigned until Unreserve or its deletion)."""
        old = self.pods.get(pod.uid)
        if assigned is None:
            assigned = old.assigned if old is not None else False
        entry = PodEntry(pod, quota, quota_requests(pod), assigned, non_preemptible(pod), tree)
        if old is None or old.pod.requests is not pod.requests:
            bad = unreadable(pod)
            if bad:
                log.warning(
                    "pod %s: its %s request cannot be read or is absurd (at least MaxInt64/5): "
                    "not charged to quota %s (its node counts it as asked)",
                    pod.key,
                    "/".join(bad),
                    quota,
                )
        if old is not None:
            if (
                old.quota == entry.quota
                and old.requests == entry.requests
                and old.assigned == entry.assigned
                and old.non_preemptible == entry.non_preemptible
            ):
                old.pod, old.charged_at = pod, tree
                return
            self._charge(old, -1)
        self.pods[pod.uid] = entry
        self._charge(entry, 1)

    def assign(self, uid: str, assigned: bool) -> None:
        entry = self.pods.get(uid)
        if entry is None or entry.assigned == assigned:
            return
        entry.assigned = assigned
        self._charge_used(entry, 1 if assigned else -1)

    def remove(self, uid: str) -> PodEntry | None:
        entry = self.pods.pop(uid, None)
        if entry is not None:
            self._charge(entry, -1)
        return entry

    def recharge(self, quota_of: Callable[[PodInfo], str], tree: object = None) -> None:
        """Charge every pod again to the quota ``quota_of`` names (the quota tree changed)."""
        for entry in list(self.pods.values()):
            entry.charged_at = tree
            quota = quota_of(entry.pod)
            if quota != entry.quota:
                self._charge(entry, -1)
                entry.quota = quota
                self._charge(entry, 1)
