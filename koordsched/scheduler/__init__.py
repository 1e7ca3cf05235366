"""Queue, cache and the scheduling/binding cycles: the I/O-free scheduler core."""
