"""ScarceResourceAvoidanceArgs (Koordinator v1.6.1: ``kubescheduler.config.k8s.io/v1`` and ``v1beta3``).

No defaults and no validation, as in Koordinator: a name no node offers simply never counts.
"""

from __future__ import annotations

from koordsched.config.catalog import PluginArgs


class ScarceResourceAvoidanceArgs(PluginArgs):
    #: The scarce resources, e.g. ``[nvidia.com/gpu]``.
    resources: list[str] = []
