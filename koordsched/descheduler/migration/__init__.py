"""MigrationController: PodMigrationJobs, their limits, arbitration and reconcile (spec 7.2)."""
