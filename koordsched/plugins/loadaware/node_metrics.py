"""LoadAware's NodeMetric views, one per node, parsed again only when the object is replaced.

A NodeMetric with a malformed quantity, duration or timestamp is logged once (naming the
node and the field) and treated as absent: the node is filtered and scored as if koordlet
were not installed there, and the scheduler goes on.
"""

from __future__ import annotations

import logging
from typing import Any

from koordsched.api.node_metric import MetricError, MetricView, parse_node_metric
from koordsched.api.slo import NodeMetric

log = logging.getLogger(__name__)


class NodeMetricStore:
    """Node name -> the view of its NodeMetric, re-parsed only when the object is replaced."""

    def __init__(self) -> None:
        self._views: dict[str, tuple[Any, MetricView | None]] = {}

    def view(self, name: str, obj: Any) -> MetricView | None:
        """The view of ``obj`` (the node's NodeMetric, or None); None when absent or unreadable."""
        if obj is None:
            self._views.pop(name, None)
            return None
        known = self._views.get(name)
        if known is not None and known[0] is obj:
            return known[1]
        view: MetricView | None
        if not isinstance(obj, NodeMetric):
            log.error("NodeMetric %s: unexpected object of type %s, ignored", name, type(obj).__name__)
            view = None
        else:
            try:
                view = parse_node_metric(obj)
            except MetricError as err:
                log.error(
                    "NodeMetric %s: %s; LoadAwareScheduling treats the node as having no metric", name, err
                )
                view = None
        self._views[name] = (obj, view)
        return view
