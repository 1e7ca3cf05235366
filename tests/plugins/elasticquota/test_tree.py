"""The quota tree: refusals name the quota and why, and touch nothing else (spec 2.6)."""

from __future__ import annotations

import msgspec
import pytest

from koordsched.api.elastic_quota import (
    ANNOTATION_NAMESPACES,
    ANNOTATION_SHARED_WEIGHT,
    DEFAULT_QUOTA_NAME,
    ElasticQuota,
    parse_elastic_quota,
)
from koordsched.plugins.elasticquota.tree import QuotaTree
from tests.plugins.elasticquota.helpers import quota


def build(*quotas: ElasticQuota) -> QuotaTree:
    return QuotaTree.build(
        [(f"{q.metadata.namespace}/{q.metadata.name}", q) for q in quotas], {"cpu": 100}, {"cpu": 100}
    )


def test_children_and_defaults() -> None:
    tree = build(
        quota("p", max={"cpu": "8", "memory": "16Gi"}, is_parent=True),
        quota("a", max={"cpu": "4", "memory": "8Gi"}, parent="p"),
        quota("b", max={"cpu": "4", "memory": "8Gi"}, parent="p", allow_lent=False),
    )
    assert tree.top == ["p"]
    assert tree.nodes["p"].children == ["a", "b"]
    assert tree.keys == ["cpu", "memory"]
    b = tree.nodes["b"]
    assert not b.allow_lent and b.shared_weight == {"cpu": 4000, "memory": 8 * 1024**3}
    assert all(not n.refusal for n in tree.nodes.values())


@pytest.mark.parametrize(
    ("quotas", "refused", "reason"),
    [
        pytest.param(
            [quota("a", max={"cpu": "1"}, parent="ghost")],
            "a",
            'ElasticQuota "a/a" is refused: its parent quota ghost does not exist',
            id="missing-parent",
        ),
        pytest.param(
            [quota("p", max={"cpu": "1"}), quota("a", max={"cpu": "1"}, parent="p")],
            "a",
            'ElasticQuota "a/a" is refused: its parent quota p is not labelled '
            "quota.scheduling.koordinator.sh/is-parent=true",
            id="parent-not-marked",
        ),
        pytest.param(
            [
                quota("x", max={"cpu": "1"}, parent="y", is_parent=True),
                quota("y", max={"cpu": "1"}, parent="x", is_parent=True),
            ],
            "x",
            'ElasticQuota "x/x" is refused: its parent labels form a cycle',
            id="cycle",
        ),
        pytest.param(
            [
                quota("p", max={"cpu": "1"}, min={"cpu": "2"}, is_parent=True),
                quota("a", max={"cpu": "1"}, parent="p"),
            ],
            "a",
            'ElasticQuota "a/a" is refused: its parent quota p is refused',
            id="refused-ancestor",
        ),
        # Issue 24, item 4: Koordinator's webhook keeps a child's max keys the parent's.
        pytest.param(
            [quota("p", max={"cpu": "2"}, is_parent=True), quota("a", parent="p")],
            "a",
            'ElasticQuota "a/a" is refused: spec.max names [], its parent quota p\'s spec.max names [cpu]: '
            "a child quota's max must name the same resources as its parent's "
            "(checkSubAndParentGroupQuotaKey)",
            id="spec-null-under-a-capped-parent",
        ),
        pytest.param(
            [
                quota("p", max={"cpu": "2"}, is_parent=True),
                quota("a", max={"cpu": "2", "memory": "1Gi"}, parent="p"),
            ],
            "a",
            'ElasticQuota "a/a" is refused: spec.max names [cpu memory], its parent quota p\'s spec.max '
            "names [cpu]: a child quota's max must name the same resources as its parent's "
            "(checkSubAndParentGroupQuotaKey)",
            id="max-key-the-parent-lacks",
        ),
        pytest.param(
            [
                quota("p", max={"cpu": "2", "memory": "2Gi"}, is_parent=True),
                quota("a", max={"cpu": "2", "memory": "1Gi"}, min={"memory": "1Gi"}, parent="p"),
            ],
            "a",
            'ElasticQuota "a/a" is refused: spec.min names memory, which its parent quota p\'s spec.min '
            "does not (checkSubAndParentGroupQuotaKey)",
            id="min-key-the-parent-lacks",
        ),
        # Issue 24, item 7: Koordinator's webhook keeps the children's mins within the parent's.
        pytest.param(
            [
                quota("p", max={"cpu": "4"}, min={"cpu": "2"}, is_parent=True),
                quota("a0", max={"cpu": "4"}, min={"cpu": "1"}, parent="p"),
                quota("a1", max={"cpu": "4"}, min={"cpu": "2"}, parent="p"),
            ],
            "a1",
            'ElasticQuota "a1/a1" is refused: spec.min with its siblings\' adds up to more than its '
            "parent quota p's spec.min in cpu "
            "(checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: p)",
            id="children-mins-above-parent-min",
        ),
        pytest.param(
            [quota("a", max={"cpu": "1"}, min={"cpu": "2"})],
            "a",
            'ElasticQuota "a/a" is invalid: spec.min[cpu]: Invalid value: "2": '
            "must be less than or equal to spec.max[cpu]",
            id="min-above-max",
        ),
        pytest.param(
            [quota("a", max={"cpu": "1"}, parent="a")],
            "a",
            'ElasticQuota "a/a" is invalid: metadata.labels[quota.scheduling.koordinator.sh/parent]: '
            'Invalid value: "a": a quota cannot be its own parent',
            id="own-parent",
        ),
    ],
)
def test_refused(quotas: list[ElasticQuota], refused: str, reason: str) -> None:
    tree = build(*quotas, quota("bystander", max={"cpu": "1"}))
    assert tree.nodes[refused].refusal == reason
    assert tree.nodes["bystander"].refusal == ""
    assert "bystander" in tree.top and refused not in tree.top


