"""The pods ``/metrics/resources`` reports, read from the scheduler's cache and queue when scraped.

kube-scheduler reads its pod informer: every pod that is not terminal, bound or pending. Here that
is the cache's pods (bound and assumed, with their node) and the queue's pending ones (no node);
a pod in the middle of its scheduling cycle is in neither for that moment, and Reservations'
reserve pods are not pods, so they are left out. Each pod's requests and limits are computed once
per pod object and reused until the pod changes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import msgspec

from koordsched.api.core import Pod
from koordsched.api.quantity import QuantityError
from koordsched.api.reservation import is_reserve_pod
from koordsched.api.resources import pod_limits, pod_requests
from koordsched.observability.pod_resources import PodResources
from koordsched.scheduler.cache import Cache
from koordsched.scheduler.queue import SchedulingQueue

log = logging.getLogger(__name__)


class PodResourceReport:
    def __init__(self, cache: Cache, queue: SchedulingQueue) -> None:
        self.cache = cache
        self.queue = queue
        #: uid -> (the pod object the amounts were computed from, its row).
        self._memo: dict[str, tuple[Pod, PodResources]] = {}

    def __call__(self) -> list[PodResources]:
        rows: list[PodResources] = []
        seen: dict[str, tuple[Pod, PodResources]] = {}
        for pod, node in self._placed():
            uid = pod.identity
            memo = self._memo.get(uid)
            if memo is None or memo[0] is not pod:
                fresh = self._row(pod, node)
                if fresh is None:
                    continue
                memo = (pod, fresh)
            elif memo[1].node != node:  # assumed, then bound elsewhere: same pod object
                memo = (pod, msgspec.structs.replace(memo[1], node=node))
            seen[uid] = memo
            rows.append(memo[1])
        self._memo = seen  # pods that went away are forgotten
        return rows

    def _placed(self) -> Iterator[tuple[Pod, str]]:
        for state in self.cache.pods():
            if not is_reserve_pod(state.pod.pod):
                yield state.pod.pod, state.node_name
        for info in self.queue.pending():
            if not is_reserve_pod(info.pod):
                yield info.pod, ""

    @staticmethod
    def _row(pod: Pod, node: str) -> PodResources | None:
        try:
            requests, limits = pod_requests(pod), pod_limits(pod)
        except QuantityError as err:  # the cache holds only parsed pods; never fail a scrape
            log.debug("pod %s left out of /metrics/resources: %s", pod.key, err)
            return None
        return PodResources(
            namespace=pod.metadata.namespace,
            name=pod.metadata.name,
            node=node,
            scheduler=pod.spec.scheduler_name,
            priority=pod.spec.priority,
            requests=requests,
            limits=limits,
        )
