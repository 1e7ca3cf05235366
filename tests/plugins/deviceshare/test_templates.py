"""vNPU templates and unsupported GPU-share models (Koordinator v1.7/v1.8, spec C.3, C.6).

Each row names the spec case it restates. The templates come from the ConfigMap
``koordinator-system/gpu-shared-resource-templates`` (``tests.builders.ASCEND_TEMPLATES``: the W
manual's names and quantities for 310P, 910B3 and 910B4).
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

import koordsched.plugins.deviceshare.kernels as kd
from koordsched.config.catalog import ArgsError
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import Code
from koordsched.plugins.deviceshare.args import DeviceShareArgs
from koordsched.plugins.deviceshare.cycle import STATE_KEY
from koordsched.plugins.deviceshare.templates import (
    ERR_NO_MATCHED_TEMPLATE,
    TemplateCache,
    TemplateError,
    match_templates,
    parse_templates,
)
from tests.builders import ASCEND_TEMPLATES, ascend_labels, templates_config_map
from tests.plugins.deviceshare.fixtures import Cluster, allocated, gpu_entry, make_pod, npu_entry

CORE = "huawei.com/npu-core"
CPU = "huawei.com/npu-cpu"
DVPP = "huawei.com/npu-dvpp"
RATIO = "koordinator.sh/gpu-memory-ratio"
MEM = "koordinator.sh/gpu-memory"
SHARED = "koordinator.sh/gpu.shared"
GI = 1024**3
UAU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
NO_TEMPLATE = (UAU, (ERR_NO_MATCHED_TEMPLATE,))
DUO = "Ascend-310P3-300I-DUO"
UNSUPPORTED = (UAU, (f'model "{DUO}" of vendor "huawei" does not support GPU Share',))
INSUFFICIENT = (Code.UNSCHEDULABLE, ("Insufficient GPU Devices",))
HINT = "scheduling.koordinator.sh/device-allocate-hint"

#: 310P vir04 (C.3's test) and 910B3 vir10_3c_32g (the manual's example pod).
VIR04 = {SHARED: 1, MEM: 12 * GI, CORE: 4, CPU: 4, DVPP: 50}
VIR10 = {SHARED: 1, MEM: 32 * GI, CORE: 10, CPU: 3}


# --- data.yaml --------------------------------------------------------------------------------


def test_parse_reads_the_nested_shape() -> None:
    """C.3: ``<vendor>-<model>`` -> template name -> ResourceList, quantities as Koordinator reads them."""
    templates = parse_templates(ASCEND_TEMPLATES)
    assert templates["huawei-Ascend-310P"]["vir04"] == {CORE: 4, CPU: 4, DVPP: 50, MEM: 12 * GI}
    assert templates["huawei-Ascend-910B3"]["vir05_1c_16g"] == {CORE: 5, CPU: 1, MEM: 16 * GI}
    assert set(templates) == {"huawei-Ascend-310P", "huawei-Ascend-910B3", "huawei-Ascend-910B4"}


@pytest.mark.parametrize(
    ("case", "text", "error"),
    [
        (
            "C.3 the manual's block as printed (template names at the models' level) is not the shape",
            'huawei-Ascend-310P:\nvir01:\n  huawei.com/npu-core: "1"\n',
            "vir01.huawei.com/npu-core: expected a map of resource name to quantity",
        ),
        ("C.3 not YAML", "a: [b", "invalid YAML"),
        (
            "bounded: aliases that expand exponentially",
            "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
            + "".join(
                f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
                for p, c in zip("abcdefgh", "bcdefghi", strict=True)
            ),
            "aliases expand to more than",
        ),
        ("C.3 a list, not a map", "- a\n", "expected a map of <vendor>-<model> to templates, got list"),
        (
            "C.3 a quantity Kubernetes rejects",
            "huawei-Ascend-910B3:\n  vir05_1c_16g: {huawei.com/npu-core: five}\n",
            "huawei-Ascend-910B3.vir05_1c_16g: huawei.com/npu-core:",
        ),
    ],
)
def test_parse_errors_say_where(case: str, text: str, error: str) -> None:
    with pytest.raises(TemplateError) as err:
        parse_templates(text)
    assert error in str(err.value), case


# --- matching ---------------------------------------------------------------------------------

_PER_CARD_VIR04 = {MEM: 12 * GI, CORE: 4, CPU: 4, DVPP: 50}


@pytest.mark.parametrize(
    ("case", "per_card", "candidates"),
    [
        (
            "C.3 {12Gi, core 4, cpu 4, dvpp 50} matches 310P vir04",
            _PER_CARD_VIR04,
            {"huawei-Ascend-310P": ("vir04",)},
        ),
        ("C.3 core 5 with the same others matches nothing", {**_PER_CARD_VIR04, CORE: 5}, {}),
        (
            "C.3 strict: a resource the template lacks (dvpp on vir04_3c_ndvpp) matches nothing",
            {MEM: 12 * GI, CORE: 4, CPU: 3, DVPP: 50},
            {},
        ),
        (
            "C.3 strict: a resource the request lacks (dvpp of vir04) matches nothing",
            {MEM: 12 * GI, CORE: 4, CPU: 4},
            {},
        ),
        (
            "C.3 vir04_3c_ndvpp without dvpp",
            {MEM: 12 * GI, CORE: 4, CPU: 3},
            {"huawei-Ascend-310P": ("vir04_3c_ndvpp",)},
        ),
        (
            "C.3 matched across all models: 910B4 vir10_3c_16g_nm",
            {MEM: 16 * GI, CORE: 10, CPU: 3},
            {"huawei-Ascend-910B4": ("vir10_3c_16g_nm",)},
        ),
    ],
)
def test_strict_match(case: str, per_card: dict[str, int], candidates: dict[str, tuple[str, ...]]) -> None:
    assert dict(match_templates(parse_templates(ASCEND_TEMPLATES), per_card).candidates) == candidates, case


def test_identical_templates_under_several_names_lose_the_name() -> None:
    """C.3 step 4 [QUIRK]: several candidates for the node's model, so no template name."""
    text = (
        ASCEND_TEMPLATES
        + "huawei-Ascend-910B2:\n  a: {huawei.com/npu-core: '4'}\n  b: {huawei.com/npu-core: '4'}\n"
    )
    match = match_templates(parse_templates(text), {CORE: 4})
    assert match.candidates == {"huawei-Ascend-910B2": ("a", "b")}
    assert match.allows("huawei-Ascend-910B2") and match.name_for("huawei-Ascend-910B2") == ""


