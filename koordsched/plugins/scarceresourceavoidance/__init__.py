"""ScarceResourceAvoidance (Koordinator v1.6): keep pods off nodes with scarce resources they do not use."""

from koordsched.plugins.scarceresourceavoidance.args import ScarceResourceAvoidanceArgs
from koordsched.plugins.scarceresourceavoidance.plugin import ScarceResourceAvoidance

__all__ = ["ScarceResourceAvoidance", "ScarceResourceAvoidanceArgs"]
