"""The dry run over many nodes at once, for pods whose PreFilter state no victim changes.

Upstream runs ``SelectVictimsOnNode`` per node, on 16 goroutines. Here a node's filters are
mostly vector kernels, and calling them for one row at a time costs more than the work. So the
same steps run in lockstep over a chunk of nodes: every node's potential victims are taken off,
the filters run once over all those rows, then each step puts back every surviving node's next
victim (most important first, PDB-violating ones first) and runs the filters once over those
rows; a node that no longer fits takes that victim off again. Each node's answer is what the
one-node walk gives, since nothing a filter reads on one row depends on another row's pods,
except through a PreFilter plugin's AddPod/RemovePod state, which is why a pod with active
extensions takes the one-node walk instead (``Evaluator.select_victims_on_node``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from koordsched.api.policy import PodDisruptionBudget
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Handle
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.defaultpreemption.pdb import split_by_pdb_violation

#: A node's answer: (victims, how many of them violate a PDB, status).
Answer = tuple[list[PodInfo], int, Status]


def select_victims_on_nodes(
    handle: Handle,
    state: CycleState,
    pod: PodInfo,
    nodes: Sequence[NodeInfo],
    pdbs: Sequence[PodDisruptionBudget],
    potential_of: Callable[[NodeInfo], list[PodInfo]],
    order_key: Callable[[PodInfo], tuple[int, float]],
    no_victims: Status,
    breaks_group: Callable[[PodInfo], bool] | None = None,
) -> list[Answer]:
    """Each node's answer, in ``nodes`` order; ``breaks_group``: whether evicting a pod alone
    leaves its gang below its minimum (such pods are tried for reprieve right after the
    PDB-violating ones)."""
    snap = handle.snapshot
    answers: list[Answer | None] = [None] * len(nodes)
    #: Per node: victims to try putting back, in order, and how many of them violate a PDB.
    plans: dict[int, tuple[list[PodInfo], int]] = {}
    #: Node index -> uid -> pod, for every pod currently off its row.
    off: dict[int, dict[str, PodInfo]] = {}
    try:
        for i, info in enumerate(nodes):
            potential = potential_of(info)
            if not potential:
                answers[i] = ([], 0, no_victims)
                continue
            potential.sort(key=order_key)
            violating, fine = split_by_pdb_violation(potential, pdbs)
            if breaks_group is not None:
                fine = gang_members_first(fine, breaks_group)
            plans[i] = (violating + fine, len(violating))
            taken = off[i] = {}
            for p in potential:
                snap.remove_pod(info, p)
                taken[p.uid] = p
        survivors = _fit(handle, state, pod, nodes, list(plans), answers)
        for i in plans:
            if i not in survivors:  # does not fit even without them: put them all back now
                for p in off.pop(i).values():
                    snap.add_pod(nodes[i], p)
        victims: dict[int, list[PodInfo]] = {i: [] for i in survivors}
        violations = dict.fromkeys(survivors, 0)
        step = 0
        while True:
            trying = [i for i in survivors if step < len(plans[i][0])]
            if not trying:
                break
            for i in trying:
                p = plans[i][0][step]
                snap.add_pod(nodes[i], p)
                del off[i][p.uid]
            fits = _fit(handle, state, pod, nodes, trying, None)
            for i in trying:
                if i in fits:
                    continue  # reprieved
                p = plans[i][0][step]
                snap.remove_pod(nodes[i], p)
                off[i][p.uid] = p
                victims[i].append(p)
                violations[i] += step < plans[i][1]
            step += 1
        for i in survivors:
            answers[i] = (victims[i], violations[i], SUCCESS)
    finally:
        for i, taken in off.items():
            for p in taken.values():
                snap.add_pod(nodes[i], p)
    return [a if a is not None else ([], 0, no_victims) for a in answers]


def gang_members_first(pods: list[PodInfo], breaks_group: Callable[[PodInfo], bool]) -> list[PodInfo]:
    """``pods`` with those whose eviction would break their gang first, each part in its order."""
    flags = [breaks_group(p) for p in pods]
    if not any(flags):
        return pods
    return [p for p, f in zip(pods, flags, strict=True) if f] + [
        p for p, f in zip(pods, flags, strict=True) if not f
    ]


def _fit(
    handle: Handle,
    state: CycleState,
    pod: PodInfo,
    nodes: Sequence[NodeInfo],
    indices: list[int],
    answers: list[Answer | None] | None,
) -> set[int]:
    """The indices whose node passes the filters now; with ``answers``, the others get their status."""
    if not indices:
        return set()
    rows = np.asarray([nodes[i].row for i in indices], dtype=np.int64)
    feasible, statuses = handle.filter_rows(state, pod, rows)
    passed = set(feasible.tolist())
    out = {i for i in indices if nodes[i].row in passed}
    if answers is not None:
        for i in indices:
            if i not in out:
                answers[i] = ([], 0, statuses[nodes[i].name])
    return out
