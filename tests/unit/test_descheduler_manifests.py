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
    m.set_leader_status("koord-descheduler", True)
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


# --- monitoring: the port, the Service, the NetworkPolicy, the reader role, the ServiceMonitor -----

OPERATOR = ROOT / "deploy" / "prometheus-operator"


def _container() -> tuple[dict[str, Any], dict[str, Any]]:
    (dep,) = _docs("deployment.yaml")
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    return dep, container


def _port(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    return next(int(p["containerPort"]) for p in container["ports"] if p["name"] == port)


def test_deployment_serves_metrics_on_koord_deschedulers_port() -> None:
    from koordsched.cli import build_parser

    _, container = _container()
    args = build_parser().parse_args(container["args"])
    assert args.command.__name__ == "_cmd_deschedule" and args.kubeconfig == ""
    assert args.bind_address == "0.0.0.0"
    assert args.secure_port == _port(container, "metrics") == 10251
    # The self-signed pair passes through /tmp, and the root filesystem is read-only.
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert "/tmp" in {m["mountPath"] for m in container["volumeMounts"]}


@pytest.mark.parametrize(
    ("probe", "path"),
    [("startupProbe", "/livez"), ("livenessProbe", "/livez"), ("readinessProbe", "/readyz")],
)
async def test_probes_use_served_open_paths(probe: str, path: str) -> None:
    from aiohttp.test_utils import make_mocked_request

    from koordsched.backends.kube.server import build_app
    from koordsched.backends.kube.serving.authz import path_matcher
    from koordsched.backends.kube.serving.options import ServingOptions
    from koordsched.observability.descheduler_metrics import DeschedulerMetrics
    from koordsched.observability.health import HealthChecks

    _, container = _container()
    get = container[probe]["httpGet"]
    assert (get["path"], get["scheme"]) == (path, "HTTPS")
    assert _port(container, get["port"]) == 10251
    # deschedule_app builds its ServingOptions with the defaults beyond address and port.
    assert path_matcher(ServingOptions().authorization.always_allow_paths)(path)
    app = build_app(HealthChecks(), DeschedulerMetrics(), lambda: {})
    match = await app.router.resolve(make_mocked_request("GET", path))
    assert match.http_exception is None, f"{path} is not served"


def test_service_and_network_policy_reach_the_metrics_port() -> None:
    dep, container = _container()
    labels = dep["spec"]["template"]["metadata"]["labels"]
    port = _port(container, "metrics")
    (service,) = _docs("service.yaml")
    assert service["metadata"]["name"] == "koord-descheduler-metrics"
    assert service["spec"]["selector"].items() <= labels.items()
    (svc_port,) = service["spec"]["ports"]
    assert (svc_port["name"], svc_port["port"]) == ("metrics", 10251)
    assert _port(container, svc_port["targetPort"]) == port
    notes = service["metadata"]["annotations"]
    assert (notes["prometheus.io/port"], notes["prometheus.io/path"], notes["prometheus.io/scheme"]) == (
        str(port),
        "/metrics",
        "https",
    )
    (policy,) = _docs("networkpolicy.yaml")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": port}]
    # The same peers as the scheduler's policy: namespaces labelled for monitoring.
    (scheduler_policy,) = [
        d for d in yaml.safe_load_all((ROOT / "deploy" / "networkpolicy.yaml").read_text()) if d
    ]
    assert rule["from"] == scheduler_policy["spec"]["ingress"][0]["from"]
    # The scheduler's policy does not select the descheduler's pods (nor the reverse).
    assert not scheduler_policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()


def test_service_monitor_scrapes_the_descheduler_as_the_scheduler_s_does() -> None:
    (monitor,) = [
        d for d in yaml.safe_load_all((OPERATOR / "descheduler-servicemonitor.yaml").read_text()) if d
    ]
    (scheduler_monitor,) = [
        d for d in yaml.safe_load_all((OPERATOR / "servicemonitor.yaml").read_text()) if d
    ]
    (service,) = _docs("service.yaml")
    assert monitor["kind"] == "ServiceMonitor"
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [service["metadata"]["namespace"]]}
    (endpoint,) = monitor["spec"]["endpoints"]
    (theirs,) = scheduler_monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    for key in ("path", "scheme", "bearerTokenFile", "tlsConfig", "interval"):
        assert endpoint[key] == theirs[key], key
    assert not endpoint.get("honorLabels", False), "the dashboard expects the Operator's relabelling"
    # Neither monitor selects the other's Service.
    (scheduler_service,) = [
        d for d in yaml.safe_load_all((ROOT / "deploy" / "service.yaml").read_text()) if d
    ]
    assert (
        not monitor["spec"]["selector"]["matchLabels"].items()
        <= scheduler_service["metadata"]["labels"].items()
    )
    assert (
        not scheduler_monitor["spec"]["selector"]["matchLabels"].items()
        <= service["metadata"]["labels"].items()
    )


def test_metrics_reader_role_and_binding() -> None:
    (role,) = _docs("metrics-reader.yaml")
    assert role["kind"] == "ClusterRole"
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    (binding,) = [
        d for d in yaml.safe_load_all((OPERATOR / "descheduler-metrics-reader-binding.yaml").read_text()) if d
    ]
    assert binding["kind"] == "ClusterRoleBinding"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}
    ]


def test_prometheus_operator_kustomization_lists_every_manifest() -> None:
    (kust,) = [d for d in yaml.safe_load_all((OPERATOR / "kustomization.yaml").read_text()) if d]
    files = sorted(p.name for p in OPERATOR.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(kust["resources"]) == files
