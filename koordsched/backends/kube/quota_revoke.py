"""ElasticQuota's overuse revoke controller in a cluster: while this instance leads, every
``revokePodInterval`` the ElasticQuota plugin picks the pods of quotas that used more than their
runtime for longer than ``delayEvictTime`` (:mod:`koordsched.plugins.elasticquota.revoke`), and
each is evicted through the Eviction API, as Koordinator's controller does, so PodDisruptionBudgets
are honoured (a 429 leaves the pod running; the controller tries again after another delay).

The Eviction is ``policy/v1`` where the API server takes it, else ``policy/v1beta1`` (before
1.22), looked up once (:mod:`~koordsched.backends.kube.eviction`). It carries the pod's uid as a
precondition, so a new pod of the same name is never evicted in its place (Koordinator sends empty
DeleteOptions). Every request has a timeout and goes through the writes' token bucket; a failure
is logged. Only when the args enable it (``monitorAllQuotas: true``); RBAC: ``pods/eviction`` create.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from koordsched.backends.kube.client import TRANSPORT_ERRORS, ApiError, KubeClient
from koordsched.backends.kube.eviction import EvictionApi
from koordsched.plugins.elasticquota import ElasticQuotaPlugin, Revocation, revoker_of
from koordsched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)

#: One eviction (or the version lookup) unanswered this long is abandoned.
WRITE_TIMEOUT = 10.0


class QuotaRevoker:
    def __init__(
        self, client: KubeClient, scheduler: Scheduler, *, write_timeout: float = WRITE_TIMEOUT
    ) -> None:
        self.client = client
        self.scheduler = scheduler
        self.write_timeout = write_timeout
        self.revokers = revokers(scheduler)
        self.evictions = EvictionApi(client, timeout=write_timeout)
        #: Counters, for logs and tests.
        self.evicted = 0
        self.failures = 0

    @staticmethod
    def wanted(scheduler: Scheduler) -> bool:
        """Whether some profile's ElasticQuota has the controller on (``monitorAllQuotas``)."""
        return bool(revokers(scheduler))

    async def run(self, stop: asyncio.Event) -> None:
        interval = min(r.revoke_interval or 1.0 for r in self.revokers) if self.revokers else 1.0
        while not stop.is_set():
            await self.revoke_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(interval, 0.05))

    async def revoke_once(self) -> int:
        """One round of every profile's controller; the number of pods evicted."""
        now = self.scheduler.clock.now()
        done = 0
        for revoker in self.revokers:
            for revocation in revoker.revoke(now):
                done += await self._evict(revocation)
        return done

    async def _evict(self, revocation: Revocation) -> int:
        pod = revocation.pod.pod
        meta = pod.metadata
        try:
            options = {"preconditions": {"uid": meta.uid}} if meta.uid else None
            body = await self.evictions.body(meta.name, meta.namespace, options)
            await self.client.request_bytes(
                "POST",
                f"/api/v1/namespaces/{meta.namespace}/pods/{meta.name}/eviction",
                body=body,
                request_timeout=self.write_timeout,
            )
        except ApiError as err:
            if err.status in (404, 409):
                return 0  # gone, or a new pod of that name: nothing of this quota's to evict
            self.failures += 1
            log.warning("pod %s: not evicted for quota %s: %s %s", pod.key, revocation.quota, err.status, err)
            return 0
        except TRANSPORT_ERRORS as err:
            self.failures += 1
            log.warning(
                "pod %s: not evicted for quota %s: %s: %s", pod.key, revocation.quota, type(err).__name__, err
            )
            return 0
        self.evicted += 1
        log.info("pod %s evicted: %s", pod.key, revocation.message)
        return 1


def revokers(scheduler: Scheduler) -> list[ElasticQuotaPlugin]:
    return [r for fw in scheduler.frameworks.values() if (r := revoker_of(fw.plugins)) is not None]
