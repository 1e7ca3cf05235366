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
