"""Metrics, tracing and health checks: what operators and dashboards see of the scheduler."""

from __future__ import annotations
