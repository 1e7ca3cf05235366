"""PodTopologySpread: spread constraints (DoNotSchedule filters, ScheduleAnyway scores) and the
system default constraints, over per-domain match counts kept up to date in the snapshot."""

from koordsched.plugins.podtopologyspread.args import PodTopologySpreadArgs
from koordsched.plugins.podtopologyspread.kernels import warm_up as warm_up_kernels
from koordsched.plugins.podtopologyspread.plugin import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    PodTopologySpread,
)

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "PodTopologySpread",
    "PodTopologySpreadArgs",
    "warm_up_kernels",
]
