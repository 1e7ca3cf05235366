"""The in-memory backend behind ``koordsched simulate``: manifests in, scheduled on virtual time.

``loader`` (manifests -> objects), ``port`` (the in-memory API server), ``runner``
(:func:`~koordsched.backends.sim.runner.simulate`), ``report`` (JSON and tables). Import the
module you need: the loader alone stays usable without the plugins and kernels.
"""
