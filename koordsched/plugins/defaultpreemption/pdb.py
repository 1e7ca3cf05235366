"""Which potential victims a preemption would take past their PodDisruptionBudget
(upstream's ``filterPodsWithPDBViolation``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from koordsched.api.policy import PodDisruptionBudget
from koordsched.api.selectors import SelectorError, match_label_selector
from koordsched.framework.types import PodInfo


def _matches(pdb: PodDisruptionBudget, pod: PodInfo) -> bool:
    sel = pdb.spec.selector
    # A nil or empty selector matches nothing here (unlike elsewhere in Kubernetes).
    if sel is None or (not sel.match_labels and not sel.match_expressions):
        return False
    try:
        return match_label_selector(sel, pod.pod.metadata.labels)
    except SelectorError:
        return False  # a selector upstream cannot parse matches no pod


def split_by_pdb_violation(
    pods: Sequence[PodInfo], pdbs: Iterable[PodDisruptionBudget]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """(violating, non-violating), each in the order given.

    Each matching budget's ``disruptionsAllowed`` is spent pod by pod in that order; a pod that
    takes one below zero violates it. A pod already in a budget's ``disruptedPods`` was counted
    by the API server and spends nothing.
    """
    budgets = list(pdbs)
    allowed = [b.status.disruptions_allowed for b in budgets]
    violating: list[PodInfo] = []
    fine: list[PodInfo] = []
    for pod in pods:
        meta = pod.pod.metadata
        violated = False
        if meta.labels:
            for i, pdb in enumerate(budgets):
                if pdb.metadata.namespace != meta.namespace or not _matches(pdb, pod):
                    continue
                if meta.name in pdb.status.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else fine).append(pod)
    return violating, fine
