"""NodeAffinity: required node affinity and nodeSelector as a filter, preferred terms as a score."""

from koordsched.plugins.nodeaffinity.args import NodeAffinityArgs
from koordsched.plugins.nodeaffinity.node_affinity import NodeAffinity

__all__ = ["NodeAffinity", "NodeAffinityArgs"]
