"""Runtime quota: how much of its parent's share each quota may use now (spec 4.5 "Runtime quota").

Per parent and per resource, over the parent's children (the root's children share the cluster's
allocatable less what the default and system groups use):

1. each child's request is limited by its max (``limitedRequest``; a parent's request is the sum
   of its children's limited requests);
2. a child asking more than its min gets its min and joins the sharing set with its shared
   weight (default: its max); otherwise it gets its request, or its min when it does not lend
   (``allow-lent-resource: false``);
3. what is left is shared by weight among the sharing set, in rounds: a child reaching its
   request is capped there and its excess goes back into the next round.

When the children's mins add up to more than the parent has, each min is scaled down in
proportion first (Koordinator's ``ScaleMinQuotaManager``).

Deliberate difference: Koordinator v1.6 rounds each child's share of a round with
``int64(w * left / W + 0.5)`` in float64, which can hand out up to half a unit per child more
than is left (and loses precision past 2^53, e.g. memory in bytes times a byte weight). Here a
round's shares are exact integers by the largest-remainder method (ties by quota name): they
always add up to exactly what is left, so quotas never jointly get more than their parent has.
"""

from __future__ import annotations

from collections.abc import Mapping

from koordsched.plugins.elasticquota.tree import QuotaNode, QuotaTree

Amounts = dict[str, int]


def limited(request: Mapping[str, int], max_: Mapping[str, int]) -> Amounts:
    """``getLimitRequest``: the request capped by max where max names the resource."""
    return {r: (min(v, max_[r]) if r in max_ else v) for r, v in request.items()}


def tree_requests(tree: QuotaTree, leaf_requests: Mapping[str, Mapping[str, int]]) -> dict[str, Amounts]:
    """Each usable tree quota's request: its pods' for a leaf, its children's limited requests
    summed for a parent."""
    out: dict[str, Amounts] = {}
    # Post-order without recursion: parents after all their children.
    order: list[QuotaNode] = []
    stack = [tree.nodes[name] for name in tree.top if not tree.nodes[name].refusal]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(tree.nodes[c] for c in node.children)
    for node in reversed(order):
        if node.children:
            total: Amounts = dict(leaf_requests.get(node.name, {}))
            for child in node.children:
                for r, v in limited(out[child], tree.nodes[child].max).items():
                    total[r] = total.get(r, 0) + v
            out[node.name] = total
        else:
            out[node.name] = dict(leaf_requests.get(node.name, {}))
    return out


def _shares(left: int, members: list[tuple[str, int]]) -> list[int]:
    """``left`` split in proportion to the weights, as exact integers adding up to ``left``."""
    total_weight = sum(w for _, w in members)
    base = [w * left // total_weight for _, w in members]
    residual = left - sum(base)
    if residual:
        order = sorted(
            range(len(members)), key=lambda i: (-(members[i][1] * left % total_weight), members[i][0])
        )
        for i in order[:residual]:
            base[i] += 1
    return base


def distribute(total: int, children: list[tuple[str, int, int, int, bool]]) -> dict[str, int]:
    """One parent's share of one resource: ``children`` are (name, min, limited request, shared
    weight, allow lent). Returns each child's runtime."""
    mins = {name: m for name, m, _, _, _ in children}
    min_sum = sum(mins.values())
    if min_sum > total >= 0:
        mins = {name: m * total // min_sum for name, m in mins.items()}
    runtime: dict[str, int] = {}
    request: dict[str, int] = {}
    weight: dict[str, int] = {}
    sharing: list[str] = []
    left = total
    for name, _, req, w, allow_lent in children:
        m = mins[name]
        request[name] = req
        weight[name] = w
        if req > m:
            runtime[name] = m
            sharing.append(name)
        else:
            runtime[name] = req if allow_lent else m
        left -= runtime[name]
    while left > 0 and sharing:
        members = [(name, weight[name]) for name in sharing if weight[name] > 0]
        if not members:
            break
        next_left = 0
        still: list[str] = []
        for (name, _), delta in zip(members, _shares(left, members), strict=True):
            runtime[name] += delta
            if runtime[name] < request[name]:
                still.append(name)
            else:
                next_left += runtime[name] - request[name]
                runtime[name] = request[name]
        left, sharing = next_left, still
    return runtime


def compute_runtime(
    tree: QuotaTree, requests: Mapping[str, Mapping[str, int]], total: Mapping[str, int]
) -> dict[str, Amounts]:
    """Every usable tree quota's runtime over the tree's resource keys, masked to its own max's
    resources. ``requests`` are :func:`tree_requests`; ``total`` is what the root's children share."""
    out: dict[str, Amounts] = {}
    level: list[tuple[list[str], Mapping[str, int]]] = [
        ([n for n in tree.top if not tree.nodes[n].refusal], total)
    ]
    while level:
        children, available = level.pop()
        if not children:
            continue
        runtime: dict[str, Amounts] = {name: {} for name in children}
        for r in tree.keys:
            rows = []
            for name in children:
                node = tree.nodes[name]
                req = limited(requests.get(name, {}), node.max).get(r, 0)
                rows.append((name, node.min.get(r, 0), req, node.shared_weight.get(r, 0), node.allow_lent))
            for name, amount in distribute(available.get(r, 0), rows).items():
                runtime[name][r] = amount
        for name in children:
            node = tree.nodes[name]
            out[name] = {r: v for r, v in runtime[name].items() if r in node.max}
            if node.children:
                level.append((node.children, runtime[name]))
    return out
