"""InterPodAffinity: required pod affinity and anti-affinity as a filter, preferred terms as a score."""

from koordsched.plugins.interpodaffinity.args import InterPodAffinityArgs
from koordsched.plugins.interpodaffinity.kernels import warm_up as warm_up_kernels
from koordsched.plugins.interpodaffinity.plugin import InterPodAffinity

__all__ = ["InterPodAffinity", "InterPodAffinityArgs", "warm_up_kernels"]
