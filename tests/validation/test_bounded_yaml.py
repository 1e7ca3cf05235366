"""YAML that would hang or crash a reader (exponential and recursive aliases, deep nesting) is
refused quickly, naming the file and the place, by the cluster loader and the config reader."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from koordsched.api.yaml_bounds import MAX_DEPTH
from koordsched.backends.kube.app import run_scheduler
from koordsched.cli import main
from koordsched.config.errors import ConfigError
from koordsched.config.load import load_config
from koordsched.plugins.registry import in_tree_registry
from tests.kube.test_app import free_port


def billion_laughs(levels: int = 9) -> str:
    """The classic: nine levels of nine aliases each, 9**9 strings once expanded."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for i in range(1, levels):
        name = chr(ord("a") + i)
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = name
    return "\n".join(lines) + "\n"


LAUGHS_POD = "kind: Pod\nmetadata: {name: lol}\nspec:\n  x:\n" + "".join(
    f"    {line}\n" for line in billion_laughs().splitlines()
)
RECURSIVE_POD = "kind: Pod\nmetadata: {name: loop}\nspec: &s {containers: [*s]}\n"


def nested(depth: int) -> str:
    return "kind: Pod\nmetadata: {name: deep}\nspec: {x: " + "[" * depth + "]" * depth + "}\n"


Capsys = pytest.CaptureFixture[str]
GOOD_POD = "---\nkind: Pod\nmetadata: {name: fine}\nspec: {containers: [{name: c}]}\n"


def _simulate(capsys: Capsys, path: Path) -> tuple[int, str, float]:
    t0 = time.perf_counter()
    code = main(["simulate", str(path)])
    return code, capsys.readouterr().err, time.perf_counter() - t0


def test_billion_laughs_file_is_refused_at_once(tmp_path: Path, capsys: Capsys) -> None:
    path = tmp_path / "laughs.yaml"
    path.write_text(LAUGHS_POD + GOOD_POD)
    assert len(path.read_bytes()) < 600
    code, err, took = _simulate(capsys, path)
    assert code == 2
    assert took < 1.0, took
    assert str(path) in err
    assert "aliases expand to more than" in err and "billion laughs" in err
    assert "line " in err and "column " in err


def test_recursive_alias_is_refused(tmp_path: Path, capsys: Capsys) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text(RECURSIVE_POD)
    code, err, _ = _simulate(capsys, path)
    assert code == 2
    assert f"{path}: line 3, column" in err
    assert "recursive alias" in err


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 500, 990])
def test_deep_nesting_is_refused_naming_the_object(tmp_path: Path, capsys: Capsys, depth: int) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text(nested(depth))
    code, err, took = _simulate(capsys, path)
    assert code == 2, err
    assert took < 1.0
    where = f"{path}: document 1 (Pod default/deep): "
    assert f"{where}nesting deeper than {MAX_DEPTH} levels (at spec.x[0][0]" in err


def test_nesting_past_libyaml_limit_is_a_located_error(tmp_path: Path, capsys: Capsys) -> None:
    path = tmp_path / "deeper.yaml"
    path.write_text(nested(5000))
    code, err, took = _simulate(capsys, path)
    assert code == 2 and took < 1.0
    assert f"{path}: line 3, column" in err and "nesting depth" in err


def test_deep_nesting_through_aliases_is_refused(tmp_path: Path, capsys: Capsys) -> None:
    # Each level is short, but the alias chain nests 150 levels once followed.
    lines = ["kind: Pod", "metadata: {name: chain}", "x0: &x0 [1]"]
    lines += [f"x{i}: &x{i} [*x{i - 1}]" for i in range(1, 150)]
    path = tmp_path / "chain.yaml"
    path.write_text("\n".join(lines) + "\n")
    code, err, _ = _simulate(capsys, path)
    assert code == 2
    assert "nesting deeper than" in err and str(path) in err


def test_bounded_nesting_and_a_few_aliases_still_load(tmp_path: Path, capsys: Capsys) -> None:
    """Aliases are legal YAML: a shared label set, reused, loads as before."""
    path = tmp_path / "ok.yaml"
    path.write_text(
        "kind: List\nitems:\n"
        "- {kind: Node, metadata: {name: n1, labels: &l {zone: a}},"
        ' status: {allocatable: &a {cpu: "4", memory: 8Gi, pods: "10"}}}\n'
        "- {kind: Node, metadata: {name: n2, labels: *l}, status: {allocatable: *a}}\n"
        "- {kind: Pod, metadata: {name: p},"
        " spec: {schedulerName: koord-scheduler, nodeSelector: *l, x: " + "[" * 90 + "]" * 90 + "}}\n"
    )
    code, err, _ = _simulate(capsys, path)
    assert code == 0, err


CONFIG_HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("profiles:\n" + "".join(f"  {line}\n" for line in billion_laughs().splitlines()), "billion laughs"),
        ("profiles: &p [*p]\n", "recursive alias"),
        ("profiles: " + "[" * 999 + "]" * 999 + "\n", f"nesting deeper than {MAX_DEPTH} levels"),
        ("extenders: [{a: " + "{b: " * 200 + "1" + "}" * 200 + "}]\n", "nesting deeper than"),
    ],
)
def test_config_file_is_bounded(tmp_path: Path, body: str, expected: str) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text(CONFIG_HEAD + body)
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        load_config(path, in_tree_registry())
    assert time.perf_counter() - t0 < 1.0
    assert str(err.value).startswith(str(path))
    assert expected in str(err.value)


def test_config_nesting_error_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "profile.yaml"
    args = "[" * 120 + "]" * 120
    path.write_text(CONFIG_HEAD + "profiles: [{pluginConfig: [{name: x, args: " + args + "}]}]\n")
    with pytest.raises(ConfigError) as err:
        load_config(path, in_tree_registry())
    assert err.value.where.startswith("profiles[0].pluginConfig[0].args[0][0]")


def test_json_config_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    path.write_text(
        '{"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", '
        '"profiles": ' + "[" * 500 + "]" * 500 + "}"
    )
    with pytest.raises(ConfigError, match="nesting deeper than"):
        load_config(path, in_tree_registry())


def test_run_refuses_a_billion_laughs_config(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text(CONFIG_HEAD + "profiles:\n" + "".join(f"  {x}\n" for x in billion_laughs().splitlines()))
    t0 = time.perf_counter()
    with caplog.at_level(logging.ERROR):
        run = run_scheduler(str(path), kubeconfig=None, bind_address="127.0.0.1", port=free_port())
        code = asyncio.run(run)
    assert code == 2
    assert time.perf_counter() - t0 < 1.0
    assert any(str(path) in r.getMessage() and "billion laughs" in r.getMessage() for r in caplog.records)


def test_overlong_integer_is_a_located_error(tmp_path: Path, capsys: Capsys) -> None:
    """Python refuses to read integers past 4300 digits: a located refusal, not a ValueError."""
    path = tmp_path / "bigint.yaml"
    path.write_text("kind: Pod\nmetadata: {name: x}\nspec: {priority: " + "9" * 5000 + "}\n")
    code, err, _ = _simulate(capsys, path)
    assert code == 2
    assert f"{path}: line 3, column 18: YAML refused: integer of 5000 characters is too long to read" in err
    config = tmp_path / "profile.yaml"
    config.write_text(CONFIG_HEAD + "parallelism: " + "9" * 5000 + "\n")
    with pytest.raises(ConfigError, match="integer of 5000 characters is too long to read") as e:
        load_config(config, in_tree_registry())
    assert e.value.where == "line 3, column 14"
