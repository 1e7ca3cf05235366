"""ImageLocality: prefer nodes that already hold the pod's container images (kube-scheduler's)."""

from koordsched.plugins.imagelocality.images import ImageStates, normalized_image_name
from koordsched.plugins.imagelocality.plugin import ImageLocality

__all__ = ["ImageLocality", "ImageStates", "normalized_image_name"]
