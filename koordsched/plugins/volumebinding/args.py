"""VolumeBindingArgs (kubescheduler.config.k8s.io/v1): defaults and validation as upstream.

``shape`` configures scoring by volume capacity, which upstream enables only with the alpha
``VolumeCapacityPriority`` feature gate (off by default in v1.28; koordsched has no way to
turn it on). As upstream with the gate off, a profile that sets it is refused rather than
silently ignored.
"""

from __future__ import annotations

from koordsched.config.catalog import PluginArgs
from koordsched.plugins.helper import invalid, raise_field_errors

#: Upstream's default ``bindTimeoutSeconds``.
DEFAULT_BIND_TIMEOUT_SECONDS = 600


class UtilizationShapePoint(PluginArgs):
    utilization: int = 0
    score: int = 0


def _go_shape(shape: list[UtilizationShapePoint]) -> str:
    """``%#v`` of a ``[]config.UtilizationShapePoint``, as the field error prints it."""
    points = ", ".join(
        f"config.UtilizationShapePoint{{Utilization:{p.utilization}, Score:{p.score}}}" for p in shape
    )
    return f"[]config.UtilizationShapePoint{{{points}}}"


class VolumeBindingArgs(PluginArgs):
    #: How long PreBind waits for the PV controller to complete the bindings it asked for.
    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS
    shape: list[UtilizationShapePoint] | None = None

    def validate(self) -> None:
        """``ValidateVolumeBindingArgsWithOptions`` with VolumeCapacityPriority off."""
        errors = []
        if self.bind_timeout_seconds < 0:
            errors.append(
                invalid(
                    "bindTimeoutSeconds",
                    self.bind_timeout_seconds,
                    "invalid BindTimeoutSeconds, should not be a negative value",
                )
            )
        if self.shape is not None:
            errors.append(
                f"shape: Invalid value: {_go_shape(self.shape)}: "
                "unsupported when VolumeCapacityPriority feature is disabled"
            )
        raise_field_errors(errors)
