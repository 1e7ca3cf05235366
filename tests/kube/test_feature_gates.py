"""Koordinator's flags on ``koordsched run``: --feature-gates, --v, --enable-network-topology-manager."""

from __future__ import annotations

import argparse
import logging

import pytest

from koordsched.backends.kube.app import koordinator_flag_notices, run_command
from koordsched.backends.kube.featuregates import (
    KOORDINATOR_GATES,
    FeatureGateError,
    gate_notices,
    parse_feature_gates,
)
from koordsched.backends.kube.flags import add_run_arguments, klog_level
from koordsched.cli import build_parser, main

#: Koordinator v1.6's scheduler gates (the spec's list), all off by default.
V16_GATES = {
    "ResizePod",
    "LazyReservationRestore",
    "MultiQuotaTree",
    "ElasticQuotaIgnorePodOverhead",
    "ElasticQuotaIgnoreTerminatingPod",
    "ElasticQuotaImmediateIgnoreTerminatingPod",
    "ElasticQuotaGuaranteeUsage",
    "DisableDefaultQuota",
    "SupportParentQuotaSubmitPod",
    "PriorityTransformer",
    "PreemptionPolicyTransformer",
}


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_run_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(
    ("values", "gates"),
    [
        (None, {}),
        ([""], {}),
        (["ResizePod=true"], {"ResizePod": True}),
        (["A=1,B=f, C = TRUE ,,D=False"], {"A": True, "B": False, "C": True, "D": False}),
        (["A=true,A=false"], {"A": False}),  # the later pair wins, within one value ...
        (["A=true,B=true", "A=false"], {"A": False, "B": True}),  # ... and across repeats
        (["A=t", "B=F"], {"A": True, "B": False}),
    ],
)
def test_parses_as_component_base_does(values: list[str] | None, gates: dict[str, bool]) -> None:
    assert parse_feature_gates(values) == gates


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "ResizePod",
            'invalid argument "ResizePod" for "--feature-gates" flag: missing bool value for ResizePod',
        ),
        (
            "A=true,B",
            'invalid argument "A=true,B" for "--feature-gates" flag: missing bool value for B',
        ),
        (
            "ResizePod=yes",
            'invalid argument "ResizePod=yes" for "--feature-gates" flag: invalid value of ResizePod=yes, '
            'err: strconv.ParseBool: parsing "yes": invalid syntax',
        ),
        (
            "A= ",
            'invalid argument "A= " for "--feature-gates" flag: invalid value of A=, '
            'err: strconv.ParseBool: parsing "": invalid syntax',
        ),
    ],
)
def test_malformed_values_get_kube_schedulers_error(value: str, message: str) -> None:
    with pytest.raises(FeatureGateError) as info:
        parse_feature_gates([value])
    assert str(info.value) == message


def test_the_table_is_koordinators_v16_scheduler_gates() -> None:
    assert set(KOORDINATOR_GATES) == V16_GATES


def test_each_gate_turned_on_is_named_with_what_koordsched_does() -> None:
    lines = gate_notices({"ResizePod": True, "MultiQuotaTree": False, "PriorityTransformer": True})
    assert lines == [
        "feature gate ResizePod=true is not implemented by koordsched, which runs as if it were off "
        f"(with it on, {KOORDINATOR_GATES['ResizePod']})",
        "feature gate PriorityTransformer=true is not implemented by koordsched, which runs as if it "
        f"were off (with it on, {KOORDINATOR_GATES['PriorityTransformer']})",
    ]
    # Off is each gate's default, which is how koordsched runs: nothing to say.
    assert gate_notices(dict.fromkeys(V16_GATES, False)) == []


def test_an_unknown_gate_is_named_and_ignored() -> None:
    assert gate_notices({"TopologyAwareHints": True, "Foo": False}) == [
        "feature gate TopologyAwareHints=true is not recognised by koordsched and is ignored",
        "feature gate Foo=false is not recognised by koordsched and is ignored",
    ]


def test_run_flags_give_the_notices() -> None:
    args = parse(
        "--feature-gates=ResizePod=true,CSIStorageCapacity=true",
        "--feature-gates=DisableDefaultQuota=false",
        "--enable-network-topology-manager=true",
    )
    notices = koordinator_flag_notices(args)
    # --enable-network-topology-manager is honoured (the network topology tree): no notice.
    assert len(notices) == 2
    assert notices[0].startswith("feature gate ResizePod=true is not implemented by koordsched")
    assert notices[1] == "feature gate CSIStorageCapacity=true is not recognised by koordsched and is ignored"
    assert koordinator_flag_notices(parse("--enable-network-topology-manager=false")) == ()
    assert koordinator_flag_notices(parse()) == ()


