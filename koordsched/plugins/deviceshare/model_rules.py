"""What a node's GPU vendor and model decide for a shared request (Koordinator v1.7/v1.8).

Both rules read the Node's ``node.koordinator.sh/gpu-vendor`` and ``gpu-model`` labels and neither
depends on the node's device usage, so they are applied to a pod's rows after whatever the filter
tiers (kernel, memo, exact allocator) decided: the fast and the exact path agree by construction.

* ``gpuShareUnsupportedModels``: a shared request on a node of a listed vendor and model is
  UnschedulableAndUnresolvable (a Filter verdict, so it wins over the allocator's);
* vNPU templates (:mod:`~koordsched.plugins.deviceshare.templates`): PreFilter finds the templates
  the request equals; a node (with devices) whose model has none of them is refused with
  Koordinator's text, as its allocator's template step refuses it before allocating anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np

from koordsched.api.config_maps import ConfigMap
from koordsched.api.core import Node, Pod
from koordsched.api.kinds import CONFIG_MAPS
from koordsched.api.koordinator import LABEL_GPU_MODEL, LABEL_GPU_VENDOR
from koordsched.framework.interface import Handle, Rows
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare.args import DeviceShareArgs
from koordsched.plugins.deviceshare.cycle import CycleData
from koordsched.plugins.deviceshare.store import DeviceStore
from koordsched.plugins.deviceshare.templates import (
    ERR_NO_MATCHED_TEMPLATE,
    TemplateCache,
    enforced,
    match_templates,
    model_key,
)

ERR_UNSUPPORTED_MODEL: Final = 'model "{model}" of vendor "{vendor}" does not support GPU Share'
#: The Warning event on a pod whose templates come from a ConfigMap version that could not be read.
REASON_TEMPLATES_INVALID: Final = "InvalidGPUSharedResourceTemplates"


class ModelRules:
    """The templates cache and the unsupported models, applied to one pod's cycle."""

    def __init__(self, args: DeviceShareArgs, handle: Handle, store: DeviceStore) -> None:
        config = args.templates
        self._handle = handle
        self._store = store
        self.cache = TemplateCache(config.config_map_namespace, config.config_map_name)
        self._matched = config.matched
        self._unsupported = frozenset((m.vendor, m.model) for m in args.gpu_share_unsupported_models)

    def sync(self) -> None:
        """Catch up with the stored ConfigMap (a new object: re-read; gone: no templates)."""
        self.cache.update(self._handle.objects(CONFIG_MAPS).get(self.cache.key))

    def is_templates_event(self, pod: PodInfo, old: object, new: object) -> bool:
        """Queueing hint: the ConfigMap that changed is the templates' one."""
        obj = new if new is not None else old
        if not isinstance(obj, ConfigMap):
            return True
        return (obj.metadata.namespace, obj.metadata.name) == (self.cache.namespace, self.cache.name)

    def pre_filter(self, data: CycleData, pod: Pod) -> Status:
        """Find the templates a shared request must equal; UAU when no model has one."""
        gpu = data.request.gpu
        if gpu is None or not enforced(gpu.requests_per_gpu, gpu.gpu_shared, self._matched):
            data.templates = None
            return SUCCESS
        self.sync()
        if self.cache.error is not None:
            self._handle.warn(pod, REASON_TEMPLATES_INVALID, self.cache.error)
        data.templates = match_templates(self.cache.templates, gpu.requests_per_gpu)
        if not data.templates.candidates:
            return Status.unresolvable(ERR_NO_MATCHED_TEMPLATE)
        return SUCCESS

    def refuse_rows(self, data: CycleData, rows: Rows) -> list[tuple[int, Status]]:
        """(position in ``rows``, why) for each node the node's model refuses."""
        gpu = data.request.gpu
        templates = data.templates
        unsupported = self._unsupported if gpu is not None and gpu.gpu_shared else frozenset()
        if templates is None and not unsupported:
            return []
        infos = self._handle.snapshot.infos
        allows = templates.allows if templates is not None else None
        out: list[tuple[int, Status]] = []
        for position, row in enumerate(np.asarray(rows).tolist()):
            info = infos[row]
            has_devices = self._store.state(info.name) is not None
            status = self._refusal(info.node, unsupported, has_devices, allows)
            if status is not None:
                out.append((position, status))
        return out

    @staticmethod
    def _refusal(
        node: Node,
        unsupported: frozenset[tuple[str, str]],
        has_devices: bool,
        allows: Callable[[str], bool] | None,
    ) -> Status | None:
        labels = node.metadata.labels
        vendor, model = labels.get(LABEL_GPU_VENDOR, ""), labels.get(LABEL_GPU_MODEL, "")
        if (vendor, model) in unsupported:
            return Status.unresolvable(ERR_UNSUPPORTED_MODEL.format(model=model, vendor=vendor))
        if allows is not None and has_devices and not allows(f"{vendor}-{model}"):
            return Status.unresolvable(ERR_NO_MATCHED_TEMPLATE)
        return None

    def template_name(self, data: CycleData, node: Node) -> str:
        """The template an allocation on ``node`` records ("" without one, or with several)."""
        return data.templates.name_for(model_key(node)) if data.templates is not None else ""
