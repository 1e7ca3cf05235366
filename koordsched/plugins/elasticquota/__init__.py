"""Koordinator's ElasticQuota plugin (spec 4.5): see :mod:`~koordsched.plugins.elasticquota.plugin`."""

from koordsched.plugins.elasticquota.args import ElasticQuotaArgs
from koordsched.plugins.elasticquota.messages import quantity, resource_list
from koordsched.plugins.elasticquota.plugin import NAME, ElasticQuotaPlugin, QuotaSummary, summaries_of

ElasticQuota = ElasticQuotaPlugin

__all__ = [
    "NAME",
    "ElasticQuota",
    "ElasticQuotaArgs",
    "ElasticQuotaPlugin",
    "QuotaSummary",
    "quantity",
    "resource_list",
    "summaries_of",
]
