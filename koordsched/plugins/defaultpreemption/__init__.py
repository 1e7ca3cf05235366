"""DefaultPreemption: kube-scheduler's PostFilter, and the preemption evaluator other plugins reuse."""

from koordsched.plugins.defaultpreemption.args import DefaultPreemptionArgs
from koordsched.plugins.defaultpreemption.evaluator import Candidate, Evaluator, PreemptionPolicy
from koordsched.plugins.defaultpreemption.plugin import DefaultPreemption

__all__ = ["Candidate", "DefaultPreemption", "DefaultPreemptionArgs", "Evaluator", "PreemptionPolicy"]
