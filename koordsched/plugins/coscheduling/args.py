"""CoschedulingArgs (Koordinator v1.6, with v1.7's ``enablePreemption``): defaults and validation."""

from __future__ import annotations

from koordsched.api.durations import DurationError, parse_duration
from koordsched.config.catalog import ArgsError, PluginArgs
from koordsched.plugins.helper import invalid, raise_field_errors

#: ``defaultTimeout``'s default: how long a gang member waits at Permit for its gang.
DEFAULT_TIMEOUT = "600s"


class CoschedulingArgs(PluginArgs):
    #: A Go duration: the Permit wait of a gang that names none of its own.
    default_timeout: str = DEFAULT_TIMEOUT
    #: Workers of the PodGroup status controller.
    controller_workers: int = 1
    #: Skip the schedule-cycle check of BeforePreFilter (members may retry in any order).
    skip_check_schedule_cycle: bool = False
    #: Job-level preemption in PostFilter: victims for the whole gang group (Koordinator v1.7).
    enable_preemption: bool = False
    #: Plan network-topology gangs (spec A): Coscheduling acts as the FindOneNode plugin.
    aware_network_topology: bool = False

    def default_timeout_seconds(self) -> float:
        try:
            return parse_duration(self.default_timeout)
        except DurationError as err:
            raise ArgsError(invalid("defaultTimeout", self.default_timeout, str(err))) from None

    def validate(self) -> None:
        """Koordinator's ``ValidateCoschedulingArgs``: no negative timeout, at least one worker."""
        errors = []
        try:
            timeout = parse_duration(self.default_timeout)
        except DurationError as err:
            errors.append(invalid("defaultTimeout", self.default_timeout, str(err)))
        else:
            if timeout < 0:
                errors.append(invalid("defaultTimeout", self.default_timeout, "must not be negative"))
        if self.controller_workers < 1:
            errors.append(invalid("controllerWorkers", self.controller_workers, "must be at least 1"))
        raise_field_errors(errors)
