"""``--feature-gates``: read as component-base reads it, and what koordsched does with each gate.

The value is ``Name=bool`` pairs separated by commas (blank items skipped, names and values
trimmed, Go's ``strconv.ParseBool`` for the value); the flag may repeat, later pairs winning.
A malformed pair is refused with the error kube-scheduler prints for it.

koord-scheduler refuses a gate it does not know; koordsched knows only Koordinator v1.6's
scheduler gates (:data:`KOORDINATOR_GATES`), while Koordinator's manifests may pass kube's own, so
an unknown name is named in a warning and ignored instead. A known gate turned on that koordsched
does not implement is named too, with what it would change: koordsched runs as if it were off.
The gates koordsched implements (:data:`IMPLEMENTED_GATES`, Koordinator v1.7's
``DevicePluginAdaption``) are honoured as set, without a warning.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from koordsched.api.koordinator import FEATURE_DEVICE_PLUGIN_ADAPTION
from koordsched.backends.kube.serving.options import OptionsError

__all__ = [
    "DEVICE_PLUGIN_ADAPTION",
    "IMPLEMENTED_GATES",
    "KOORDINATOR_GATES",
    "FeatureGateError",
    "gate_notices",
    "parse_feature_gates",
]

FLAG = "--feature-gates"

_GO_TRUE = frozenset(("1", "t", "T", "TRUE", "true", "True"))
_GO_FALSE = frozenset(("0", "f", "F", "FALSE", "false", "False"))

#: Koordinator v1.6's scheduler gates (all off by default) -> what turning it on changes there.
#: None of them is implemented: koordsched behaves as each one's default (off) state.
KOORDINATOR_GATES: Mapping[str, str] = {
    "ResizePod": "DeviceShare grows a reserve pod and its Reservation by the devices allocated to it",
    "LazyReservationRestore": "reservations are restored lazily, in AfterPreFilter and Filter, "
    "instead of in PreFilter",
    "MultiQuotaTree": "ElasticQuotas labelled with a tree ID form quota trees of their own",
    "ElasticQuotaIgnorePodOverhead": "a pod's overhead is left out of its ElasticQuota request",
    "ElasticQuotaIgnoreTerminatingPod": "terminating pods no longer count as ElasticQuota used",
    "ElasticQuotaImmediateIgnoreTerminatingPod": "terminating pods stop counting as ElasticQuota "
    "used as soon as they are deleted",
    "ElasticQuotaGuaranteeUsage": "ElasticQuota guarantees a quota's min to its allocated usage",
    "DisableDefaultQuota": "pods without a quota are not put into the default ElasticQuota",
    "SupportParentQuotaSubmitPod": "pods may be submitted to a parent ElasticQuota",
    "PriorityTransformer": "pod priorities are transformed by Koordinator's priority classes",
    "PreemptionPolicyTransformer": "the scheduling.koordinator.sh/preemption-policy label sets a "
    "pod's preemptionPolicy",
}


#: Koordinator v1.7 (Alpha, off by default): DeviceShare's PreBind writes the vendor device
#: plugins' annotations (and takes Cambricon/MetaX node locks).
DEVICE_PLUGIN_ADAPTION = FEATURE_DEVICE_PLUGIN_ADAPTION

#: The gates koordsched implements -> their default.
IMPLEMENTED_GATES: Mapping[str, bool] = {DEVICE_PLUGIN_ADAPTION: False}


class FeatureGateError(OptionsError):
    """A malformed ``--feature-gates`` value (exit status 2, as for a bad serving flag)."""


def _go_bool(text: str) -> bool | None:
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    return None


def _parse_one(value: str, into: dict[str, bool]) -> None:
    for item in value.split(","):
        if not item:
            continue
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep:
            raise FeatureGateError(_invalid(value, f"missing bool value for {name}"))
        raw = raw.strip()
        parsed = _go_bool(raw)
        if parsed is None:
            raise FeatureGateError(
                _invalid(
                    value,
                    f'invalid value of {name}={raw}, err: strconv.ParseBool: parsing "{raw}": invalid syntax',
                )
            )
        into[name] = parsed


def _invalid(value: str, why: str) -> str:
    # pflag's wording for a value its flag refuses, as kube-scheduler prints it.
    return f'invalid argument "{value}" for "{FLAG}" flag: {why}'


def parse_feature_gates(values: Iterable[str] | None) -> dict[str, bool]:
    """Each use of the flag, in order -> the gates set; raises :class:`FeatureGateError`."""
    gates: dict[str, bool] = {}
    for value in values or ():
        _parse_one(value, gates)
    return gates


def gate_notices(gates: Mapping[str, bool]) -> list[str]:
    """One line per gate koordsched does not honour as set: the start-up warnings."""
    lines = []
    for name, on in gates.items():
        if name in IMPLEMENTED_GATES:
            continue
        effect = KOORDINATOR_GATES.get(name)
        if effect is None:
            lines.append(
                f"feature gate {name}={str(on).lower()} is not recognised by koordsched and is ignored"
            )
        elif on:
            lines.append(
                f"feature gate {name}=true is not implemented by koordsched, which runs as if it were "
                f"off (with it on, {effect})"
            )
    return lines
