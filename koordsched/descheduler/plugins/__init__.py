"""Descheduler plugins, one package each, named as Koordinator's (and ``gpubalance``, ours)."""
