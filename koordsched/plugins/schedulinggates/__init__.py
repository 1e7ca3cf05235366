"""SchedulingGates: keeps gated pods out of the active queue."""

from koordsched.plugins.schedulinggates.scheduling_gates import SchedulingGates

__all__ = ["SchedulingGates"]
