"""DefaultBinder: binds through the output port."""

from koordsched.plugins.defaultbinder.default_binder import DefaultBinder

__all__ = ["DefaultBinder"]
