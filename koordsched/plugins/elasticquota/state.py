"""ElasticQuota's cycle state: the pod's quota and limit as PreFilter saw them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from koordsched.framework.cycle_state import StateData

Amounts = dict[str, int]

#: Koordinator's key (``"PostFilter" + Name``).
STATE_KEY: Final = "PostFilterElasticQuota"


@dataclass
class QuotaState(StateData):
    """The pod's quota and limit as PreFilter saw them; AddPod/RemovePod (preemption's dry runs)
    move ``delta`` and ``np_delta`` for pods of the same quota, on top of the ledger's used."""

    quota: str
    limit: Amounts
    delta: Amounts = field(default_factory=dict)
    np_delta: Amounts = field(default_factory=dict)

    def clone(self) -> QuotaState:
        return QuotaState(self.quota, self.limit, dict(self.delta), dict(self.np_delta))
