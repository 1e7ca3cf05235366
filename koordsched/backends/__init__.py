"""Backends: how the scheduling core meets a cluster (``sim``: in memory; ``kube``: an API server)."""
