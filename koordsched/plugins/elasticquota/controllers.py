"""ElasticQuota's controllers, as Koordinator's quota plugin brings them (``NewControllers``).

* The overuse revoke controller (``monitorAllQuotas``): every ``revokePodInterval`` each
  profile's plugin picks the pods of quotas that used more than their runtime for longer than
  ``delayEvictTime`` (:mod:`~koordsched.plugins.elasticquota.revoke`), and each is evicted
  (Eviction API, uid precondition), so PodDisruptionBudgets are honoured: a 429 leaves the pod
  running and the controller tries again after another delay. The simulator runs it on virtual
  time.

Both are I/O-free (:mod:`koordsched.framework.controllers`): a backend's runner sends the writes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from koordsched.api.kinds import ELASTIC_QUOTAS, ObjectKind
from koordsched.framework.controllers import Controller, Eviction, Write, WriteResult
from koordsched.plugins.elasticquota.plugin import ElasticQuotaPlugin

log = logging.getLogger(__name__)

#: One eviction (or the Eviction API's version lookup) unanswered this long is abandoned.
WRITE_TIMEOUT = 10.0
#: The shortest time between two revoke rounds.
MIN_REVOKE_INTERVAL = 0.05


class QuotaRevokeController:
    """Evicts the pods of overused quotas (see the module docstring), for every profile at once."""

    name = "quota-revoke"
    description = "the quota overuse revoke controller"
    watches: tuple[ObjectKind[Any], ...] = (ELASTIC_QUOTAS,)
    workers = 0
    write_timeout = WRITE_TIMEOUT
    simulated = True

    def __init__(self, revokers: Sequence[ElasticQuotaPlugin]) -> None:
        self.revokers = list(revokers)
        self.interval = max(min(r.revoke_interval or 1.0 for r in self.revokers), MIN_REVOKE_INTERVAL)
        #: pod key -> the quota it is evicted for, until the eviction's outcome is known.
        self._quota_of: dict[str, str] = {}
        #: Counters, for logs and tests.
        self.evicted = 0
        self.failures = 0

    def reconcile(self) -> list[Write]:
        out: list[Write] = []
        for revoker in self.revokers:
            for revocation in revoker.revoke(revoker.clock.now()):
                self._quota_of[revocation.pod.key] = revocation.quota
                out.append(Eviction(revocation.pod.pod, revocation.message))
        return out

    def applied(self, write: Write, result: WriteResult) -> None:
        if not isinstance(write, Eviction):
            return
        pod = write.pod
        quota = self._quota_of.pop(pod.key, "")
        if result.ok:
            self.evicted += 1
            log.info("pod %s evicted: %s", pod.key, write.message)
        elif result.code not in (404, 409):  # gone, or a new pod of that name: nothing to evict
            self.failures += 1
            log.warning("pod %s: not evicted for quota %s: %s", pod.key, quota, result.error)

    def next_due(self) -> float | None:
        return min(
            (d for r in self.revokers if (d := r.revoke_due(r.clock.now())) is not None),
            default=None,
        )


def quota_controllers(plugins: Sequence[object]) -> list[Controller]:
    """ElasticQuota's controllers, from its instance in each profile that runs it."""
    quota_plugins = [p for p in plugins if isinstance(p, ElasticQuotaPlugin)]
    revokers = [p for p in quota_plugins if p.revoke_interval is not None]
    out: list[Controller] = []
    if revokers:
        out.append(QuotaRevokeController(revokers))
    return out
