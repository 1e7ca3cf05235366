"""GPUBalance (beyond Koordinator): empties partly used GPU nodes of their small GPU pods so that
whole nodes are free for multi-GPU pods; its objective is the stranded GPUs of the simulator's
fragmentation report (idle GPUs on partly used GPU nodes)."""

from koordsched.descheduler.plugins.gpubalance.args import GPUBalanceArgs
from koordsched.descheduler.plugins.gpubalance.plugin import GPUBalance

__all__ = ["GPUBalance", "GPUBalanceArgs"]
