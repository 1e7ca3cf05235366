"""TaintToleration: filters on NoSchedule/NoExecute taints, scores on PreferNoSchedule ones."""

from koordsched.plugins.tainttoleration.taint_toleration import TaintToleration

__all__ = ["TaintToleration"]
