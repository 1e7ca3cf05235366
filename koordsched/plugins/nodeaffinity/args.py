"""NodeAffinityArgs (kubescheduler.config.k8s.io/v1) and its validation."""

from __future__ import annotations

from koordsched.api.core import NodeAffinity, NodeSelectorTerm
from koordsched.api.selectors import SelectorError, validate_node_selector_term
from koordsched.api.validation import INT32_MAX, INT32_MIN
from koordsched.config.catalog import PluginArgs
from koordsched.plugins.helper import invalid, raise_field_errors

_REQUIRED = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution"


def _is_empty(term: NodeSelectorTerm) -> bool:
    return not term.match_expressions and not term.match_fields


class NodeAffinityArgs(PluginArgs):
    """``addedAffinity`` is ANDed with every pod's own node affinity (required) or added to it (preferred)."""

    added_affinity: NodeAffinity | None = None

    def validate(self) -> None:
        """What ``ValidateNodeAffinityArgs`` rejects: a malformed added term, named by its path.

        Empty terms, and preferred terms of weight 0, are ignored upstream and so pass here.
        """
        affinity = self.added_affinity
        if affinity is None:
            return
        errors: list[str] = []
        required = affinity.required_during_scheduling_ignored_during_execution
        if required is not None:
            for i, term in enumerate(required.node_selector_terms):
                if _is_empty(term):
                    continue
                try:
                    validate_node_selector_term(term, i)
                except SelectorError as err:
                    errors.append(f"{_REQUIRED}.{err}")
        for i, pref in enumerate(affinity.preferred_during_scheduling_ignored_during_execution):
            if not INT32_MIN <= pref.weight <= INT32_MAX:
                # An int32 in Go, where a wider number fails to decode; here it overflowed the scores.
                errors.append(invalid(f"{_PREFERRED}[{i}].weight", pref.weight, "must fit in an int32"))
                continue
            if pref.weight == 0 or _is_empty(pref.preference):
                continue
            try:
                validate_node_selector_term(pref.preference, 0)
            except SelectorError as err:
                detail = str(err).removeprefix("nodeSelectorTerms[0].")
                errors.append(f"{_PREFERRED}[{i}].preference.{detail}")
        raise_field_errors(errors)
