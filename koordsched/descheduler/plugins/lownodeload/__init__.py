"""LowNodeLoad (Koordinator v1.6 Balance plugin, spec 7.1): moves pods off nodes whose measured
usage is over the high thresholds, onto nodes under the low ones."""

from koordsched.descheduler.plugins.lownodeload.args import LowNodeLoadArgs
from koordsched.descheduler.plugins.lownodeload.plugin import LowNodeLoad

__all__ = ["LowNodeLoad", "LowNodeLoadArgs"]
