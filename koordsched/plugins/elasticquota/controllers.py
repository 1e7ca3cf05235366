"""ElasticQuota's controllers, as Koordinator's quota plugin brings them (``NewControllers``).

* The quota status controller (``syncElasticQuotaStatusWorker``, every second): for each
  ElasticQuota object the first profile's plugin knows, the writes it needs
  (:func:`~koordsched.plugins.elasticquota.status.status_update`) when the object does not show
  them already: the runtime, request and non-preemptible-used annotations by a merge patch of
  the object's metadata (never ``spec``), then ``status.used`` by a merge patch of the status
  subresource (resources no longer used set to null; a CRD without the subresource gets it on
  the object, as Koordinator writes it). A failed write is logged once per quota and reason and
  tried again next round; one sent and not yet seen on the watch (same resourceVersion) is not
  sent twice. The quota gauges are refreshed every :data:`METRICS_EVERY` rounds. The simulator
  does not run it: its report shows what the status would say.
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

from koordsched.api.elastic_quota import ElasticQuota
from koordsched.api.kinds import ELASTIC_QUOTAS, ObjectKind
from koordsched.framework.controllers import Controller, Eviction, MergePatch, ObjectWrite, Write, WriteResult
from koordsched.plugins.elasticquota.plugin import ElasticQuotaPlugin
from koordsched.plugins.elasticquota.status import StatusUpdate, quota_values, status_update

log = logging.getLogger(__name__)

#: Koordinator's quota status controller period.
STATUS_INTERVAL = 1.0
#: The quota gauges are refreshed every this many status rounds (Koordinator: every 10 s).
METRICS_EVERY = 10
#: One status write unanswered this long is abandoned (tried again next round).
STATUS_WRITE_TIMEOUT = 10.0
#: One eviction (or the Eviction API's version lookup) unanswered this long is abandoned.
WRITE_TIMEOUT = 10.0
#: The shortest time between two revoke rounds.
MIN_REVOKE_INTERVAL = 0.05


class QuotaStatusController:
    """Writes each quota's usage back on its object (see the module docstring)."""

    name = "quota-status"
    description = "the quota status write-back"
    watches: tuple[ObjectKind[Any], ...] = (ELASTIC_QUOTAS,)
    interval = STATUS_INTERVAL
    workers = 0
    write_timeout = STATUS_WRITE_TIMEOUT
    simulated = False

    def __init__(self, plugins: Sequence[ElasticQuotaPlugin]) -> None:
        self.plugins = list(plugins)
        #: key -> (resourceVersion written against, the update sent).
        self._sent: dict[str, tuple[str, StatusUpdate]] = {}
        #: key -> (resourceVersion, update) of each write of the round in flight.
        self._pending: dict[str, tuple[str, StatusUpdate]] = {}
        self._logged: dict[str, str] = {}
        #: Counters, for logs and tests.
        self.writes = 0
        self.failures = 0
        self._rounds = 0

    def reconcile(self) -> list[Write]:
        first = self.plugins[0]
        store = first.quota_objects
        summaries = first.summaries()
        if self._rounds % METRICS_EVERY == 0:
            first.metrics.set_quota_values(*quota_values(summaries))
        self._rounds += 1
        out: list[Write] = []
        for summary in summaries:
            eq = store.get(summary.key) if summary.key else None
            if not isinstance(eq, ElasticQuota) or summary.refusal:
                continue
            update = status_update(eq, summary)
            if update.empty:
                self._sent.pop(summary.key, None)
                continue
            version = eq.metadata.resource_version
            if self._sent.get(summary.key) == (version, update):
                continue  # sent already; the watch has not shown it yet
            self._pending[summary.key] = (version, update)
            out.append(ObjectWrite(summary.key, _patches(eq, update)))
        return out

    def applied(self, write: Write, result: WriteResult) -> None:
        if not isinstance(write, ObjectWrite):
            return
        key = write.key
        sent = self._pending.pop(key, None)
        self.plugins[0].metrics.observe_quota_status_update(result.seconds)
        if result.ok:
            if sent is not None:
                self._sent[key] = sent
            self.writes += 1
            self._logged.pop(key, None)
        elif result.code != 404:  # 404: deleted meanwhile, its watch event follows
            self.failures += 1
            if self._logged.get(key) != result.error:
                self._logged[key] = result.error
                log.warning(
                    "ElasticQuota %s: status not written back (tried again in %ss): %s",
                    key,
                    self.interval,
                    result.error,
                )

    def next_due(self) -> float | None:
        return None


def _patches(eq: ElasticQuota, update: StatusUpdate) -> tuple[MergePatch, ...]:
    meta = eq.metadata
    out: list[MergePatch] = []
    if update.annotations is not None:
        out.append(
            MergePatch(
                ELASTIC_QUOTAS, meta.namespace, meta.name, {"metadata": {"annotations": update.annotations}}
            )
        )
    if update.used is not None:
        removed: dict[str, Any] = {r: None for r in eq.status.used if r not in update.used}
        body = {"status": {"used": {**removed, **update.used}}}
        out.append(
            MergePatch(ELASTIC_QUOTAS, meta.namespace, meta.name, body, "status", object_fallback=True)
        )
    return tuple(out)


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
    if quota_plugins:
        # The first profile's quotas, as the status controller always wrote them.
        out.append(QuotaStatusController(quota_plugins))
    if revokers:
        out.append(QuotaRevokeController(revokers))
    return out