def test_a_malformed_feature_gate_exits_2(caplog: pytest.LogCaptureFixture) -> None:
    args = build_parser().parse_args(["run", "--feature-gates=ResizePod"])
    assert run_command(args) == 2
    assert 'invalid argument "ResizePod" for "--feature-gates" flag: missing bool value for ResizePod' in (
        caplog.text
    )
    assert [r.levelno for r in caplog.records if "--feature-gates" in r.getMessage()] == [logging.ERROR]


def test_cli_refuses_a_malformed_feature_gate_with_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--feature-gates=ResizePod=maybe", "--kubeconfig=/nonexistent"]) == 2
    assert (
        'invalid argument "ResizePod=maybe" for "--feature-gates" flag: invalid value of ResizePod=maybe, '
        'err: strconv.ParseBool: parsing "maybe": invalid syntax' in capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("text", "level"), [("0", 0), ("2", 2), ("+4", 4), ("10", 10), ("-1", -1), ("2147483647", 2**31 - 1)]
)
def test_v_is_a_klog_level(text: str, level: int) -> None:
    assert klog_level(text) == level
    assert parse(f"--v={text}").verbosity == level


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("x", "invalid syntax"),
        ("", "invalid syntax"),
        (" 2", "invalid syntax"),
        ("1_0", "invalid syntax"),
        ("2147483648", "value out of range"),
    ],
)
def test_v_refuses_what_klog_refuses(text: str, why: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as info:
        klog_level(text)
    assert str(info.value) == (
        f'invalid argument "{text}" for "-v, --v" flag: strconv.ParseInt: parsing "{text}": {why}'
    )


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        (["run", "--v=4"], logging.DEBUG),
        (["run", "--v=2"], logging.INFO),
        (["--log-level=error", "run", "--v=4"], logging.ERROR),  # --log-level wins
        (["run", "--v=4", "--log-level=warning"], logging.WARNING),
        (["run"], logging.WARNING),
    ],
)
def test_cli_sets_the_log_level_from_v(argv: list[str], level: int, monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    monkeypatch.setattr(root, "level", root.level)  # restored after the test
    seen: list[int] = []

    def fake_run(args: argparse.Namespace) -> int:
        seen.append(root.level)
        return 0

    monkeypatch.setattr("koordsched.cli._cmd_run", fake_run)
    assert main(argv) == 0
    assert seen == [level]


def test_cli_refuses_a_bad_v_with_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--v=loud"]) == 2
    assert 'invalid argument "loud" for "-v, --v" flag: strconv.ParseInt: parsing "loud": invalid syntax' in (
        capsys.readouterr().err
    )


def test_network_topology_manager_flag_reaches_the_run_flags() -> None:
    from koordsched.backends.kube.scheduler_flags import run_flags

    assert run_flags(parse("--enable-network-topology-manager=true")).network_topology_manager is True
    assert run_flags(parse("--enable-network-topology-manager=false")).network_topology_manager is False
    assert run_flags(parse()).network_topology_manager is False


# --- DevicePluginAdaption (Koordinator v1.7, spec D): implemented, off by default ---------------


def test_device_plugin_adaption_is_implemented_and_off_by_default() -> None:
    from koordsched.backends.kube.featuregates import DEVICE_PLUGIN_ADAPTION, IMPLEMENTED_GATES
    from koordsched.plugins.deviceshare import DEVICE_PLUGIN_ADAPTION as PLUGIN_GATE

    assert IMPLEMENTED_GATES == {"DevicePluginAdaption": False}
    assert DEVICE_PLUGIN_ADAPTION == PLUGIN_GATE == "DevicePluginAdaption"
    # Honoured as set: no start-up warning either way.
    assert gate_notices({"DevicePluginAdaption": True}) == []
    assert gate_notices({"DevicePluginAdaption": False, "Foo": True}) == [
        "feature gate Foo=true is not recognised by koordsched and is ignored"
    ]


@pytest.mark.parametrize(
    ("argv", "on"),
    [
        ((), False),
        (("--feature-gates=DevicePluginAdaption=true",), True),
        (("--feature-gates=DevicePluginAdaption=true", "--feature-gates=DevicePluginAdaption=false"), False),
        (("--feature-gates=ResizePod=true,DevicePluginAdaption=1",), True),
    ],
)
def test_run_flags_carry_the_gate_to_the_plugins(argv: tuple[str, ...], on: bool) -> None:
    from koordsched.backends.kube.scheduler_flags import run_flags
    from koordsched.plugins.deviceshare import DeviceShare
    from koordsched.plugins.registry import in_tree_registry

    flags = run_flags(parse(*argv))
    assert flags.feature_gates.get("DevicePluginAdaption", False) is on
    spec = in_tree_registry(feature_gates=flags.feature_gates)["DeviceShare"]
    # Off: the plugin class itself builds it (as before the gate existed); on: a factory giving it the gate.
    assert (spec.factory is not DeviceShare) is on
