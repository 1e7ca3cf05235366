"""deploy/descheduler/: the PodMigrationJob CRD, the kustomization, the config copy and RBAC."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from koordsched.descheduler.config.load import load_descheduler_config
from koordsched.descheduler.migration import job as pmj
from koordsched.descheduler.registry import in_tree_catalog

ROOT = Path(__file__).resolve().parents[2]
DIR = ROOT / "deploy" / "descheduler"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DIR / name).read_text()) if d]


def test_kustomization_lists_every_manifest() -> None:
    (kust,) = _docs("kustomization.yaml")
    files = sorted(p.name for p in DIR.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(kust["resources"]) == files


def test_pmj_crd_names_and_status_subresource() -> None:
    (crd,) = _docs("scheduling.koordinator.sh_podmigrationjobs.yaml")
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"{pmj.PLURAL}.{pmj.GROUP}"
    assert (spec["group"], spec["scope"], spec["names"]["kind"], spec["names"]["shortNames"]) == (
        pmj.GROUP,
        "Cluster",
        pmj.KIND,
        ["pmj"],
    )
    (version,) = spec["versions"]
    assert version["name"] == pmj.VERSION and version["subresources"] == {"status": {}}
    props = version["schema"]["openAPIV3Schema"]["properties"]
    assert props["spec"]["properties"]["mode"]["enum"] == ["ReservationFirst", "EvictDirectly"]
    # Every field koordsched writes survives pruning.
    job = pmj.PodMigrationJob(
        spec=pmj.PodMigrationJobSpec(
            ttl="5m", mode="EvictDirectly", pod_ref=pmj.PodRef(kind="Pod", name="p")
        ),
        status=pmj.PodMigrationJobStatus(
            phase="Running",
            conditions=[pmj.PodMigrationJobCondition(type="Eviction", status="False", reason="Evicting")],
        ),
    )
    wire = msgspec.to_builtins(job)
    for part in ("spec", "status"):
        assert set(wire[part]) <= set(props[part]["properties"]), part
    cond = props["status"]["properties"]["conditions"]["items"]["properties"]
    assert set(wire["status"]["conditions"][0]) <= set(cond)


def test_configmap_holds_the_bundled_config() -> None:
    (cm,) = _docs("configmap.yaml")
    text = cm["data"]["koord-descheduler.yaml"]
    bundled = (ROOT / "config" / "koord-descheduler.yaml").read_text()
    assert yaml.safe_load(text) == yaml.safe_load(bundled)
    path = ROOT / "config" / "koord-descheduler.yaml"
    assert load_descheduler_config(path, in_tree_catalog()).profiles[0].plugins["balance"] == ["LowNodeLoad"]


def test_rbac_is_least_privilege() -> None:
    docs = {
        d["kind"]: d
        for d in _docs("rbac.yaml")
        if not d["metadata"]["name"].endswith(("-auth-delegator", "-reader"))
    }
    rules = docs["ClusterRole"]["rules"]
    granted = {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert ("", "pods/eviction", "create") in granted
    assert ("scheduling.koordinator.sh", "podmigrationjobs/status", "patch") in granted
    for forbidden in (
        ("", "pods", "delete"),
        ("", "pods", "patch"),
        ("", "pods", "get"),
        ("", "secrets", "get"),
    ):
        assert forbidden not in granted, forbidden
    assert all("*" not in rule["verbs"] and "*" not in rule["resources"] for rule in rules)
    role = docs["Role"]
    assert role["metadata"]["namespace"] == "koordinator-system"
    assert {"resourceNames": ["koord-descheduler"]}.items() <= role["rules"][1].items()
    (sa,) = _docs("serviceaccount.yaml")
    for binding in ("ClusterRoleBinding", "RoleBinding"):
        (subject,) = docs[binding]["subjects"]
        assert (subject["name"], subject["namespace"]) == (
            sa["metadata"]["name"],
            sa["metadata"]["namespace"],
        )
    delegation = {
        d["roleRef"]["name"]
        for d in _docs("rbac.yaml")
        if d["metadata"]["name"].endswith(("-auth-delegator", "-reader"))
    }
    assert delegation == {"system:auth-delegator", "extension-apiserver-authentication-reader"}
    (dep,) = _docs("deployment.yaml")
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == sa["metadata"]["name"]


def _exported_series() -> dict[str, set[str]]:
    """Series name -> label names, from an exposition of DeschedulerMetrics with every series set."""
    from prometheus_client.parser import text_string_to_metric_families

    from koordsched.observability.descheduler_metrics import DeschedulerMetrics

    m = DeschedulerMetrics(process_metrics=True)
    m.evicted(True, "LowNodeLoad", "team-a", "node-1")
    m.jobs({"Running": 1})
    m.leading(True)
    m.observe_rest_request("GET", "200", "10.0.0.1:443", 0.01)
    series: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(m.exposition().decode()):
        for sample in family.samples:
            # The Python parser appends _total to a counter's samples; Prometheus keeps the name.
            name = family.name if family.name == "descheduler_pods_evicted" else sample.name
            series.setdefault(name, set()).update(sample.labels)
    return series


#: Labels every scrape adds (``job``, ``instance``), and what the dashboard makes of the pod's
#: namespace and node, which a ServiceMonitor's target labels push to ``exported_*``.
SCRAPE_LABELS = {"job", "instance"}
RELABELLED = {"pod_namespace": "namespace", "pod_node": "node"}


def test_dashboard_queries_only_the_descheduler_s_series() -> None:
    import json
    import re

    from tests.unit.test_deploy_manifests import grouping_labels, metric_names, selector_labels

    exported = _exported_series()
    dash = json.loads((DIR / "koord-descheduler-dashboard.json").read_text())
    assert dash["uid"] and dash["panels"]
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
    used: set[str] = set()
    for panel in dash["panels"]:
        for target in panel["targets"]:
            expr, title = target["expr"], panel["title"]
            names = metric_names(expr)
            assert names and names <= exported.keys(), (title, names - exported.keys())
            used |= names
            labels = SCRAPE_LABELS.union(*(exported[n] for n in names))
            for name, matched in selector_labels(expr).items():
                assert matched <= labels, (title, name, matched - labels)
            made = {new for new, src in RELABELLED.items() if f'"{new}", "$1", "{src}"' in expr}
            assert grouping_labels(expr) <= labels | made, title
            legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
            assert legend <= grouping_labels(expr), (title, legend)
    assert {
        "descheduler_pods_evicted",
        "descheduler_pod_migration_jobs",
        "leader_election_master_status",
    } <= used
    assert not {n for n in used if n.startswith("scheduler_")}


@pytest.mark.parametrize(("made", "source"), sorted(RELABELLED.items()))
def test_namespace_and_node_panels_survive_the_operator_s_relabelling(made: str, source: str) -> None:
    """A target label ``namespace`` (always, with a ServiceMonitor) or ``node`` moves the pod's to
    ``exported_*`` (honor_labels: false): a panel of the pod's namespace or node groups by a label
    taken from ``exported_<label>`` when set, else from ``<label>``, never by the bare label."""
    import json

    from tests.unit.test_deploy_manifests import grouping_labels

    dash = json.loads((DIR / "koord-descheduler-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"] if made in grouping_labels(t["expr"])]
    assert exprs, f"no panel groups by {made}"
    for expr in exprs:
        assert "label_replace(label_replace(" in expr
        assert f'"{made}", "$1", "{source}", "(.*)"' in expr
        assert f'"{made}", "$1", "exported_{source}", "(.+)"' in expr
    for p in dash["panels"]:
        for t in p["targets"]:
            assert source not in grouping_labels(t["expr"]), p["title"]


def test_rbac_lets_every_reflector_of_the_descheduler_list_and_watch() -> None:
    """The descheduler watches what the in-tree scheduler's plugins read (its node-fit checks run
    them): a kind added there without a rule here fails here (PodGroups once did), not in a cluster."""
    from koordsched.backends.kube import handlers, kinds

    role = next(d for d in _docs("rbac.yaml") if d["kind"] == "ClusterRole")
    granted = {
        (g, r, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    for kind in (kinds.PODS, kinds.NODES, kinds.PRIORITY_CLASSES, *handlers.PLUGIN_KINDS):
        parts = kind.path.strip("/").split("/")
        group, resource = ("", parts[2]) if parts[0] == "api" else (parts[1], parts[3])
        assert {(group, resource, "list"), (group, resource, "watch")} <= granted, kind.kind
    assert {(pmj.GROUP, pmj.PLURAL, "list"), (pmj.GROUP, pmj.PLURAL, "watch")} <= granted
