"""kube-scheduler v1.28's in-tree plugins, one package per plugin as upstream lays them out.

:func:`koordsched.plugins.registry.in_tree_registry` lists them for the framework.
"""
