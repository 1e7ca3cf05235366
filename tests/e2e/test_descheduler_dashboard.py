"""Every query of the shipped descheduler dashboard has data, scraped as the ServiceMonitor scrapes.

The descheduler (``koordsched deschedule --kubeconfig``) runs against the e2e API server over the
hot node of tests/e2e/test_descheduler.py until LowNodeLoad has evicted pods. A real Prometheus
(tests/e2e/prometheus.py) scrapes its secure port as
deploy/prometheus-operator/descheduler-servicemonitor.yaml makes the Operator do: HTTPS, the
certificate not verified, the token of the ServiceAccount monitoring/prometheus-k8s (TokenRequest
API) bound by the shipped descheduler-metrics-reader-binding.yaml to the shipped
deploy/descheduler/metrics-reader.yaml, the Operator's target labels (``job`` the Service's name,
``namespace``, ``service``, ``pod``, ``container``, ``endpoint``) and ``honor_labels`` off. So the
evicted pods' ``namespace`` arrives as ``exported_namespace``; a second target carries a ``node``
target label too, so that its ``node`` arrives as ``exported_node``.

Every query is read from deploy/descheduler/koord-descheduler-dashboard.json, its variables
resolved as Grafana resolves "All", and must return finite data; the namespace and node panels
must name the evicted pods' namespace and node, not the target's. The manifests of
deploy/descheduler/ (Deployment, Service, NetworkPolicy, ...) are created with a server-side dry
run, so the API server validates them. Its own control plane, as tests/e2e/test_descheduler.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.apiserver import KubeEnv
from tests.e2e.fixtures import control_plane
from tests.e2e.helpers import LEASE_NAMESPACE, Api, Cluster, unique, wait_for
from tests.e2e.prometheus import PrometheusServer, ScrapeTarget, dashboard_queries, prometheus_or_skip
from tests.e2e.test_descheduler import ADMIN_USER, DESCHED_DIR, config, descheduler, hot_and_cold, jobs_for
from tests.e2e.test_rbac import apply, manifests
from tests.e2e.test_secure_serving import service_account_token

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = DESCHED_DIR / "koord-descheduler-dashboard.json"
OPERATOR = ROOT / "deploy" / "prometheus-operator"
SERVICE = "koord-descheduler-metrics"
#: The Prometheus ServiceAccount the shipped binding names (kube-prometheus').
PROMETHEUS_NS, PROMETHEUS_SA = "monitoring", "prometheus-k8s"
#: A node label the second target carries, as a Node-kind endpoint's target would.
TARGET_NODE = "target-node"
#: Covers the whole test, standing in for Grafana's $__rate_interval and $__range.
WINDOW = "15m"
#: Collections for the server-side dry run of deploy/descheduler/.
_DRY_RUN_PATHS = {
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "Service": "/api/v1/namespaces/{ns}/services",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "NetworkPolicy": "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
}


kube_env = control_plane({ADMIN_USER: ["system:masters"]})


@dataclass(frozen=True)
class NodeTarget(ScrapeTarget):
    """An endpoint whose target also has a ``node`` label (the Operator sets one for a Node-kind
    endpoint address): the scraped ``node`` then arrives as ``exported_node``."""

    node: str = TARGET_NODE

    def labels(self) -> dict[str, str]:
        return {**super().labels(), "node": self.node}


async def dry_run(api: Api, path: Path) -> None:
    """Each object of a deploy/ file, validated and admitted by the API server, nothing stored."""
    for obj in manifests(path):
        base = _DRY_RUN_PATHS[obj["kind"]].format(ns=obj["metadata"].get("namespace", ""))
        await api.request("POST", base, obj, params={"dryRun": "All"})


async def test_every_descheduler_dashboard_query_has_data(
    api: Api, cluster: Cluster, kube_env: KubeEnv, tmp_path: Path
) -> None:
    import json

    binary = prometheus_or_skip()
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    queries = dashboard_queries(DASHBOARD)
    assert len(queries) == len(dashboard["panels"]), "a panel without its query"

    hot, _ = await hot_and_cold(api, cluster)
    for name in (
        "serviceaccount.yaml",
        "configmap.yaml",
        "deployment.yaml",
        "service.yaml",
        "networkpolicy.yaml",
    ):
        await dry_run(api, DESCHED_DIR / name)

    # The scraper: monitoring/prometheus-k8s, with the shipped reader role and binding only.
    await api.ensure_namespace(PROMETHEUS_NS)
    applied = await apply(
        api,
        manifests(DESCHED_DIR / "metrics-reader.yaml")
        + manifests(OPERATOR / "descheduler-metrics-reader-binding.yaml"),
    )
    try:
        token_file = tmp_path / "token"
        token_file.write_text(await service_account_token(api, PROMETHEUS_NS, PROMETHEUS_SA))
        await scrape_and_query(api, cluster, kube_env, tmp_path, binary, token_file, dashboard, queries, hot)
    finally:
        await api.delete(f"/api/v1/namespaces/{PROMETHEUS_NS}/serviceaccounts/{PROMETHEUS_SA}")
        for path in reversed(applied):
            await api.delete(path, grace=None)


async def scrape_and_query(
    api: Api,
    cluster: Cluster,
    kube_env: KubeEnv,
    tmp_path: Path,
    binary: Path,
    token_file: Path,
    dashboard: dict[str, Any],
    queries: list[tuple[str, str]],
    hot: str,
) -> None:
    ns = cluster.ns
    lease = unique("koord-descheduler")
    cluster.leases.append((LEASE_NAMESPACE, lease))
    cfg = config(tmp_path / "d.yaml", ns, lease)
    async with descheduler(cfg, kube_env.kubeconfig_for(ADMIN_USER)) as (runner, log):
        address = f"127.0.0.1:{runner.secure_port}"
        common = {"service": SERVICE, "container": "koord-descheduler"}
        targets = [
            ScrapeTarget(address, pod="koord-descheduler-0", **common),
            NodeTarget(address, pod="koord-descheduler-1", **common),
        ]
        with PrometheusServer(
            tmp_path / "prometheus",
            token_file,
            targets,
            job_name="serviceMonitor/koordinator-system/koord-descheduler/0",
            binary=binary,
        ) as prom:
            await prom.wait_for_targets_up()

            # LowNodeLoad evicts from the hot node (guard first, then one more of its pods).
            async def two_evicted() -> bool:
                jobs = await jobs_for(api, ns)
                done = [n for n, j in jobs.items() if j.get("status", {}).get("phase") == "Succeeded"]
                return len(done) >= 2

            await wait_for(two_evicted, what="two pods evicted from the hot node", detail=log.text)
            # Both targets scraped since: one series per target.
            await prom.wait_for_data(
                "count(count by (pod) ("
                f'descheduler_pods_evicted{{result="success", exported_namespace="{ns}"}})) == 2'
            )

            # The Operator's relabelling, as the dashboard meets it.
            raw = await prom.query(f'descheduler_pods_evicted{{exported_namespace="{ns}"}}')
            assert raw and all(s.labels["namespace"] == "koordinator-system" for s in raw), raw
            assert all(s.labels["job"] == SERVICE and s.labels["strategy"] == "LowNodeLoad" for s in raw), raw
            by_target = {s.labels["pod"]: s.labels for s in raw}
            assert by_target["koord-descheduler-0"]["node"] == hot, raw
            assert "exported_node" not in by_target["koord-descheduler-0"], raw
            assert (
                by_target["koord-descheduler-1"]["node"],
                by_target["koord-descheduler-1"]["exported_node"],
            ) == (
                TARGET_NODE,
                hot,
            ), raw

            missing = []
            for title, expr in queries:
                expanded = await prom.expand(expr, dashboard, window=WINDOW)
                try:
                    samples = await prom.wait_for_data(expanded)
                except AssertionError as err:
                    missing.append(f"{title}: {expanded}: {err}")
                    continue
                if title == "Evictions by namespace":
                    assert {s.labels.get("pod_namespace") for s in samples} == {ns}, samples
                if title == "Evictions by node":
                    assert {s.labels.get("pod_node") for s in samples} == {hot}, samples
                if title == "Leader":
                    assert [s.value for s in samples] == [1.0], samples
            assert not missing, "dashboard queries without data:\n" + "\n".join(missing)

            # The job variable lists the descheduler, and nothing of it looks like a scheduler.
            assert SERVICE in await prom.label_values("job", "descheduler_pod_migration_jobs")
            assert await prom.query(f'count({{job="{SERVICE}", __name__=~"scheduler_.+"}})') == []
