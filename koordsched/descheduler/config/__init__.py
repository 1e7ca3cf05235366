"""``DeschedulerConfiguration`` (``descheduler/v1alpha2``): decode, default, validate."""
