"""koord-descheduler: Balance plugins (LowNodeLoad, GPU balance) and the MigrationController.

Its own layer, above the scheduler: it imports the scheduler core and its plugins (a pod is
only moved where the scheduler's own filters accept it) and is imported only by the
backends and the CLI. No I/O here, as in the scheduler: the backends feed the cluster in and
carry the evictions out.
"""
