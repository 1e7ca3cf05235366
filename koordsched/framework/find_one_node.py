"""FindOneNode (a koord-scheduler extension, spec A.3): after PreFilter, a plugin may name the one
node a pod is to be tried on, e.g. the node a gang's placement plan gave it."""

from __future__ import annotations

from collections.abc import Sequence

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import FindOneNodePlugin, Rows
from koordsched.framework.plugin_calls import failure
from koordsched.framework.status import Code, PluginError, Status
from koordsched.framework.types import PodInfo

_SKIP = Status(Code.SKIP)


def run_find_one_node(
    plugins: Sequence[FindOneNodePlugin], state: CycleState, pod: PodInfo, rows: Rows
) -> tuple[str | None, Status]:
    """The first plugin's answer that is not ``Skip`` (named after it); ``Skip`` when none answers."""
    for plugin in plugins:
        try:
            node, status = plugin.find_one_node(state, pod, rows)
        except PluginError as err:
            return None, err.status.with_plugin(plugin.name)
        except Exception as err:  # a bug in the plugin: named, in the framework's one wording
            return None, failure("FindOneNode", plugin.name, err)
        if status.code is Code.SKIP:
            continue
        return node, status if status.plugin else status.with_plugin(plugin.name)
    return None, _SKIP
