"""Koordinator's NUMA topology manager: hint providers, hint merging per policy, and Admit."""
