"""Which hostnames have a local PV for a claim, remembered across cycles.

Replicas of a StatefulSet ask for alike claims (same class, size, modes, selector), and between
two of their cycles only the PV the previous one took changed. So the answer, per node row a
yes or no (by the hostname's domain id, :class:`~koordsched.framework.pod_topology.TopologyDomains`),
is kept per claim *signature* and brought up to date by redoing only the hostnames whose local
PVs changed since (``PVIndex.log``), instead of walking every PV of the class for every pod.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import numpy as np
import numpy.typing as npt

from koordsched.api.storage import PersistentVolumeClaim, claim_class
from koordsched.framework.pod_topology import TopologyDomains
from koordsched.plugins.volumebinding.matching import HOSTNAME_LABEL, ClassIndex, PVIndex, host_has_pv

BoolArray = npt.NDArray[np.bool_]

#: Signatures remembered before the oldest are dropped.
MAX_SIGNATURES = 256


@dataclass
class _Known:
    seq: int
    #: domain id of a hostname -> whether it has a PV for the signature; one spare slot at the
    #: end, always False, for rows without a hostname (id -1).
    good: BoolArray


def _signature(pvc: PersistentVolumeClaim, request: int) -> tuple[object, ...]:
    sel = pvc.spec.selector
    return (
        claim_class(pvc),
        request,
        pvc.spec.volume_mode or "Filesystem",
        tuple(sorted(pvc.spec.access_modes)),
        msgspec.json.encode(sel) if sel is not None else None,
    )


class HostAnswers:
    def __init__(self) -> None:
        self._known: dict[tuple[object, ...], _Known] = {}

    def good_rows(
        self,
        index: PVIndex,
        idx: ClassIndex | None,
        pvc: PersistentVolumeClaim,
        request: int,
        domains: TopologyDomains,
    ) -> BoolArray:
        """Per hostname domain id (plus the spare slot), whether a local PV could serve the claim."""
        count = domains.count(HOSTNAME_LABEL)
        sig = _signature(pvc, request)
        known = self._known.get(sig)
        cls = sig[0]
        if known is not None and known.seq >= index.log_base:
            if len(known.good) < count + 1:
                grown = np.zeros(count + 1, dtype=np.bool_)
                grown[: len(known.good) - 1] = known.good[:-1]
                # Hostnames new to the domains since: work them out.
                for i in range(len(known.good) - 1, count):
                    grown[i] = host_has_pv(idx, pvc, request, domains.value(HOSTNAME_LABEL, i))
                known.good = grown
            for c, host in index.log[known.seq - index.log_base :]:
                if c != cls:
                    continue
                changed = domains.id_of(HOSTNAME_LABEL, host)
                if changed is not None:
                    known.good[changed] = host_has_pv(idx, pvc, request, host)
            known.seq = index.seq
            return known.good
        good = np.zeros(count + 1, dtype=np.bool_)
        if idx is not None:
            for host in idx.local:
                found = domains.id_of(HOSTNAME_LABEL, host)
                if found is not None and host_has_pv(idx, pvc, request, host):
                    good[found] = True
        if len(self._known) >= MAX_SIGNATURES:
            self._known.pop(next(iter(self._known)))
        self._known[sig] = _Known(index.seq, good)
        return good
