"""deploy/ must agree with the code it deploys: CLI flags, profile, served paths, API calls, metrics.

Nothing here talks to a cluster. The manifests are parsed as YAML and checked against the
scheduler's own parser, config loader, HTTP router and metrics registry, so renaming a flag, a
health path or a metric breaks this test instead of a rollout or a dashboard.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import tomllib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import make_mocked_request
from prometheus_client.parser import text_string_to_metric_families

from koordsched.api.core import Pod
from koordsched.api.priority import priority_class_raw
from koordsched.backends.kube import handlers, kinds
from koordsched.backends.kube.flags import serving_options
from koordsched.backends.kube.server import build_app
from koordsched.backends.kube.serving.authz import path_matcher
from koordsched.backends.kube.serving.options import ServingOptions
from koordsched.cli import build_parser
from koordsched.config.load import load_config
from koordsched.framework.types import BindingPlan
from koordsched.observability.health import HealthChecks
from koordsched.observability.metrics import SchedulerMetrics
from koordsched.plugins.registry import in_tree_registry

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
PROFILE = REPO / "config" / "koord-scheduler.yaml"
DASHBOARD = DEPLOY / "grafana" / "koordsched-dashboard.json"
DOCKERFILE = REPO / "Dockerfile"

NAMESPACE = "koordinator-system"
SERVICE_ACCOUNT = "koordsched"
IMAGE = "koordsched:0.1.0"
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PriorityClass",
}

#: Every API request koordsched/backends/kube/ makes, as (apiGroup, resource, verb); the
#: ClusterRole must grant exactly these. Changing the set is a deliberate, reviewed act.
#: tests/kube/test_rbac_usage.py checks it against the requests a run actually makes: the
#: informers only list and watch (no get), and no pod is patched (no binding-plan labels).
CLUSTER_PERMISSIONS = {
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("", "pods/binding", "create"),
    ("", "pods/status", "patch"),
    ("", "nodes", "list"),
    ("", "nodes", "watch"),
    ("scheduling.k8s.io", "priorityclasses", "list"),
    ("scheduling.k8s.io", "priorityclasses", "watch"),
    ("events.k8s.io", "events", "create"),
    ("events.k8s.io", "events", "patch"),
    ("", "services", "list"),
    ("", "services", "watch"),
    ("", "replicationcontrollers", "list"),
    ("", "replicationcontrollers", "watch"),
    ("apps", "replicasets", "list"),
    ("apps", "replicasets", "watch"),
    ("apps", "statefulsets", "list"),
    ("apps", "statefulsets", "watch"),
    ("", "namespaces", "list"),
    ("", "namespaces", "watch"),
    # DeviceShare's vNPU templates' ConfigMap, in the namespace the args name.
    ("", "configmaps", "list"),
    ("", "configmaps", "watch"),
    ("scheduling.koordinator.sh", "devices", "list"),
    ("scheduling.koordinator.sh", "devices", "watch"),
    ("topology.node.k8s.io", "noderesourcetopologies", "list"),
    ("topology.node.k8s.io", "noderesourcetopologies", "watch"),
    ("slo.koordinator.sh", "nodemetrics", "list"),
    ("slo.koordinator.sh", "nodemetrics", "watch"),
    ("scheduling.sigs.k8s.io", "elasticquotas", "list"),
    ("scheduling.sigs.k8s.io", "elasticquotas", "watch"),
    ("scheduling.sigs.k8s.io", "elasticquotas", "patch"),
    ("scheduling.sigs.k8s.io", "elasticquotas/status", "patch"),
    ("", "pods", "delete"),
    ("policy", "poddisruptionbudgets", "list"),
    ("policy", "poddisruptionbudgets", "watch"),
    ("scheduling.koordinator.sh", "reservations", "list"),
    ("scheduling.koordinator.sh", "reservations", "watch"),
    ("scheduling.koordinator.sh", "reservations", "patch"),
    ("scheduling.koordinator.sh", "reservations/status", "patch"),
    # DevicePluginAdaption: the node lock (Node and locking pod read, Node patched) and the
    # HAMi-core pod label (a pod patch before its Binding).
    *(("", r, v) for r in ("nodes", "pods") for v in ("get", "patch")),
    # the volume plugins: PV/PVC watched and patched (VolumeBinding's PreBind), storage kinds read
    *(
        ("", r, v)
        for r in ("persistentvolumes", "persistentvolumeclaims")
        for v in ("list", "watch", "patch")
    ),
    *(
        ("storage.k8s.io", r, v)
        for r in ("storageclasses", "csinodes", "csidrivers", "csistoragecapacities")
        for v in ("list", "watch")
    ),
    ("scheduling.sigs.k8s.io", "podgroups", "list"),
    ("scheduling.sigs.k8s.io", "podgroups", "watch"),
    ("scheduling.sigs.k8s.io", "podgroups/status", "patch"),
    # --enable-network-topology-manager: the layers, and the status the tree manager writes.
    ("scheduling.koordinator.sh", "clusternetworktopologies", "list"),
    ("scheduling.koordinator.sh", "clusternetworktopologies", "watch"),
    ("scheduling.koordinator.sh", "clusternetworktopologies/status", "patch"),
    # ElasticQuota's overuse revoke controller (monitorAllQuotas): the Eviction API
    ("", "pods/eviction", "create"),
}
#: The one object outside the namespace: the ConfigMap reader must be bound where the map is.
KUBE_SYSTEM_OBJECTS = {
    ("RoleBinding", "koordsched-authentication-reader"),
    # deploy/descheduler/rbac.yaml: the descheduler's serving port reads the same ConfigMap.
    ("RoleBinding", "koord-descheduler-authentication-reader"),
}

#: Labels Prometheus attaches to every scraped series; dashboards may select and group by them.
TARGET_LABELS = {"job", "instance"}
#: Series outside SchedulerMetrics that the dashboard may chart: the process collector and the
#: API client metrics (also declared in SchedulerMetrics, but recorded only by a live client).
EXTERNAL_PREFIXES = ("process_", "rest_client_")


# --- loading -------------------------------------------------------------------------------------


def manifest_files() -> list[Path]:
    """Every Kubernetes manifest under deploy/ (kustomization files are kustomize's, not objects)."""
    files = sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yaml", ".yml"))
    return [p for p in files if p.name != "kustomization.yaml"]


@functools.cache
def _parsed(path: Path) -> tuple[dict[str, Any], ...]:
    with path.open() as f:
        return tuple(d for d in yaml.safe_load_all(f) if d is not None)


def documents(path: Path) -> list[dict[str, Any]]:
    """The objects in a YAML file (parsed once per test session; do not mutate them)."""
    return list(_parsed(path))


def all_objects() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in manifest_files():
        for doc in documents(path):
            yield path, doc


def find(kind: str, name: str) -> dict[str, Any]:
    found = [d for _, d in all_objects() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name!r} in deploy/, found {len(found)}"
    return found[0]


@pytest.fixture(scope="module")
def deployment() -> dict[str, Any]:
    return find("Deployment", "koordsched")


@pytest.fixture(scope="module")
def container(deployment: dict[str, Any]) -> dict[str, Any]:
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    assert isinstance(only, dict)
    return only


def container_port(container: dict[str, Any], port: int | str) -> int:
    """A probe's or Service's port, resolved by name against the container's ports."""
    if isinstance(port, int):
        return port
    return next(int(p["containerPort"]) for p in container["ports"] if p["name"] == port)


# --- every manifest ------------------------------------------------------------------------------


def test_there_are_manifests() -> None:
    names = {p.name for p in manifest_files()}
    assert {"namespace.yaml", "rbac.yaml", "configmap.yaml", "deployment.yaml", "service.yaml"} <= names


@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_object_is_complete_and_in_the_namespace(path: Path) -> None:
    docs = documents(path)
    assert docs, f"{path} holds no object"
    for doc in docs:
        assert doc.get("apiVersion") and doc.get("kind"), doc
        meta = doc.get("metadata") or {}
        assert meta.get("name"), f"{path}: a {doc['kind']} without metadata.name"
        if doc["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in meta, f"{path}: {doc['kind']} is cluster-scoped"
        elif (doc["kind"], meta["name"]) in KUBE_SYSTEM_OBJECTS:
            assert meta.get("namespace") == "kube-system", f"{path}: {doc['kind']} {meta['name']}"
        else:
            assert meta.get("namespace") == NAMESPACE, f"{path}: {doc['kind']} {meta['name']}"


def test_kustomization_lists_every_manifest() -> None:
    kustomization = documents(DEPLOY / "kustomization.yaml")[0]
    listed = kustomization["resources"]
    assert len(listed) == len(set(listed)), "a resource listed twice"
    for entry in listed:
        assert (DEPLOY / entry).exists(), f"kustomization lists {entry}, which does not exist"
    # Top-level manifests are all applied; subfolders hold extras, applied on their own (the
    # ServiceMonitor with -f) or listed as a folder.
    top_level = {p.name for p in manifest_files() if p.parent == DEPLOY}
    assert {e for e in listed if (DEPLOY / e).is_file() and "/" not in e} == top_level


# --- Deployment: CLI, config, probes -------------------------------------------------------------


def test_deployment_args_parse_with_the_cli(deployment: dict[str, Any], container: dict[str, Any]) -> None:
    args = build_parser().parse_args(container["args"])
    assert args.subcommand == "run"
    assert args.bind_address == "0.0.0.0"
    assert args.secure_port == container_port(container, "metrics") == 10259
    assert args.insecure_port == 0, "no plain-HTTP port"
    assert args.kubeconfig is None, "in-cluster config: the ServiceAccount's token"
    options = serving_options(args)
    # Delegation uses the scheduler's own (in-cluster) connection, and looks the client CA up.
    assert not options.authentication.kubeconfig and not options.authorization.kubeconfig
    assert not options.authentication.skip_lookup
    assert not options.tls_cert_file and not options.cert_dir, "a self-signed pair, in memory"

    # --config names a key of the ConfigMap, where the ConfigMap is mounted.
    config = Path(args.config)
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == str(config.parent)]
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    configmap = find("ConfigMap", volumes[mount["name"]]["configMap"]["name"])
    assert config.name in configmap["data"]


def test_configmap_profile_is_the_default_profile() -> None:
    registry = in_tree_registry()
    (text,) = find("ConfigMap", "koordsched-config")["data"].values()
    mounted = load_config(text.encode(), registry)
    default = load_config(PROFILE, registry)
    assert replace(mounted, source="") == replace(default, source="")
    assert mounted.leader_election.leader_elect
    assert [p.scheduler_name for p in mounted.profiles] == ["koord-scheduler"]


@pytest.mark.parametrize(
    ("probe", "path"),
    [("startupProbe", "/livez"), ("livenessProbe", "/livez"), ("readinessProbe", "/readyz")],
)
async def test_probes_use_served_paths_and_port(container: dict[str, Any], probe: str, path: str) -> None:
    get = container[probe]["httpGet"]
    assert get["path"] == path
    assert get["scheme"] == "HTTPS", "the secure port speaks TLS only"
    args = build_parser().parse_args(container["args"])
    assert container_port(container, get["port"]) == args.secure_port
    # The kubelet sends no credentials: the probed path must need no authorization.
    always_allowed = path_matcher(serving_options(args).authorization.always_allow_paths)
    assert always_allowed(get["path"]), f"{get['path']} would need a token"

    app = build_app(HealthChecks(), SchedulerMetrics(), lambda: {})
    match = await app.router.resolve(make_mocked_request("GET", get["path"]))
    assert match.http_exception is None, f"{get['path']} is not served"


def test_deployment_runs_two_hardened_replicas(deployment: dict[str, Any], container: dict[str, Any]) -> None:
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT
    assert pod.get("schedulerName", "default-scheduler") == "default-scheduler"
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["affinity"]["podAntiAffinity"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    for c in (*pod["initContainers"], container):
        assert c["image"] == IMAGE
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
    limits = container["resources"]["limits"]
    assert limits["memory"] == "1Gi"


def test_numba_cache_is_seeded_into_a_writable_volume(
    deployment: dict[str, Any], container: dict[str, Any]
) -> None:
    """numba raises at import when its cache dir is not writable, and the root fs is read-only."""
    pod = deployment["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in container["env"]}
    cache_dir = env["NUMBA_CACHE_DIR"]
    emptydirs = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts[cache_dir] in emptydirs
    (seed,) = pod["initContainers"]
    assert seed["command"][-1].rstrip("/") == cache_dir
    assert {m["mountPath"]: m["name"] for m in seed["volumeMounts"]}[cache_dir] == mounts[cache_dir]
    # The init container copies what the image baked under its NUMBA_CACHE_DIR.
    baked = re.search(r"^ENV NUMBA_CACHE_DIR=(\S+)", DOCKERFILE.read_text(), re.MULTILINE)
    assert baked is not None
    assert seed["command"][-2].rstrip("/.") == baked.group(1)


# --- RBAC ----------------------------------------------------------------------------------------


def granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_cluster_role_grants_exactly_what_the_backend_uses() -> None:
    role = find("ClusterRole", "koordsched")
    assert granted(role["rules"]) == CLUSTER_PERMISSIONS
    assert not any("resourceNames" in r for r in role["rules"])
    assert not any("*" in r["verbs"] or "*" in r["resources"] for r in role["rules"])


def group_and_resource(path: str) -> tuple[str, str]:
    """``/api/v1/pods`` -> ("", "pods"); ``/apis/<group>/<version>/<resource>`` -> (group, resource)."""
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        return "", parts[2]
    return parts[1], parts[3]


def test_cluster_role_lets_every_reflector_list_and_watch() -> None:
    """A kind added to the watched set without an RBAC rule fails here, not in a cluster."""
    watched = [kinds.PODS, kinds.NODES, kinds.PRIORITY_CLASSES, *handlers.PLUGIN_KINDS]
    rules = granted(find("ClusterRole", "koordsched")["rules"])
    for kind in watched:
        group, resource = group_and_resource(kind.path)
        assert {(group, resource, "list"), (group, resource, "watch")} <= rules, kind.kind


def test_lease_role_is_limited_to_the_configured_lease() -> None:
    election = load_config(PROFILE, in_tree_registry()).leader_election
    role = find("Role", "koordsched")
    assert role["metadata"]["namespace"] == election.resource_namespace
    lease = ("coordination.k8s.io", "leases")
    # create cannot be limited by name; get and update are, to the lease the config names.
    (create,) = [r for r in role["rules"] if "create" in r["verbs"]]
    assert create["verbs"] == ["create"] and "resourceNames" not in create
    (named,) = [r for r in role["rules"] if "resourceNames" in r]
    assert named["resourceNames"] == [election.resource_name]
    assert sorted(named["verbs"]) == ["get", "update"]
    assert {(g, r) for g, r, _ in granted(role["rules"])} == {lease}


@pytest.mark.parametrize(
    ("kind", "name", "role_kind", "role"),
    [
        ("ClusterRoleBinding", "koordsched", "ClusterRole", "koordsched"),
        ("RoleBinding", "koordsched", "Role", "koordsched"),
        # TokenReview and SubjectAccessReview create, for the serving port's delegated authn/authz.
        ("ClusterRoleBinding", "koordsched-auth-delegator", "ClusterRole", "system:auth-delegator"),
        # get of kube-system/extension-apiserver-authentication, for the client CA.
        (
            "RoleBinding",
            "koordsched-authentication-reader",
            "Role",
            "extension-apiserver-authentication-reader",
        ),
    ],
)
def test_bindings_name_the_service_account(kind: str, name: str, role_kind: str, role: str) -> None:
    binding = find(kind, name)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role}
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
    ]
    find("ServiceAccount", SERVICE_ACCOUNT)


def test_rbac_binds_nothing_else() -> None:
    kinds = [(d["kind"], d["metadata"]["name"]) for d in documents(DEPLOY / "rbac.yaml")]
    assert sorted(kinds) == [
        ("ClusterRole", "koordsched"),
        ("ClusterRoleBinding", "koordsched"),
        ("ClusterRoleBinding", "koordsched-auth-delegator"),
        ("Role", "koordsched"),
        ("RoleBinding", "koordsched"),
        ("RoleBinding", "koordsched-authentication-reader"),
    ]


def test_a_binding_plan_carries_annotations_and_labels() -> None:
    """Why the ClusterRole has pods patch: a binding carries annotations only, so the plan's labels
    (DevicePluginAdaption's hami.io/vgpu-node) are a pod patch first (``pods patch`` in
    deploy/rbac.yaml and CLUSTER_PERMISSIONS)."""
    assert [f.name for f in dataclasses.fields(BindingPlan)] == ["annotations", "labels"]


def test_metrics_reader_grants_get_metrics_only() -> None:
    role = find("ClusterRole", "koordsched-metrics-reader")
    assert role["rules"] == [{"nonResourceURLs": ["/metrics", "/metrics/resources"], "verbs": ["get"]}]
    binding = find("ClusterRoleBinding", "koordsched-metrics-reader")
    assert binding["roleRef"]["name"] == "koordsched-metrics-reader"
    # /metrics and /configz are never open without a token.
    always_allowed = path_matcher(ServingOptions().authorization.always_allow_paths)
    assert not always_allowed("/metrics") and not always_allowed("/configz")


# --- Koordinator's priority classes ------------------------------------------------------------


def test_priority_classes_are_koordinators_bands() -> None:
    """Each class's value lies in its own band, so a pod using it resolves to that class (spec 1.1)."""
    classes = [d for d in documents(DEPLOY / "priorityclasses.yaml") if d["kind"] == "PriorityClass"]
    assert {c["metadata"]["name"]: c["value"] for c in classes} == {
        "koord-prod": 9000,
        "koord-mid": 7000,
        "koord-batch": 5000,
        "koord-free": 3000,
    }
    for c in classes:
        assert c["apiVersion"] == "scheduling.k8s.io/v1"
        assert c["globalDefault"] is False and c["description"]
        pod = Pod()
        pod.spec.priority = c["value"]
        assert priority_class_raw(pod) == c["metadata"]["name"]


# --- Service, NetworkPolicy, Dockerfile ----------------------------------------------------------


def test_service_and_network_policy_reach_the_metrics_port(
    deployment: dict[str, Any], container: dict[str, Any]
) -> None:
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    port = container_port(container, "metrics")
    service = find("Service", "koordsched-metrics")
    assert service["spec"]["selector"].items() <= labels.items()
    (svc_port,) = service["spec"]["ports"]
    assert container_port(container, svc_port["targetPort"]) == port
    assert service["metadata"]["annotations"]["prometheus.io/port"] == str(port)
    assert service["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"
    assert service["metadata"]["annotations"]["prometheus.io/scheme"] == "https"

    policy = find("NetworkPolicy", "koordsched")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": port}]
    assert all("namespaceSelector" in peer for peer in rule["from"])


def test_service_monitor_scrapes_https_with_a_token() -> None:
    monitor = documents(DEPLOY / "prometheus-operator" / "servicemonitor.yaml")[0]
    service = find("Service", "koordsched-metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}


def exec_form(instruction: str) -> list[str]:
    """The JSON (exec) form of a Dockerfile instruction such as ENTRYPOINT."""
    found = re.findall(rf"^{instruction} (\[.*\])$", DOCKERFILE.read_text(), re.MULTILINE)
    assert len(found) == 1, f"expected one exec-form {instruction} in the Dockerfile"
    value: list[str] = json.loads(found[0])
    return value


def test_dockerfile_entrypoint_is_the_console_script() -> None:
    entrypoint, cmd = exec_form("ENTRYPOINT"), exec_form("CMD")
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert entrypoint == ["koordsched"] and "koordsched" in scripts
    assert build_parser().parse_args(cmd).subcommand == "run"


# --- the Grafana dashboard -----------------------------------------------------------------------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_SELECTOR = re.compile(r"([a-zA-Z_:][\w:]*)?\s*\{([^{}]*)\}")
_MATCHER_LABEL = re.compile(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
_GRAFANA_VARIABLE = re.compile(r"\$\{?\w+\}?")
# A whole identifier (not the tail of a number such as 1e3 or 5m) that is not a function call.
_IDENTIFIER = re.compile(r"(?<![\w.:])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()")
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool"}
_KEYWORDS |= {"offset", "inf", "nan"}
_LABEL_VALUES = re.compile(r"^label_values\(\s*(?:(?P<expr>.+),\s*)?(?P<label>\w+)\s*\)$")


def _mask_strings(expr: str) -> str:
    return _STRING.sub('""', expr)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (functions, keywords, labels, durations dropped)."""
    s = _GRAFANA_VARIABLE.sub("", _mask_strings(expr))
    s = _GROUPING.sub(" ", s)
    s = _SELECTOR.sub(lambda m: f" {m.group(1) or ''} ", s)
    s = _RANGE.sub(" ", s)
    names = {m.group(1) for m in _IDENTIFIER.finditer(s)}
    return {n for n in names if n.lower() not in _KEYWORDS}


def selector_labels(expr: str) -> dict[str, set[str]]:
    """metric name -> the label names its selectors match on."""
    out: dict[str, set[str]] = {}
    for m in _SELECTOR.finditer(_mask_strings(expr)):
        out.setdefault(m.group(1) or "", set()).update(_MATCHER_LABEL.findall(m.group(2)))
    return out


def grouping_labels(expr: str) -> set[str]:
    return {
        label.strip()
        for m in _GROUPING.finditer(_mask_strings(expr))
        for label in m.group(2).split(",")
        if label.strip()
    }


def test_metric_name_extractor() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (le, verb) "
        '(rate(rest_client_request_duration_seconds_bucket{job=~"$job", verb!="WATCH"}[$__rate_interval])))'
    )
    assert metric_names(expr) == {"rest_client_request_duration_seconds_bucket"}
    assert grouping_labels(expr) == {"le", "verb"}
    assert selector_labels(expr) == {"rest_client_request_duration_seconds_bucket": {"job", "verb"}}
    mixed = 'sum(rate(a_total[5m] offset 1h)) / on (x) group_left count(b{c="d{e}"}) > bool 1e3 or vector(0)'
    assert metric_names(mixed) == {"a_total", "b"}
    assert metric_names('{__name__="x"} + up') == {"up"}


def exercised_metrics() -> SchedulerMetrics:
    """A registry where every series has a sample, so a scrape shows its labels."""
    m = SchedulerMetrics()
    profile = "koord-scheduler"
    m.observe_attempt("scheduled", profile, 0.01)
    m.observe_algorithm(0.001)
    m.observe_pod_scheduled(1, 0.02)
    m.observe_extension_point("Filter", "Success", profile, 0.001)
    m.observe_plugin("NodeResourcesFit", "Filter", "Success", 0.0001)
    m.observe_plugin_evaluations("NodeResourcesFit", "Filter", profile, 1)
    m.track_pending(lambda: {"active": 1})
    m.incoming("active", "PodAdd")
    m.observe_permit_wait("Success", 0.001)
    m.track_cache_sizes(lambda: {"nodes": 1})
    m.track_unschedulable_plugins(lambda: {("NodeResourcesFit", profile): 1})
    m.observe_preemption_attempt()
    m.observe_preemption_victims(1)
    m.track_goroutines("binding", lambda: 1)
    m.evaluated_nodes(1)
    m.feasible_nodes(1)
    m.observe_scheduling_timeout(profile)
    m.observe_event_handling("PodAdd", 0.0001)
    m.observe_queueing_hint("NodeResourcesFit", "NodeAdd", "Queue", 0.0001)
    m.set_leader_status("kube-scheduler", True)
    m.observe_rest_request("GET", "200", "10.0.0.1:443", 0.01)
    return m


@pytest.fixture(scope="module")
def exported() -> dict[str, set[str]]:
    """Series name -> label names, from a scrape of SchedulerMetrics (``le`` included for buckets)."""
    series: dict[str, set[str]] = {}
    text = exercised_metrics().exposition().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            series.setdefault(sample.name, set()).update(sample.labels)
    return series


def dashboard() -> dict[str, Any]:
    with DASHBOARD.open() as f:
        data: dict[str, Any] = json.load(f)
    return data


def dashboard_queries() -> list[tuple[str, str, str]]:
    """(panel title, PromQL, legend) for every panel target."""
    return [
        (panel["title"], target["expr"], target.get("legendFormat", ""))
        for panel in dashboard()["panels"]
        for target in panel.get("targets", [])
    ]


def test_dashboard_is_importable() -> None:
    data = dashboard()
    assert data["uid"] and data["title"]
    assert 36 <= data["schemaVersion"] <= 41
    variables = {v["name"]: v for v in data["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert {"profile", "instance"} <= variables.keys()
    ids = [p["id"] for p in data["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in data["panels"]:
        assert "gridPos" in panel, panel["title"]
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            assert panel["targets"], panel["title"]


def test_dashboard_covers_the_asked_for_metrics() -> None:
    used = set().union(*(metric_names(expr) for _, expr, _ in dashboard_queries()))
    assert {
        "scheduler_schedule_attempts_total",
        "scheduler_scheduling_attempt_duration_seconds_bucket",
        "scheduler_framework_extension_point_duration_seconds_bucket",
        "scheduler_plugin_execution_duration_seconds_bucket",
        "scheduler_pending_pods",
        "scheduler_queue_incoming_pods_total",
        "scheduler_pod_scheduling_sli_duration_seconds_bucket",
        "scheduler_scheduler_cache_size",
        "rest_client_requests_total",
        "rest_client_request_duration_seconds_bucket",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
    } <= used


@pytest.mark.parametrize(
    ("title", "expr", "legend"),
    [pytest.param(*q, id=f"{i}:{q[0]}") for i, q in enumerate(dashboard_queries())],
)
def test_dashboard_queries_only_exported_series(
    exported: dict[str, set[str]], title: str, expr: str, legend: str
) -> None:
    names = metric_names(expr)
    assert names, f"{title}: no metric found in {expr}"
    labels = set(TARGET_LABELS)
    for name in names:
        if name.startswith(EXTERNAL_PREFIXES) and name not in exported:
            continue
        assert name in exported, f"{title}: {name} is not exported by SchedulerMetrics"
        labels |= exported[name]
    for name, used in selector_labels(expr).items():
        assert used <= labels, f"{title}: {name} has no label {used - labels}"
    assert grouping_labels(expr) <= labels, f"{title}: groups by a label no series has"
    legend_labels = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend))
    assert legend_labels <= (grouping_labels(expr) or labels), f"{title}: legend {legend}"


def test_dashboard_variables_query_exported_series(exported: dict[str, set[str]]) -> None:
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
        m = _LABEL_VALUES.match(query)
        assert m is not None and m.group("expr"), f"${variable['name']}: {query}"
        (name,) = metric_names(m.group("expr"))
        assert name in exported, f"${variable['name']}: {name} is not exported"
        assert m.group("label") in exported[name] | TARGET_LABELS
