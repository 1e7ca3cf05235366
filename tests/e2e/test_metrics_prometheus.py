"""Every query of the shipped scheduler dashboard has data after real scheduling rounds.

A real Prometheus (tests/e2e/prometheus.py) scrapes the scheduler's secure port as
deploy/prometheus-operator/servicemonitor.yaml makes the Operator scrape it: HTTPS, certificate
not verified, a ServiceAccount's token from a file (TokenRequest API), that account bound to
deploy/metrics-reader.yaml's ClusterRole, the Operator's target labels. The scheduler runs as
``koordsched run`` against the e2e API server.

Rates need a counter to grow between two scrapes, and per-plugin timings are recorded in 10 % of
cycles only, so pods arrive in rounds until every query answers (bounded: at most ROUNDS), each
round with pods that fit and one that fits nowhere. The queries are read from the dashboard JSON
and their variables resolved as Grafana resolves "All".
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.apiserver import REPO_ROOT
from tests.e2e.helpers import (
    Api,
    Cluster,
    SchedulerProcess,
    parse_metrics,
    scheduler_processes,
    serving_request,
    unique,
    wait_for,
    write_profile,
)
from tests.e2e.prometheus import (
    PrometheusServer,
    ScrapeTarget,
    dashboard_queries,
    prometheus_or_skip,
)
from tests.e2e.test_rbac import apply, manifests
from tests.e2e.test_secure_serving import CLUSTER_ROLE_BINDINGS, binding, service_account_token

pytestmark = pytest.mark.e2e

DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "koordsched-dashboard.json"
METRICS_READER_FILE = REPO_ROOT / "deploy" / "metrics-reader.yaml"
#: Pods per round that fit; 10 % of cycles record per-plugin timings, so a round of 12 misses them
#: all with probability 0.9**12 (28 %), and ROUNDS rounds with 0.28**ROUNDS.
POD_BATCH = 12
ROUNDS = 8
#: Covers the whole test, standing in for Grafana's $__rate_interval and $__range.
WINDOW = "15m"


async def test_every_dashboard_query_has_data(
    api: Api, cluster: Cluster, tmp_path: Path, scheduler_kubeconfig: Path
) -> None:
    binary = prometheus_or_skip()
    queries = dashboard_queries(DASHBOARD)
    assert len(queries) >= 20, "the dashboard's queries were not found"
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())

    applied = await apply(api, manifests(METRICS_READER_FILE))
    bound_name = unique("e2e-prometheus")
    try:
        token = await service_account_token(api, cluster.ns, "prometheus-k8s")
        await api.post(
            CLUSTER_ROLE_BINDINGS,
            binding(bound_name, "koordsched-metrics-reader", cluster.ns, "prometheus-k8s"),
        )
        token_file = tmp_path / "token"
        token_file.write_text(token)
        await scrape_and_query(
            cluster, tmp_path, scheduler_kubeconfig, binary, token_file, token, dashboard, queries
        )
    finally:
        await api.delete(f"{CLUSTER_ROLE_BINDINGS}/{bound_name}", grace=None)
        for path in reversed(applied):
            await api.delete(path, grace=None)


async def scrape_and_query(
    cluster: Cluster,
    tmp_path: Path,
    kubeconfig: Path,
    binary: Path,
    token_file: Path,
    token: str,
    dashboard: dict[str, Any],
    queries: list[tuple[str, str]],
) -> None:
    lease = unique("e2e-metrics")
    cluster.leases.append(("koordinator-system", lease))
    profile = write_profile(tmp_path / "profile.yaml", lease_name=lease)
    await cluster.add_node("a", cpu="64", memory="256Gi")
    await cluster.add_node("b", cpu="64", memory="256Gi")
    with scheduler_processes() as procs:
        sched = SchedulerProcess("sched-metrics", profile, kubeconfig, tmp_path)
        procs.append(sched)
        await sched.wait_ready()
        target = ScrapeTarget(f"127.0.0.1:{sched.port}", pod="koordsched-e2e")
        with PrometheusServer(tmp_path / "prometheus", token_file, [target], binary=binary) as prom:
            await prom.wait_for_targets_up()
            # Leading: client-go's gauge, named as kube-scheduler names it.
            await prom.wait_for_data('leader_election_master_status{name="kube-scheduler"} == 1')
            missing = await rounds(cluster, prom, dashboard, queries, detail=sched.tail)
            assert not missing, "dashboard queries without data:\n" + "\n".join(missing)
            await check_resources_endpoint(cluster, sched.port, token)


async def rounds(
    cluster: Cluster,
    prom: PrometheusServer,
    dashboard: dict[str, Any],
    queries: list[tuple[str, str]],
    *,
    detail: Any,
) -> list[str]:
    """Pods in rounds until every query answers; the queries still empty after ROUNDS rounds."""
    missing: list[str] = []
    for r in range(ROUNDS):
        names = [f"fit-{r}-{i}" for i in range(POD_BATCH)]
        for name in names:
            await cluster.add_pod(name, cpu="10m", memory="16Mi")
        await cluster.add_pod(f"too-big-{r}", cpu="1000")  # fits no node: an unschedulable attempt
        await cluster.wait_bound(names)
        # Let two scrapes see this round's counts, so rates over the window have grown.
        await scraped_twice(prom, detail)
        missing = []
        for title, expr in queries:
            expanded = await prom.expand(expr, dashboard, window=WINDOW)
            samples = await prom.query(expanded)
            if not any(math.isfinite(s.value) for s in samples):
                missing.append(f"{title}: {expanded} -> {samples}")
        if not missing:
            break
    return missing


async def scraped_twice(prom: PrometheusServer, detail: Any) -> None:
    async def last_scrape() -> str | None:
        targets = await prom.targets_health()
        return str(targets[0]["lastScrape"]) if targets and targets[0]["health"] == "up" else None

    first = await wait_for(last_scrape, what="a scrape", detail=detail)
    seen = {first}

    async def later() -> bool:
        now = await last_scrape()
        if now is not None:
            seen.add(now)
        return len(seen) >= 3

    await wait_for(later, what="two more scrapes", detail=prom.tail)


async def check_resources_endpoint(cluster: Cluster, port: int, token: str) -> None:
    """/metrics/resources with the same token: kube-scheduler's pod resource series for our pods."""
    answer = await serving_request(port, "/metrics/resources", token=token)
    assert answer is not None and answer[0] == 200, answer
    samples = parse_metrics(answer[1].decode())
    node_a = cluster.node_name("a")
    ours = {
        (dict(labels)["pod"], dict(labels)["node"], dict(labels)["resource"]): value
        for (name, labels), value in samples.items()
        if name == "kube_pod_resource_request" and dict(labels).get("namespace") == cluster.ns
    }
    bound = [(pod_node, v) for (p, pod_node, res), v in ours.items() if p == "fit-0-0" and res == "cpu"]
    assert bound and bound[0][1] == pytest.approx(0.01), ours
    assert bound[0][0] in (node_a, cluster.node_name("b"))
    assert ours[("too-big-0", "", "cpu")] == 1000.0  # pending: no node
