"""Koordinator's ElasticQuota plugin (spec 4.5): see :mod:`~koordsched.plugins.elasticquota.plugin`."""

from koordsched.plugins.elasticquota.args import ElasticQuotaArgs
from koordsched.plugins.elasticquota.messages import quantity, resource_list
from koordsched.plugins.elasticquota.plugin import (
    NAME,
    ElasticQuotaPlugin,
    QuotaSummary,
    summaries_of,
)
from koordsched.plugins.elasticquota.revoke import Revocation
from koordsched.plugins.elasticquota.status import StatusUpdate, quantities, quota_values, status_update

ElasticQuota = ElasticQuotaPlugin

__all__ = [
    "NAME",
    "ElasticQuota",
    "ElasticQuotaArgs",
    "ElasticQuotaPlugin",
    "QuotaSummary",
    "Revocation",
    "StatusUpdate",
    "quantities",
    "quantity",
    "quota_values",
    "resource_list",
    "status_update",
    "summaries_of",
]
