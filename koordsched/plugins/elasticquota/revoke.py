"""The overuse revoke controller (Koordinator's ``QuotaOverUsedRevokeController``), without I/O.

A quota's runtime shrinks when other quotas ask for their share back; its pods keep running and
its used may then exceed its runtime. When that lasts longer than ``delayEvictTime``, the
controller picks pods of the quota to evict, so that used comes back within the runtime:

* every ``revokePodInterval`` each quota (but the root and system groups, and parent quotas,
  which hold no pods) is looked at: used not within the runtime (compared on the runtime's
  resources, as ``quotav1.LessThanOrEqual``) for longer than ``delayEvictTime`` since it was last
  seen within it triggers a revoke, and the clock starts again;
* the quota's bound pods, least important first (lower priority, then the later started), are
  taken off until used is within the runtime; if even all of them are not enough, all go;
  otherwise they are put back, most important first, wherever they still fit, and the rest are
  revoked.

Only when ``ElasticQuotaArgs.monitorAllQuotas`` is true, as in Koordinator (default false).

Deliberate differences: non-preemptible pods (label ``quota.scheduling.koordinator.sh/preemptible:
"false"``, held against the quota's min) are never revoked, nor pods assumed but not bound yet
(Koordinator's list of assigned pods includes them, and an eviction of a pod without a node
deletes a pending pod); pods already terminating count as gone, so a long grace period does not
make the controller evict more pods than needed.

The plugin's revoke controller (``controllers.py``) asks for the evictions; the backends' controller
runners do them: the simulator reports the pods as ``Revoked``, the kube backend posts Evictions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from koordsched.api.elastic_quota import ROOT_QUOTA_NAME, SYSTEM_QUOTA_NAME
from koordsched.framework.types import PodInfo
from koordsched.plugins.defaultpreemption.evaluator import importance_key
from koordsched.plugins.elasticquota.ledger import Amounts, Ledger
from koordsched.plugins.elasticquota.messages import resource_list
from koordsched.plugins.elasticquota.tree import QuotaNode, QuotaTree


@dataclass(frozen=True, slots=True)
class Revocation:
    """A pod to evict because its quota used more than its runtime for too long."""

    pod: PodInfo
    quota: str
    message: str


def within(used: Mapping[str, int], limit: Mapping[str, int]) -> bool:
    """``quotav1.LessThanOrEqual(used, limit)``: only the limit's resources are compared."""
    return all(used.get(r, 0) <= v for r, v in limit.items())


def _sub(a: Mapping[str, int], b: Mapping[str, int]) -> Amounts:
    out = dict(a)
    for r, v in b.items():
        out[r] = out.get(r, 0) - v
    return out


def _add(a: Mapping[str, int], b: Mapping[str, int]) -> Amounts:
    out = dict(a)
    for r, v in b.items():
        out[r] = out.get(r, 0) + v
    return out


def pods_to_revoke(
    pods: list[PodInfo],
    requests: Callable[[PodInfo], Mapping[str, int]],
    used: Amounts,
    limit: Amounts,
    now: float,
) -> list[PodInfo]:
    """``getToRevokePodList``: which of the quota's pods to evict so that used is within ``limit``."""
    # Least important first: the reverse of kube-scheduler's MoreImportantPod.
    order = sorted(pods, key=lambda p: importance_key(p, now), reverse=True)
    taken: list[PodInfo] = []
    left = dict(used)
    for pod in order:
        if within(left, limit):
            break
        left = _sub(left, requests(pod))
        taken.append(pod)
    if not within(left, limit):
        return taken
    revoked: list[PodInfo] = []
    for pod in reversed(taken):
        back = _add(left, requests(pod))
        if within(back, limit):
            left = back
        else:
            revoked.append(pod)
    return revoked


class OveruseMonitor:
    """Per quota, when it was last seen within its runtime (``lastUnderUsedTime``)."""

    def __init__(self, delay: float, interval: float) -> None:
        self.delay = delay
        self.interval = interval
        self._under_since: dict[str, float] = {}

    def _quotas(self, tree: QuotaTree) -> list[QuotaNode]:
        return [
            node
            for name, node in sorted(tree.nodes.items())
            if name not in (ROOT_QUOTA_NAME, SYSTEM_QUOTA_NAME)
            and not node.refusal
            and not node.children
            and not node.is_parent
        ]

    def check(
        self,
        tree: QuotaTree,
        ledger: Ledger,
        limit_of: Callable[[QuotaNode], Amounts],
        now: float,
        wall: float,
    ) -> list[Revocation]:
        """One round of the controller at ``now`` (monotonic; ``wall``: Unix time): the pods to
        revoke."""
        out: list[Revocation] = []
        quotas = self._quotas(tree)
        names = {node.name for node in quotas}
        for gone in [q for q in self._under_since if q not in names]:
            del self._under_since[gone]
        entries = ledger.pods
        by_quota: dict[str, list[PodInfo]] = {}
        leaving: dict[str, Amounts] = {}
        for entry in ledger:
            if not entry.assigned:
                continue
            if entry.pod.pod.metadata.deletion_timestamp:
                # Evicted already (a grace period runs): as good as gone, never evicted twice.
                leaving[entry.quota] = _add(leaving.get(entry.quota, {}), entry.requests)
            elif not entry.non_preemptible and entry.pod.pod.spec.node_name:
                by_quota.setdefault(entry.quota, []).append(entry.pod)
        for node in quotas:
            name = node.name
            since = self._under_since.setdefault(name, now)
            used = _sub(ledger.used.get(name, {}), leaving.get(name, {}))
            limit = limit_of(node)
            if within(used, limit):
                self._under_since[name] = now
                continue
            if now - since <= self.delay:
                continue
            self._under_since[name] = now
            pods = by_quota.get(name, [])
            chosen = pods_to_revoke(pods, lambda p: entries[p.uid].requests, used, limit, wall)
            message = (
                f"revoked: quota {name} used {resource_list(used)} more than its runtime "
                f"{resource_list(limit)} for longer than {self.delay:g}s"
            )
            out.extend(Revocation(p, name, message) for p in chosen)
        return out

    def next_due(
        self, tree: QuotaTree, ledger: Ledger, limit_of: Callable[[QuotaNode], Amounts], now: float
    ) -> float | None:
        """When the next revoke is due if nothing changes (the simulator moves its clock there):
        the first round, on the controller's period, past a quota's delay. None when no quota
        over its runtime has a pod that could be revoked."""
        revocable = {
            entry.quota
            for entry in ledger
            if entry.assigned and not entry.non_preemptible and entry.pod.pod.spec.node_name
        }
        due: float | None = None
        step = self.interval if self.interval > 0 else 1e-3
        for node in self._quotas(tree):
            if node.name not in revocable or within(ledger.used.get(node.name, {}), limit_of(node)):
                continue
            since = self._under_since.get(node.name, now)
            at = (math.floor((since + self.delay) / step) + 1) * step
            at = max(at, now)
            due = at if due is None else min(due, at)
        return due
