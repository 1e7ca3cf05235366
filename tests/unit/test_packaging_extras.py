"""The OTLP exporter is an extra that the image and the test bootstrap install, and the image
checks its numba cache where and as whom the scheduler runs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO / "Dockerfile").read_text()


def test_the_otlp_extra_is_the_http_exporter_the_tracing_module_imports() -> None:
    from koordsched.observability import tracing

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    [requirement] = extras["otlp"]
    assert requirement.startswith(tracing._OTLP_PACKAGES["http/protobuf"] + ">=")
    # The module it provides is the one tracing.py looks for, and it is installed here.
    __import__(tracing._OTLP_MODULES["http/protobuf"])


def test_the_image_and_the_bootstrap_install_the_extra() -> None:
    assert re.search(r"pip install \"\$\(echo /wheels/koordsched-\*\.whl\)\[otlp\]\"", DOCKERFILE)
    bootstrap = (REPO / "scripts" / "bootstrap").read_text()
    extras = re.search(r"^extras=(\S+)$", bootstrap, re.MULTILINE)
    assert extras is not None and set(extras.group(1).split(",")) == {"test", "otlp"}
    assert 'pip install --quiet -e ".[$extras]"' in bootstrap


def test_the_runtime_stage_checks_the_cache_as_the_runtime_user_after_copying_it() -> None:
    runtime = DOCKERFILE[DOCKERFILE.rindex("\nFROM ") :]
    copy_cache = runtime.index("COPY --from=build --chown=65532:65532 /opt/koordsched/numba-cache")
    user = runtime.index("\nUSER 65532:65532")
    check = runtime.index("from koordsched.kernels.cache import check")
    assert copy_cache < user < check
    # The check runs with the runtime stage's NUMBA_CACHE_DIR, the build stage's.
    cache_dirs = re.findall(r"NUMBA_CACHE_DIR=(\S+)", DOCKERFILE)
    assert len(cache_dirs) == 2 and len(set(cache_dirs)) == 1
