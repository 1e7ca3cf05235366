"""DefaultPreBind: accepted for Koordinator profile compatibility (its patch rides on the Binding here)."""

from koordsched.plugins.defaultprebind.default_prebind import DefaultPreBind

__all__ = ["DefaultPreBind"]
