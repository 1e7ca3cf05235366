"""Coscheduling: gang scheduling from PodGroups and pod annotations (Koordinator v1.6)."""

from koordsched.plugins.coscheduling.args import CoschedulingArgs
from koordsched.plugins.coscheduling.plugin import Coscheduling, GangReport

__all__ = ["Coscheduling", "CoschedulingArgs", "GangReport"]
