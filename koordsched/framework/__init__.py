"""The scheduling framework: extension points, Status, CycleState, plugin registry and runtime."""