# --- the cache --------------------------------------------------------------------------------


def test_cache_add_update_delete_and_a_parse_error() -> None:
    """C.3: add and update replace the whole cache, delete empties it, a parse error keeps it."""
    cache = TemplateCache("koordinator-system", "gpu-shared-resource-templates")
    cache.update(templates_config_map())
    assert set(cache.templates) == {"huawei-Ascend-310P", "huawei-Ascend-910B3", "huawei-Ascend-910B4"}
    cache.update(templates_config_map("huawei-Ascend-910B3:\n  x: {huawei.com/npu-core: '5'}\n"))
    assert cache.templates == {"huawei-Ascend-910B3": {"x": {CORE: 5}}}
    before = cache.templates
    cache.update(templates_config_map("a: [b"))
    assert cache.templates is before
    assert cache.error is not None and cache.error.startswith(
        "ConfigMap koordinator-system/gpu-shared-resource-templates data.yaml: invalid YAML"
    )
    cache.update(None)
    assert cache.templates == {} and cache.error is None


# --- the plugin: PreFilter, Filter on each node, the annotation -------------------------------


def _cluster(args: DeviceShareArgs | None = None, *, templates: str | None = ASCEND_TEMPLATES) -> Cluster:
    c = Cluster(args)
    c.set_templates(templates)
    c.add_node(
        "p310",
        [npu_entry(m, core="8", memory="24Gi") for m in range(2)],
        node_labels=ascend_labels("Ascend-310P"),
    )
    c.add_node("b3", [npu_entry(m) for m in range(2)], node_labels=ascend_labels("Ascend-910B3"))
    c.add_node(
        "duo", [npu_entry(m, core="8", memory="24Gi") for m in range(2)], node_labels=ascend_labels(DUO)
    )
    c.add_node("plain", [npu_entry(m) for m in range(2)])  # no vendor or model labels
    # Without a Device CR DeviceShare has nothing to check there (NodeResourcesFit refuses it).
    c.add_node("bare", device=False, node_labels=ascend_labels("Ascend-910B3"))
    return c


