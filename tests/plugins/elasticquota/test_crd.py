"""The ElasticQuota CRD in deploy/crds matches the kind the plugin declares and the Struct decodes
what it admits."""

from __future__ import annotations

from pathlib import Path

import msgspec
import yaml

from koordsched.api.elastic_quota import ElasticQuota, parse_elastic_quota
from koordsched.api.kinds import ELASTIC_QUOTAS

CRD = Path(__file__).resolve().parents[3] / "deploy" / "crds" / "scheduling.sigs.k8s.io_elasticquotas.yaml"


def test_crd_matches_the_kind() -> None:
    crd = yaml.safe_load(CRD.read_text())["spec"]
    assert crd["names"]["kind"] == ELASTIC_QUOTAS.kind
    version = crd["versions"][0]
    assert ELASTIC_QUOTAS.path == f"/apis/{crd['group']}/{version['name']}/{crd['names']['plural']}"
    assert ELASTIC_QUOTAS.namespaced and crd["scope"] == "Namespaced"
    assert version["subresources"] == {"status": {}}
    props = version["schema"]["openAPIV3Schema"]["properties"]
    assert set(props["spec"]["properties"]) == {"min", "max"}
    assert set(props["status"]["properties"]) == {"used"}
    kustomization = yaml.safe_load((CRD.parent / "kustomization.yaml").read_text())
    assert CRD.name in kustomization["resources"]


def test_struct_reads_an_api_server_object() -> None:
    raw = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "team-a", "namespace": "team-a", "resourceVersion": "7"},
        "spec": {"min": {"cpu": "1"}, "max": {"cpu": "2", "memory": "4Gi"}},
        "status": {"used": {"cpu": "1500m"}},
    }
    eq = msgspec.json.decode(msgspec.json.encode(raw), type=ElasticQuota)
    spec = parse_elastic_quota(eq)
    assert spec.min == {"cpu": 1000} and spec.max == {"cpu": 2000, "memory": 4 * 1024**3}
    assert spec.shared_weight == spec.max and spec.parent == "koordinator-root-quota"
