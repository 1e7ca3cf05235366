"""Network-topology-aware gang scheduling (Koordinator v1.7, spec A): the layer tree built from
node labels (``tree``), the placement solver (``solver``), the per-gang-group plan and its hooks
into the scheduling cycle (``workflow``), selector scoring (``scoring``) and the status controller
(``status``)."""