def _unsupported(*pairs: tuple[str, str]) -> DeviceShareArgs:
    return msgspec.convert(
        {"gpuShareUnsupportedModels": [{"vendor": v, "model": m} for v, m in pairs]}, DeviceShareArgs
    )


def _verdicts(
    c: Cluster, requests: dict[str, Any], annotations: dict[str, Any] | None = None
) -> dict[str, Any]:
    pod = make_pod("p", requests, annotations=annotations)
    return {n: None if s is None else (s.code, s.reasons) for n, s in c.filter(pod).items()}


_ANY_SELECTOR = {HINT: {"gpu": {"selector": {}}}}


@pytest.mark.parametrize("annotations", [None, _ANY_SELECTOR], ids=["kernel", "exact"])
@pytest.mark.parametrize(
    ("case", "args", "requests", "verdicts"),
    [
        (
            "C.3 vir04 fits only the 310P node: other models have no candidate",
            None,
            VIR04,
            {"p310": None, "b3": NO_TEMPLATE, "duo": NO_TEMPLATE, "plain": NO_TEMPLATE, "bare": None},
        ),
        (
            "C.3 vir10_3c_32g fits only the 910B3 node",
            None,
            VIR10,
            {"p310": NO_TEMPLATE, "b3": None, "duo": NO_TEMPLATE, "plain": NO_TEMPLATE, "bare": None},
        ),
        (
            "C.3 a full NPU (not shared) does not follow templates",
            None,
            {CORE: 20, RATIO: 100},
            {"p310": INSUFFICIENT, "b3": None, "duo": INSUFFICIENT, "plain": None, "bare": None},
        ),
        (
            "C.3 matchedResources: [] enforces templates for no request",
            msgspec.convert({"gpuSharedResourceTemplatesConfig": {"matchedResources": []}}, DeviceShareArgs),
            {SHARED: 1, MEM: 8 * GI, CORE: 2, CPU: 1},
            {"p310": None, "b3": None, "duo": None, "plain": None, "bare": None},
        ),
        (
            "C.6 shared request on a huawei/Ascend-310P3-300I-DUO node listed in gpuShareUnsupportedModels",
            _unsupported(("huawei", DUO)),
            {**VIR04, SHARED: 1},
            {"p310": None, "b3": NO_TEMPLATE, "duo": UNSUPPORTED, "plain": NO_TEMPLATE, "bare": None},
        ),
        (
            "C.3 unsupported models: a full NPU on the listed model is not a shared request",
            _unsupported(("huawei", DUO)),
            {CORE: 8, RATIO: 100},
            {"p310": None, "b3": None, "duo": None, "plain": None, "bare": None},
        ),
        (
            "C.3 unsupported models: a shared GPU request (no NPU resource) is refused there too",
            _unsupported(("huawei", DUO)),
            {SHARED: 1, RATIO: 50},
            {"p310": None, "b3": None, "duo": UNSUPPORTED, "plain": None, "bare": None},
        ),
    ],
)
def test_filter_by_model(
    case: str,
    args: DeviceShareArgs | None,
    requests: dict[str, Any],
    verdicts: dict[str, Any],
    annotations: dict[str, Any] | None,
) -> None:
    """The node's vendor/model decide alike whether the kernel or the exact allocator decided the rest."""
    assert _verdicts(_cluster(args), requests, annotations) == verdicts, case


