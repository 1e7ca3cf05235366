"""Plugin names koordsched knows of, whether or not it implements them, and upstream's defaults.

Knowing the names lets an error tell a typo ("unknown plugin") from a real plugin that
koordsched has not implemented, and lets ``disabled`` lists name plugins koordsched lacks.
"""

from __future__ import annotations

#: kube-scheduler v1.28's default plugin set: one multiPoint list, in order, with weights
#: (None: no weight given; only Score plugins read it).
UPSTREAM_DEFAULT_MULTIPOINT: tuple[tuple[str, int | None], ...] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeUnschedulable", None),
    ("NodeName", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("EBSLimits", None),
    ("GCEPDLimits", None),
    ("NodeVolumeLimits", None),
    ("AzureDiskLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
)

#: The extension points each of kube-scheduler v1.28's default plugins implements, for the ones
#: koordsched lacks (the registry knows its own): a profile that disables a missing plugin at
#: every one of its points does not miss it (Koordinator's chart disables all postFilter plugins,
#: so DefaultPreemption).
UPSTREAM_DEFAULT_POINTS: dict[str, frozenset[str]] = {
    "SchedulingGates": frozenset({"preEnqueue"}),
    "PrioritySort": frozenset({"queueSort"}),
    "NodeUnschedulable": frozenset({"filter"}),
    "NodeName": frozenset({"filter"}),
    "TaintToleration": frozenset({"filter", "preScore", "score"}),
    "NodeAffinity": frozenset({"preFilter", "filter", "preScore", "score"}),
    "NodePorts": frozenset({"preFilter", "filter"}),
    "NodeResourcesFit": frozenset({"preFilter", "filter", "preScore", "score"}),
    "VolumeRestrictions": frozenset({"preFilter", "filter"}),
    "EBSLimits": frozenset({"filter"}),
    "GCEPDLimits": frozenset({"filter"}),
    "NodeVolumeLimits": frozenset({"filter"}),
    "AzureDiskLimits": frozenset({"filter"}),
    "VolumeBinding": frozenset({"preFilter", "filter", "reserve", "preBind", "preScore", "score"}),
    "VolumeZone": frozenset({"preFilter", "filter"}),
    "PodTopologySpread": frozenset({"preFilter", "filter", "preScore", "score"}),
    "InterPodAffinity": frozenset({"preFilter", "filter", "preScore", "score"}),
    "DefaultPreemption": frozenset({"postFilter"}),
    "NodeResourcesBalancedAllocation": frozenset({"preScore", "score"}),
    "ImageLocality": frozenset({"score"}),
    "DefaultBinder": frozenset({"bind"}),
}

#: Koordinator v1.6's koord-scheduler plugins.
KOORDINATOR_PLUGINS: tuple[str, ...] = (
    "LoadAwareScheduling",
    "NodeNUMAResource",
    "Reservation",
    "Coscheduling",
    "DeviceShare",
    "ElasticQuota",
    "DefaultPreBind",
    "NodeResourcesFitPlus",
    "ScarceResourceAvoidance",
)

WELL_KNOWN_PLUGINS: frozenset[str] = frozenset(
    [name for name, _ in UPSTREAM_DEFAULT_MULTIPOINT] + list(KOORDINATOR_PLUGINS)
)

#: In a ``disabled`` list: every plugin at that point, defaults included.
ALL = "*"
