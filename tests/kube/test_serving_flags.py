"""``koordsched run``'s serving flags: kube-scheduler's names, defaults and parsing; bad values."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import pytest

from koordsched.backends.kube.app import run_command
from koordsched.backends.kube.flags import add_run_arguments, serving_options
from koordsched.backends.kube.serving.options import OptionsError, ServingOptions
from koordsched.cli import build_parser


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_run_arguments(parser)
    return parser.parse_args(list(argv))


def test_defaults_are_kube_schedulers() -> None:
    options = serving_options(parse())
    assert options == ServingOptions()
    assert (options.bind_address, options.secure_port, options.insecure_port) == ("0.0.0.0", 10259, 0)
    assert options.authorization.always_allow_paths == ("/healthz", "/readyz", "/livez")
    assert options.authorization.always_allow_groups == ("system:masters",)
    assert options.authentication.tolerate_lookup_failure and not options.authentication.skip_lookup
    assert options.authentication.cache_ttl == 10.0
    assert options.authorization.allow_cache_ttl == options.authorization.deny_cache_ttl == 10.0


def test_help_lists_kube_schedulers_flag_names() -> None:
    run = build_parser()._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr]
    help_text = run.format_help()
    for flag in (
        "--bind-address",
        "--secure-port",
        "--cert-dir",
        "--tls-cert-file",
        "--tls-private-key-file",
        "--authentication-kubeconfig",
        "--authentication-skip-lookup",
        "--authentication-token-webhook-cache-ttl",
        "--authentication-tolerate-lookup-failure",
        "--client-ca-file",
        "--authorization-always-allow-paths",
        "--authorization-kubeconfig",
        "--authorization-webhook-cache-authorized-ttl",
        "--authorization-webhook-cache-unauthorized-ttl",
    ):
        assert flag in help_text, flag


@pytest.mark.parametrize(
    ("argv", "skip"),
    [
        ((), False),
        (("--authentication-skip-lookup",), True),
        (("--authentication-skip-lookup=true",), True),
        (("--authentication-skip-lookup=1",), True),
        (("--authentication-skip-lookup=False",), False),
        (("--authentication-skip-lookup", "f"), False),
    ],
)
def test_bool_flags_read_as_go_reads_them(argv: tuple[str, ...], skip: bool) -> None:
    assert serving_options(parse(*argv)).authentication.skip_lookup is skip


def test_bool_flags_refuse_other_words() -> None:
    with pytest.raises(argparse.ArgumentError, match=r'strconv\.ParseBool: parsing "yes": invalid syntax'):
        parse("--authentication-tolerate-lookup-failure=yes")


def test_always_allow_paths_is_a_string_slice() -> None:
    paths = serving_options(parse("--authorization-always-allow-paths=/livez,/readyz/*")).authorization
    assert paths.always_allow_paths == ("/livez", "/readyz/*")
    repeated = parse("--authorization-always-allow-paths=/a", "--authorization-always-allow-paths", "/b,/c")
    assert repeated.authorization_always_allow_paths == ("/a", "/b", "/c")
    assert parse("--authorization-always-allow-paths=").authorization_always_allow_paths == ()


def test_durations_are_go_durations() -> None:
    args = parse(
        "--authentication-token-webhook-cache-ttl=1m30s",
        "--authorization-webhook-cache-authorized-ttl=500ms",
        "--authorization-webhook-cache-unauthorized-ttl=0",
    )
    options = serving_options(args)
    assert options.authentication.cache_ttl == 90.0
    assert options.authorization.allow_cache_ttl == 0.5
    assert options.authorization.deny_cache_ttl == 0.0
    with pytest.raises(argparse.ArgumentError, match='invalid duration "10"'):
        parse("--authentication-token-webhook-cache-ttl=10")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--bind-address=localhost",), 'invalid argument "localhost" for "--bind-address" flag'),
        (("--secure-port=70000",), "--secure-port 70000 must be between 0 and 65535, inclusive"),
        (("--port=-1",), "--port -1 must be between 0 and 65535, inclusive"),
        (("--port=10259",), "--port and --secure-port are both 10259"),
        (("--tls-cert-file=a.crt",), "--tls-cert-file is set but --tls-private-key-file is not"),
        (("--tls-private-key-file=a.key",), "--tls-private-key-file is set but --tls-cert-file is not"),
        (("--authorization-always-allow-paths=/a*b",), "only trailing \\* allowed in 'a\\*b'"),
    ],
)
def test_values_kube_scheduler_refuses(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        serving_options(parse(*argv))


def test_a_bad_serving_flag_exits_2(caplog: pytest.LogCaptureFixture) -> None:
    args = build_parser().parse_args(["run", "--secure-port", "99999"])
    assert run_command(args) == 2
    assert "--secure-port 99999 must be between 0 and 65535" in caplog.text


def test_a_missing_authentication_kubeconfig_exits_2(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "nope"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = build_parser().parse_args(
        ["run", "--bind-address=127.0.0.1", f"--secure-port={port}", f"--authentication-kubeconfig={missing}"]
    )
    assert run_command(args) == 2
    assert (
        f"failed to get delegated authentication kubeconfig: kubeconfig '{missing}': no such file"
        in caplog.text
    )