@pytest.mark.parametrize(
    ("case", "templates", "requests"),
    [
        (
            "C.6 shared NPU request with no matching template (core 5 of vir04)",
            ASCEND_TEMPLATES,
            {**VIR04, CORE: 5},
        ),
        ("C.3 no ConfigMap: no templates at all", None, VIR04),
    ],
)
def test_pre_filter_without_a_match(case: str, templates: str | None, requests: dict[str, Any]) -> None:
    c = _cluster(templates=templates)
    _, status = c.plugin.pre_filter(CycleState(), make_pod("p", requests))
    assert (status.code, status.reasons) == NO_TEMPLATE, case


@pytest.mark.parametrize(
    ("case", "node", "requests", "extension"),
    [
        (
            "C.5 vir04 on the 310P node records its template",
            "p310",
            VIR04,
            {"gpuSharedResourceTemplate": "vir04"},
        ),
        ("C.5 vir10_3c_32g on the 910B3 node", "b3", VIR10, {"gpuSharedResourceTemplate": "vir10_3c_32g"}),
        ("C.5 the field is omitted without a template (full NPU)", "b3", {CORE: 20, RATIO: 100}, None),
    ],
)
def test_device_allocated_names_the_template(
    case: str, node: str, requests: dict[str, Any], extension: dict[str, str] | None
) -> None:
    status, annotations = _cluster().schedule(make_pod("p", requests), node)
    assert status.ok, (case, status)
    (entry,) = allocated(annotations)["gpu"]
    assert entry.get("extension") == extension, case


def test_several_candidates_write_no_template_name() -> None:
    """C.3 step 4 [QUIRK]: identical lists under two names of the node's model: allocated, unnamed."""
    text = ASCEND_TEMPLATES + "huawei-Ascend-910B3-x:\n  a: {}\n"  # another model: not the node's
    text = text.replace(
        "  vir10_3c_32g:",
        "  twin:\n    huawei.com/npu-core: '10'\n    huawei.com/npu-cpu: '3'\n"
        "    koordinator.sh/gpu-memory: 32Gi\n  vir10_3c_32g:",
    )
    status, annotations = _cluster(templates=text).schedule(make_pod("p", VIR10), "b3")
    assert status.ok, status
    (entry,) = allocated(annotations)["gpu"]
    assert "extension" not in entry


def test_the_cache_follows_the_config_map() -> None:
    """C.3: a ConfigMap added, replaced or deleted changes the next cycle; a bad version is kept out
    and said on the pod (a Warning event), the templates read before still apply."""
    c = _cluster(templates=None)
    pod = make_pod("p", VIR10)
    assert not c.plugin.pre_filter(CycleState(), pod)[1].ok
    c.set_templates()
    assert c.plugin.pre_filter(CycleState(), pod)[1].ok
    c.set_templates("huawei-Ascend-910B3: [")
    state = CycleState()
    assert c.plugin.pre_filter(state, pod)[1].ok
    assert state.get(STATE_KEY).templates.candidates == {"huawei-Ascend-910B3": ("vir10_3c_32g",)}
    ((key, reason, message),) = set(c.handle.warned)
    assert (key, reason) == ("default/p", "InvalidGPUSharedResourceTemplates")
    assert message.startswith(
        "ConfigMap koordinator-system/gpu-shared-resource-templates data.yaml: invalid YAML"
    )
    c.set_templates("huawei-Ascend-310P:\n  vir04: {huawei.com/npu-core: '4'}\n")
    assert (c.plugin.pre_filter(CycleState(), pod)[1].reasons) == (ERR_NO_MATCHED_TEMPLATE,)
    c.set_templates(None)
    assert not c.plugin.pre_filter(CycleState(), make_pod("p", VIR04))[1].ok