def test_same_name_in_two_namespaces_keeps_the_first() -> None:
    tree = build(quota("dup", "ns-b", max={"cpu": "1"}), quota("dup", "ns-a", max={"cpu": "2"}))
    assert tree.nodes["dup"].key == "ns-a/dup" and tree.nodes["dup"].max == {"cpu": 2000}
    [shadow] = tree.shadowed
    assert (
        shadow.refusal
        == 'ElasticQuota "ns-b/dup" is refused: quota name dup is already used by ElasticQuota "ns-a/dup"'
    )


def test_default_quota_object_overrides_the_args() -> None:
    tree = build(quota(DEFAULT_QUOTA_NAME, "koordinator-system", max={"cpu": "3"}))
    node = tree.nodes[DEFAULT_QUOTA_NAME]
    assert node.max == {"cpu": 3000} and node.key == f"koordinator-system/{DEFAULT_QUOTA_NAME}"
    assert DEFAULT_QUOTA_NAME not in tree.top


def test_a_long_chain_is_linked_without_recursion() -> None:
    chain = [
        quota(f"q{i}", max={"cpu": "1"}, parent=f"q{i - 1}" if i else "", is_parent=True) for i in range(3000)
    ]
    tree = build(*chain)
    assert tree.nodes["q2999"].refusal == "" and [n.name for n in tree.path_to_top("q3")] == [
        "q3",
        "q2",
        "q1",
        "q0",
    ]


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        (
            {ANNOTATION_SHARED_WEIGHT: "{cpu"},
            'metadata.annotations[quota.scheduling.koordinator.sh/shared-weight]: Invalid value: "{cpu": '
            "must be a JSON resource list",
        ),
        (
            {ANNOTATION_NAMESPACES: '"ns"'},
            "metadata.annotations[quota.scheduling.koordinator.sh/namespaces]: Invalid value: "
            '"\\"ns\\"": must be a JSON array of namespace names',
        ),
    ],
)
def test_unreadable_annotations(annotations: dict[str, str], message: str) -> None:
    eq = msgspec.convert(
        {"metadata": {"name": "q", "namespace": "n", "annotations": annotations}}, ElasticQuota
    )
    with pytest.raises(ValueError, match="is invalid") as err:
        parse_elastic_quota(eq)
    assert str(err.value).startswith('ElasticQuota "n/q" is invalid: ' + message)


def test_unreadable_quantity_and_label() -> None:
    eq = msgspec.convert(
        {
            "metadata": {
                "name": "q",
                "namespace": "n",
                "labels": {"quota.scheduling.koordinator.sh/is-parent": "yes"},
            },
            "spec": {"max": {"cpu": "lots"}, "min": {"cpu": "-1"}},
        },
        ElasticQuota,
    )
    with pytest.raises(ValueError, match="is invalid") as err:
        parse_elastic_quota(eq)
    text = str(err.value)
    assert text.startswith(
        'ElasticQuota "n/q" is invalid: [spec.min[cpu]: Invalid value: "-1": must be greater'
    )
    assert "spec.max: Invalid value:" in text and "lots" in text
    assert 'metadata.labels[quota.scheduling.koordinator.sh/is-parent]: Invalid value: "yes"' in text


def test_malformed_and_refused_are_told_apart() -> None:
    from koordsched.api.field_errors import Refused

    # The API server stores min > max (only Koordinator's webhook refuses it): Refused.
    with pytest.raises(Refused):
        parse_elastic_quota(quota("a", max={"cpu": "1"}, min={"cpu": "2"}))
    # An unreadable quantity never passes the CRD's schema: a malformed object.
    eq = msgspec.convert(
        {"metadata": {"name": "q", "namespace": "n"}, "spec": {"max": {"cpu": "x"}}}, ElasticQuota
    )
    with pytest.raises(ValueError, match="is invalid") as err:
        parse_elastic_quota(eq)
    assert not isinstance(err.value, Refused)


@pytest.mark.parametrize(
    ("labels", "what"),
    [
        (
            {"quota.scheduling.koordinator.sh/tree-id": "gpu"},
            "label quota.scheduling.koordinator.sh/tree-id=gpu",
        ),
        (
            {"quota.scheduling.koordinator.sh/is-root": "true"},
            "label quota.scheduling.koordinator.sh/is-root=true",
        ),
    ],
)
def test_a_quota_of_another_tree_is_refused_without_the_gate(labels: dict[str, str], what: str) -> None:
    tree = build(
        quota("gpu-root", max={"cpu": "8"}, is_parent=True, labels=labels, namespaces=["ml"]),
        quota("train", max={"cpu": "4"}, parent="gpu-root"),
        quota("other", max={"cpu": "4"}),
    )
    reason = (
        f'ElasticQuota "gpu-root/gpu-root" is refused: {what} asks for a quota tree of its own, which '
        "needs the MultiQuotaTree feature gate (off by default, as in Koordinator; koordsched does "
        "not support multiple quota trees)"
    )
    assert tree.nodes["gpu-root"].refusal == reason
    assert (
        tree.nodes["train"].refusal
        == 'ElasticQuota "train/train" is refused: its parent quota gpu-root is refused'
    )
    assert not tree.nodes["other"].refusal and tree.top == ["other"]
    # Pods of the namespaces it lists are charged to it (and refused), not to the default quota.
    assert tree.by_namespace == {"ml": "gpu-root"}


def test_an_empty_tree_id_is_the_default_tree() -> None:
    tree = build(quota("a", max={"cpu": "4"}, labels={"quota.scheduling.koordinator.sh/tree-id": ""}))
    assert not tree.nodes["a"].refusal
