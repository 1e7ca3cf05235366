"""``koordsched run`` takes every kube-scheduler 1.28 flag, with kube-scheduler's meaning.

One row per flag of kube-scheduler 1.28's ``--help`` (cmd/kube-scheduler/app/options and the
component-base, apiserver and client-go option sets it adds): an example value and what it
must do here (a parsed value, a configuration field, a serving option, or a start-up warning
naming it as not honoured). Then kube-scheduler's precedence between flags and ``--config``,
usage errors, ``--write-config-to`` and ``--master``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordsched.backends.kube.app import kube_scheduler_flag_notices, run_scheduler
from koordsched.backends.kube.client import load_configuration
from koordsched.backends.kube.flags import add_run_arguments, serving_options
from koordsched.backends.kube.scheduler_flags import (
    RunFlags,
    complete_config,
    deprecation_warnings,
    run_flags,
)
from koordsched.backends.kube.serving.options import OptionsError
from koordsched.cli import build_parser, main
from koordsched.config.default_profile import default_profile_path
from koordsched.config.errors import ConfigError
from koordsched.config.load import load_config, read_config
from koordsched.config.types import KubeSchedulerConfiguration
from koordsched.config.validate import resolve_leader_election
from koordsched.observability.logs import vmodule_pairs
from tests.kube.fake_apiserver import NODES, PODS, FakeApiServer, node_json, pod_json
from tests.kube.helpers import eventually
from tests.kube.test_app import free_port, no_numba_warm_up, write_files

__all__ = ["no_numba_warm_up"]  # the fixture, used here as in test_app (no numba warm-up)

#: kube-scheduler 1.28's flags, as its --help lists them (the klog flags were removed in 1.26,
#: --lock-object-name/-namespace in 1.28).
KUBE_SCHEDULER_1_28_FLAGS = (
    "allow-metric-labels",
    "allow-metric-labels-manifest",
    "authentication-kubeconfig",
    "authentication-skip-lookup",
    "authentication-token-webhook-cache-ttl",
    "authentication-tolerate-lookup-failure",
    "authorization-always-allow-paths",
    "authorization-kubeconfig",
    "authorization-webhook-cache-authorized-ttl",
    "authorization-webhook-cache-unauthorized-ttl",
    "bind-address",
    "cert-dir",
    "client-ca-file",
    "config",
    "contention-profiling",
    "disabled-metrics",
    "feature-gates",
    "help",
    "http2-max-streams-per-connection",
    "kube-api-burst",
    "kube-api-content-type",
    "kube-api-qps",
    "kubeconfig",
    "leader-elect",
    "leader-elect-lease-duration",
    "leader-elect-renew-deadline",
    "leader-elect-resource-lock",
    "leader-elect-resource-name",
    "leader-elect-resource-namespace",
    "leader-elect-retry-period",
    "log-flush-frequency",
    "log-json-info-buffer-size",
    "log-json-split-stream",
    "logging-format",
    "master",
    "permit-address-sharing",
    "permit-port-sharing",
    "pod-max-in-unschedulable-pods-duration",
    "profiling",
    "requestheader-allowed-names",
    "requestheader-client-ca-file",
    "requestheader-extra-headers-prefix",
    "requestheader-group-headers",
    "requestheader-username-headers",
    "secure-port",
    "show-hidden-metrics-for-version",
    "tls-cert-file",
    "tls-cipher-suites",
    "tls-min-version",
    "tls-private-key-file",
    "tls-sni-cert-key",
    "v",
    "version",
    "vmodule",
    "write-config-to",
)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(exit_on_error=False, allow_abbrev=False)
    add_run_arguments(parser)
    return parser.parse_args(list(argv))


def default_raw() -> KubeSchedulerConfiguration:
    return read_config(default_profile_path())


def dig(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


# (flag, argv, kind, target, expected). kind: "arg" (the parsed attribute), "config" (the
# configuration field after the flags apply, no --config), "serving" (serving_options),
# "flags" (RunFlags), "unhonoured" (named in the one start-up warning with this text).
MATRIX: list[tuple[str, tuple[str, ...], str, str, Any]] = [
    (
        "allow-metric-labels",
        ("--allow-metric-labels=m,l=v1,v2",),
        "unhonoured",
        "",
        "--allow-metric-labels=m,l=v1,v2",
    ),
    (
        "allow-metric-labels-manifest",
        ("--allow-metric-labels-manifest", "/m.yaml"),
        "unhonoured",
        "",
        "/m.yaml",
    ),
    (
        "authentication-kubeconfig",
        ("--authentication-kubeconfig=/k",),
        "serving",
        "authentication.kubeconfig",
        "/k",
    ),
    (
        "authentication-skip-lookup",
        ("--authentication-skip-lookup",),
        "serving",
        "authentication.skip_lookup",
        True,
    ),
    (
        "authentication-token-webhook-cache-ttl",
        ("--authentication-token-webhook-cache-ttl=1m",),
        "serving",
        "authentication.cache_ttl",
        60.0,
    ),
    (
        "authentication-tolerate-lookup-failure",
        ("--authentication-tolerate-lookup-failure=false",),
        "serving",
        "authentication.tolerate_lookup_failure",
        False,
    ),
    (
        "authorization-always-allow-paths",
        ("--authorization-always-allow-paths=/a,/b",),
        "serving",
        "authorization.always_allow_paths",
        ("/a", "/b"),
    ),
    (
        "authorization-kubeconfig",
        ("--authorization-kubeconfig", "/z"),
        "serving",
        "authorization.kubeconfig",
        "/z",
    ),
    (
        "authorization-webhook-cache-authorized-ttl",
        ("--authorization-webhook-cache-authorized-ttl=3s",),
        "serving",
        "authorization.allow_cache_ttl",
        3.0,
    ),
    (
        "authorization-webhook-cache-unauthorized-ttl",
        ("--authorization-webhook-cache-unauthorized-ttl=4s",),
        "serving",
        "authorization.deny_cache_ttl",
        4.0,
    ),
    ("bind-address", ("--bind-address=127.0.0.1",), "serving", "bind_address", "127.0.0.1"),
    ("cert-dir", ("--cert-dir=/certs",), "serving", "cert_dir", "/certs"),
    ("client-ca-file", ("--client-ca-file=/ca",), "serving", "authentication.client_ca_file", "/ca"),
    ("config", ("--config=/c.yaml",), "flags", "config_given", True),
    (
        "contention-profiling",
        ("--contention-profiling=false",),
        "config",
        "enable_contention_profiling",
        False,
    ),
    (
        "disabled-metrics",
        ("--disabled-metrics=a_total,b_total",),
        "unhonoured",
        "",
        "--disabled-metrics=a_total,b_total",
    ),
    ("feature-gates", ("--feature-gates=ResizePod=true",), "arg", "feature_gates", ["ResizePod=true"]),
    ("help", ("--help",), "help", "", None),
    (
        "http2-max-streams-per-connection",
        ("--http2-max-streams-per-connection=100",),
        "unhonoured",
        "",
        "=100",
    ),
    ("kube-api-burst", ("--kube-api-burst=300",), "config", "client_connection.burst", 300),
    (
        "kube-api-content-type",
        ("--kube-api-content-type=application/json",),
        "config",
        "client_connection.content_type",
        "application/json",
    ),
    ("kube-api-qps", ("--kube-api-qps=12.5",), "config", "client_connection.qps", 12.5),
    ("kubeconfig", ("--kubeconfig=/kc",), "arg", "kubeconfig", "/kc"),
    ("leader-elect", ("--leader-elect=false",), "config", "leader_election.leader_elect", False),
    (
        "leader-elect-lease-duration",
        ("--leader-elect-lease-duration=90s",),
        "config",
        "leader_election.lease_duration",
        "1m30s",
    ),
    (
        "leader-elect-renew-deadline",
        ("--leader-elect-renew-deadline", "20s"),
        "config",
        "leader_election.renew_deadline",
        "20s",
    ),
    (
        "leader-elect-resource-lock",
        ("--leader-elect-resource-lock=leases",),
        "config",
        "leader_election.resource_lock",
        "leases",
    ),
    (
        "leader-elect-resource-name",
        ("--leader-elect-resource-name=mine",),
        "config",
        "leader_election.resource_name",
        "mine",
    ),
    (
        "leader-elect-resource-namespace",
        ("--leader-elect-resource-namespace=ns",),
        "config",
        "leader_election.resource_namespace",
        "ns",
    ),
    (
        "leader-elect-retry-period",
        ("--leader-elect-retry-period=500ms",),
        "config",
        "leader_election.retry_period",
        "500ms",
    ),
    ("log-flush-frequency", ("--log-flush-frequency=10s",), "arg", "log_flush_frequency", "10s"),
    (
        "log-json-info-buffer-size",
        ("--log-json-info-buffer-size=1Mi",),
        "unhonoured",
        "",
        "--log-json-info-buffer-size=1Mi",
    ),
    ("log-json-split-stream", ("--log-json-split-stream",), "unhonoured", "", "--log-json-split-stream=true"),
    ("logging-format", ("--logging-format=json",), "arg", "logging_format", "json"),
    ("master", ("--master=https://10.0.0.1:6443",), "flags", "master", "https://10.0.0.1:6443"),
    (
        "permit-address-sharing",
        ("--permit-address-sharing",),
        "unhonoured",
        "",
        "--permit-address-sharing=true",
    ),
    ("permit-port-sharing", ("--permit-port-sharing=true",), "unhonoured", "", "--permit-port-sharing=true"),
    (
        "pod-max-in-unschedulable-pods-duration",
        ("--pod-max-in-unschedulable-pods-duration=1m",),
        "flags",
        "pod_max_in_unschedulable",
        60.0,
    ),
    ("profiling", ("--profiling=false",), "config", "enable_profiling", False),
    (
        "requestheader-allowed-names",
        ("--requestheader-allowed-names=front-proxy",),
        "unhonoured",
        "",
        "front-proxy",
    ),
    (
        "requestheader-client-ca-file",
        ("--requestheader-client-ca-file=/rh",),
        "unhonoured",
        "",
        "--requestheader-client-ca-file=/rh",
    ),
    (
        "requestheader-extra-headers-prefix",
        ("--requestheader-extra-headers-prefix=x-e-",),
        "unhonoured",
        "",
        "x-e-",
    ),
    ("requestheader-group-headers", ("--requestheader-group-headers=x-g",), "unhonoured", "", "x-g"),
    ("requestheader-username-headers", ("--requestheader-username-headers=x-u",), "unhonoured", "", "x-u"),
    ("secure-port", ("--secure-port=10260",), "serving", "secure_port", 10260),
    (
        "show-hidden-metrics-for-version",
        ("--show-hidden-metrics-for-version=1.27",),
        "arg",
        "show_hidden_metrics_for_version",
        "1.27",
    ),
    ("tls-cert-file", ("--tls-cert-file=/c", "--tls-private-key-file=/k"), "serving", "tls_cert_file", "/c"),
    (
        "tls-cipher-suites",
        ("--tls-cipher-suites=TLS_AES_128_GCM_SHA256",),
        "unhonoured",
        "",
        "TLS_AES_128_GCM_SHA256",
    ),
    (
        "tls-min-version",
        ("--tls-min-version=VersionTLS13",),
        "unhonoured",
        "",
        "--tls-min-version=VersionTLS13",
    ),
    (
        "tls-private-key-file",
        ("--tls-cert-file=/c", "--tls-private-key-file=/k"),
        "serving",
        "tls_private_key_file",
        "/k",
    ),
    (
        "tls-sni-cert-key",
        ("--tls-sni-cert-key=a.crt,a.key:a.example",),
        "unhonoured",
        "",
        "a.crt,a.key:a.example",
    ),
    ("v", ("--v=2",), "arg", "verbosity", 2),
    ("version", ("--version=false",), "arg", "version", "false"),
    ("vmodule", ("--vmodule=sched*=4,port=2",), "arg", "vmodule", "sched*=4,port=2"),
    ("write-config-to", ("--write-config-to=/out.yaml",), "flags", "write_config_to", "/out.yaml"),
]


def test_the_matrix_has_one_row_per_kube_scheduler_flag() -> None:
    assert [row[0] for row in MATRIX] == list(KUBE_SCHEDULER_1_28_FLAGS)


def test_run_help_lists_every_kube_scheduler_flag() -> None:
    run = build_parser()._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr]
    options = {opt for action in run._actions for opt in action.option_strings}
    assert {f"--{name}" for name in KUBE_SCHEDULER_1_28_FLAGS} <= options


@pytest.mark.parametrize(("flag", "argv", "kind", "target", "expected"), MATRIX, ids=[r[0] for r in MATRIX])
def test_each_flag_has_kube_schedulers_meaning(
    flag: str,
    argv: tuple[str, ...],
    kind: str,
    target: str,
    expected: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if kind == "help":
        with pytest.raises(SystemExit) as exit_:
            parse(*argv)
        assert exit_.value.code == 0 and "--leader-elect" in capsys.readouterr().out
        return
    args = parse(*argv)
    flags = run_flags(args)
    notice = flags.notice()
    if kind == "arg":
        assert getattr(args, target) == expected
    elif kind == "config":
        assert dig(flags.apply(default_raw()), target) == expected
    elif kind == "serving":
        assert dig(serving_options(args), target) == expected
    elif kind == "flags":
        assert getattr(flags, target) == expected
    else:
        assert kind == "unhonoured"
        assert notice is not None and f"--{flag}=" in notice and expected in notice
        return
    # A flag with its effect is not named as ignored.
    assert notice is None or f"--{flag}=" not in notice


def test_defaults_leave_the_config_as_it_is_and_warn_of_nothing() -> None:
    args = parse()
    flags = run_flags(args)
    assert flags.apply(default_raw()) == default_raw()
    assert flags.notice() is None and deprecation_warnings(args) == []
    assert run_flags(parse("--tls-min-version=", "--disabled-metrics=")).notice() is None
    assert (args.logging_format, args.vmodule, args.log_flush_frequency) == ("text", "", "5s")
    assert flags.pod_max_in_unschedulable is None and (flags.master, flags.write_config_to) == ("", "")


def test_pflag_bool_and_repeat_syntax() -> None:
    assert run_flags(parse("--leader-elect")).leader_election == {"leader_elect": True}
    assert run_flags(parse("--leader-elect", "F")).leader_election == {"leader_elect": False}
    assert parse("--vmodule=a=1", "--vmodule", "b=2").vmodule == "a=1,b=2"
    assert parse("--disabled-metrics=a", "--disabled-metrics=b").disabled_metrics == ("a", "b")
    assert parse("--allow-metric-labels=m,l=a", "--allow-metric-labels=n,k=b").allow_metric_labels == {
        "m,l": "a",
        "n,k": "b",
    }
    assert parse("--kube-api-burst=0x10").kube_api_burst == 16
    assert parse("-v", "3").verbosity == 3
    assert vmodule_pairs("a=1,,b*=22,") == (("a", 1), ("b*", 22))


# --- precedence (Options.ApplyTo) ---------------------------------------------------------


def test_with_config_the_leader_election_flags_still_apply_and_the_deprecated_ones_do_not() -> None:
    flags = run_flags(
        parse(
            "--config=/c.yaml",
            "--leader-elect-resource-name=lease",
            "--leader-elect=false",
            "--kube-api-qps=5",
            "--profiling=false",
            "--lock-object-namespace=old",
        )
    )
    raw = flags.apply(default_raw())
    assert (raw.leader_election.resource_name, raw.leader_election.leader_elect) == ("lease", False)
    assert raw.client_connection.qps == default_raw().client_connection.qps
    assert raw.enable_profiling is True
    assert raw.leader_election.resource_namespace == "koordinator-system"
    notice = flags.notice()
    assert notice is not None
    assert "ignored because --config is given" in notice
    for name in ("--kube-api-qps", "--profiling", "--lock-object-namespace"):
        assert name in notice


def test_without_config_the_leader_election_flags_win_over_lock_object() -> None:
    args = parse(
        "--lock-object-name=old", "--lock-object-namespace=old-ns", "--leader-elect-resource-name=new"
    )
    raw = run_flags(args).apply(default_raw())
    assert (raw.leader_election.resource_name, raw.leader_election.resource_namespace) == ("new", "old-ns")
    assert deprecation_warnings(args) == [
        "Flag --lock-object-name has been deprecated, kube-scheduler 1.28 removed it; use "
        "--leader-elect-resource-name (or leaderElection.resourceName in --config) instead",
        "Flag --lock-object-namespace has been deprecated, kube-scheduler 1.28 removed it; use "
        "--leader-elect-resource-namespace (or leaderElection.resourceNamespace in --config) instead",
    ]


def test_every_flag_without_effect_is_in_one_warning() -> None:
    flags = run_flags(
        parse("--tls-min-version=VersionTLS13", "--disabled-metrics=x", "--config=/c", "--kube-api-qps=1")
    )
    (line,) = kube_scheduler_flag_notices(flags)
    assert (
        "--tls-min-version=VersionTLS13" in line
        and "--disabled-metrics=x" in line
        and "--kube-api-qps" in line
    )


@pytest.mark.parametrize(
    ("lock", "message"),
    [
        ("endpoints", "endpoints lock is removed, migrate to endpointsleases (using version v0.27.x)"),
        ("configmaps", "configmaps lock is removed, migrate to configmapsleases (using version v0.27.x)"),
        ("endpointsleases", "endpointsleases lock is removed, migrate to leases"),
        ("configmapsleases", "configmapsleases lock is removed, migrated to leases"),
        ("etcd", "Invalid lock-type etcd"),
    ],
)
def test_a_lock_other_than_leases_fails_as_kube_scheduler_does(lock: str, message: str) -> None:
    raw = run_flags(parse(f"--leader-elect-resource-lock={lock}")).apply(default_raw())
    with pytest.raises(
        ConfigError, match="couldn't create resource lock: " + message.replace("(", r"\(").replace(")", r"\)")
    ):
        resolve_leader_election(raw.leader_election)
    # kube-scheduler builds the lock only when it elects.
    off = run_flags(parse(f"--leader-elect-resource-lock={lock}", "--leader-elect=false")).apply(
        default_raw()
    )
    assert resolve_leader_election(off.leader_election).resource_lock == lock


def test_pod_max_in_unschedulable_reaches_the_resolved_config() -> None:
    from koordsched.plugins.registry import in_tree_registry

    config = load_config(default_profile_path(), in_tree_registry())
    assert config.pod_max_in_unschedulable_pods_duration == 300.0
    flags = run_flags(parse("--pod-max-in-unschedulable-pods-duration=45s"))
    assert complete_config(config, flags).pod_max_in_unschedulable_pods_duration == 45.0


# --- usage errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--bogus",), "unrecognized arguments: --bogus"),
        (("--leader",), "unrecognized arguments: --leader"),  # no abbreviations, as pflag
        (("--logging-format=xml",), 'format: Invalid value: "xml": Unsupported log format'),
        (
            ("--vmodule=sched",),
            'invalid argument "sched" for "--vmodule" flag: "sched" does not have the pattern=N format',
        ),
        (("--vmodule=a=x",), 'parsing verbosity in "a=x": strconv.ParseUint: parsing "x": invalid syntax'),
        (
            ("--kube-api-qps=fast",),
            'invalid argument "fast" for "--kube-api-qps" flag: '
            'strconv.ParseFloat: parsing "fast": invalid syntax',
        ),
        (("--kube-api-burst=9999999999",), 'strconv.ParseInt: parsing "9999999999": value out of range'),
        (("--leader-elect=maybe",), 'strconv.ParseBool: parsing "maybe": invalid syntax'),
        (
            ("--leader-elect-lease-duration=15",),
            'invalid argument "15" for "--leader-elect-lease-duration" flag',
        ),
        (("--log-flush-frequency=soon",), 'invalid argument "soon" for "--log-flush-frequency" flag'),
        (("--tls-min-version=TLS1.3",), 'unknown tls version "TLS1.3"'),
        (("--allow-metric-labels=novalue",), "novalue must be formatted as key=value"),
        (
            ("--log-json-info-buffer-size=lots",),
            'invalid argument "lots" for "--log-json-info-buffer-size" flag',
        ),
    ],
)
def test_a_usage_error_prints_runs_usage_and_exits_2(
    argv: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: koordsched run ")
    assert message in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("--show-hidden-metrics-for-version=1.20",),
            "--show-hidden-metrics-for-version must be omitted or have the value '1.27'. "
            "Only the previous minor version is allowed",
        ),
        (
            ("--allow-metric-labels=bad key,l=v",),
            "--allow-metric-labels must have a list of kv pair with format",
        ),
    ],
)
def test_values_kube_scheduler_refuses_at_start_up(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(OptionsError, match=message.replace("(", r"\(").replace(".", r"\.")):
        run_flags(parse(*argv))


def test_version_prints_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    from koordsched import __version__

    assert main(["run", "--version"]) == 0
    assert capsys.readouterr().out == f"koordsched v{__version__}\n"


# --- --write-config-to -------------------------------------------------------------------------


def test_write_config_to_writes_the_effective_config_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from koordsched.plugins.registry import in_tree_registry

    out = tmp_path / "effective.yaml"
    argv = [
        "run",
        f"--write-config-to={out}",
        "--leader-elect-lease-duration=30s",
        "--kube-api-qps=7",
        "--profiling=false",
        "--lock-object-name=old",
    ]
    assert main(argv) == 0
    assert "Flag --lock-object-name has been deprecated" in capsys.readouterr().err
    written = yaml.safe_load(out.read_text())
    assert written["leaderElection"]["leaseDuration"] == "30s"
    assert written["leaderElection"]["resourceName"] == "old"
    assert written["clientConnection"]["qps"] == 7.0
    assert written["enableProfiling"] is False
    # A valid --config: read back, it runs the same plugins with the same args.
    registry = in_tree_registry()
    again = load_config(os.fspath(out), registry)
    original = load_config(default_profile_path(), registry)
    assert [p.points for p in again.profiles] == [p.points for p in original.profiles]
    assert [p.args for p in again.profiles] == [p.args for p in original.profiles]


def test_write_config_to_an_invalid_config_exits_2(tmp_path: Path) -> None:
    out = tmp_path / "effective.yaml"
    assert main(["run", f"--write-config-to={out}", "--leader-elect-renew-deadline=20s"]) == 2
    assert not out.exists()


# --- --master ----------------------------------------------------------------------------------


async def test_master_overrides_the_kubeconfigs_server(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://original:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""
    )
    assert (await load_configuration(str(kubeconfig))).host == "https://original:6443"
    assert (await load_configuration(str(kubeconfig), "https://other:6443")).host == "https://other:6443"
    # No scheme: https when TLS is configured, as client-go's DefaultServerURL.
    assert (await load_configuration(str(kubeconfig), "other:6443")).host == "https://other:6443"
    # No kubeconfig: the server alone, without credentials (client-go's BuildConfigFromFlags).
    bare = await load_configuration(None, "127.0.0.1:8080")
    assert bare.host == "http://127.0.0.1:8080" and not bare.api_key


def test_run_flags_record_whether_config_is_given() -> None:
    assert RunFlags(config_given=False).notice() is None
    assert run_flags(parse()).config_given is False


# --- against the fake API server: the flags drive the run ----------------------------------


async def test_flags_choose_the_lease_and_master_the_server(api: FakeApiServer, tmp_path: Path) -> None:
    """With --config: the leader-election flags still pick the Lease; --kube-api-qps does not
    apply; --master wins over the kubeconfig's (unreachable) server."""
    api.add(NODES, node_json("n1"))
    api.add(PODS, pod_json("mine"))
    config, _ = write_files(tmp_path, api)
    kubeconfig = tmp_path / "elsewhere"
    kubeconfig.write_text(
        """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""
    )
    flags = run_flags(
        parse(
            f"--config={config}",
            "--leader-elect-resource-name=from-flags",
            "--leader-elect-resource-namespace=flags-ns",
            f"--master={api.url}",
            "--kube-api-qps=0.001",
        )
    )
    stop = asyncio.Event()
    task = asyncio.ensure_future(
        run_scheduler(
            config,
            kubeconfig=str(kubeconfig),
            bind_address="127.0.0.1",
            port=free_port(),
            stop=stop,
            flags=flags,
        )
    )
    try:
        await eventually(lambda: api.get(PODS, "default/mine")["spec"].get("nodeName") == "n1", within=10)
        lease = api.lease("flags-ns", "from-flags")
        assert lease is not None and lease["spec"]["holderIdentity"]
        assert api.lease("koordinator-system", "koord-scheduler") is None
    finally:
        stop.set()
        code = await asyncio.wait_for(task, 10)
    assert code == 0