def test_a_config_map_elsewhere_is_not_the_templates() -> None:
    """Only the ConfigMap the args name is read (here another name in the same namespace)."""
    args = msgspec.convert({"gpuSharedResourceTemplatesConfig": {"configMapName": "mine"}}, DeviceShareArgs)
    c = _cluster(args)  # the default name holds templates, "mine" does not exist
    assert not c.plugin.pre_filter(CycleState(), make_pod("p", VIR10))[1].ok
    c.set_templates(key="koordinator-system/mine")
    assert c.plugin.pre_filter(CycleState(), make_pod("p", VIR10))[1].ok


def test_nvidia_shared_gpus_are_not_matched() -> None:
    """C.3: the default matchedResources is npu-core, so a shared NVIDIA GPU request is unaffected."""
    c = Cluster()
    c.add_node("g", [gpu_entry(0, 0, "pci0")])
    assert c.filter(make_pod("p", {SHARED: 1, RATIO: 50})) == {"g": None}


# --- args -------------------------------------------------------------------------------------


def test_args_defaults() -> None:
    """C.3: Koordinator's defaults; gpuShareUnsupportedModels has none."""
    args = DeviceShareArgs()
    config = args.templates
    assert (config.config_map_namespace, config.config_map_name) == (
        "koordinator-system",
        "gpu-shared-resource-templates",
    )
    assert config.matched_resources == [CORE]
    assert args.gpu_share_unsupported_models == []


@pytest.mark.parametrize(
    ("case", "raw", "error"),
    [
        ("an unknown field", {"gpuSharedResourceTemplatesConfig": {"configMap": "x"}}, "unknown field"),
        (
            "an empty model",
            {"gpuShareUnsupportedModels": [{"vendor": "huawei", "model": ""}]},
            "gpuShareUnsupportedModels[0].model: Required value",
        ),
        (
            "an empty matched resource",
            {"gpuSharedResourceTemplatesConfig": {"matchedResources": [""]}},
            "gpuSharedResourceTemplatesConfig.matchedResources[0]: Required value",
        ),
    ],
)
def test_args_refused(case: str, raw: dict[str, Any], error: str) -> None:
    with pytest.raises((ArgsError, msgspec.ValidationError)) as err:
        msgspec.convert(raw, DeviceShareArgs).validate()
    assert error in str(err.value), case


def test_the_selector_hint_sends_the_rows_to_the_exact_allocator() -> None:
    """The "exact" rows of test_filter_by_model are decided by the allocator, not the kernel."""
    c = _cluster()
    for notes, exact in ((None, False), (_ANY_SELECTOR, True)):
        state = CycleState()
        assert c.plugin.pre_filter(state, make_pod("p", VIR04, annotations=notes))[1].ok
        codes, _ = c.plugin._filter._kernel(state.get(STATE_KEY), c.rows())
        rows = [i.row for i in c.snap.infos if i.name != "bare"]
        assert all((int(codes[r]) == kd.EXACT) is exact for r in rows), (notes, codes.tolist())


@pytest.mark.parametrize(
    ("case", "namespace", "name", "requeued"),
    [
        ("the templates' ConfigMap", "koordinator-system", "gpu-shared-resource-templates", True),
        ("another name", "koordinator-system", "other", False),
        ("another namespace", "default", "gpu-shared-resource-templates", False),
    ],
)
def test_only_the_templates_config_map_requeues(case: str, namespace: str, name: str, requeued: bool) -> None:
    """ConfigMapAdd/Update/Delete wake pods only for the ConfigMap the args name."""
    plugin = Cluster().plugin
    hints = [e.hint for e in plugin.events_to_register() if e.event.resource == "ConfigMap"]
    assert len(hints) == 3
    cm = templates_config_map(name=name, namespace=namespace)
    pod = make_pod("p", VIR04)
    for hint in hints:
        assert hint is not None
        assert hint(pod, None, cm) is requeued, case
        assert hint(pod, cm, None) is requeued, case
