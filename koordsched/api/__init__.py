"""Kubernetes and Koordinator objects as msgspec Structs, and the value types scheduling reads."""
