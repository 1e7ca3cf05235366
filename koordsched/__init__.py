"""koordsched: a Kubernetes scheduler in Python, drop-in for Koordinator's koord-scheduler."""

__version__ = "0.1.0"
