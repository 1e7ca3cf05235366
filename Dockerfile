# koordsched: a second Kubernetes scheduler, drop-in for Koordinator v1.6's koord-scheduler.
#
#   docker build -t koordsched:0.1.0 .
#   docker run --rm koordsched:0.1.0 simulate /opt/koordsched/examples/gpu-cluster.yaml
#
# Two stages: "build" makes a wheel, installs it with its dependencies into a virtualenv and
# compiles the numba kernels into a cache; the runtime stage copies the virtualenv and the cache
# into a clean image with a non-root user. Every dependency ships manylinux wheels for
# x86_64 and aarch64, so no compiler is needed.
#
# The numba cache is specific to the CPU model (and features) of the machine that builds the
# image: on nodes with another CPU numba does not use it and compiles the kernels when
# koordsched starts (about 8 CPU-seconds), which the Deployment's startup and readiness probes wait for.
# To build a cache every x86_64 node can use, at some cost in kernel speed (no AVX), add
# NUMBA_CPU_NAME=generic to the ENV of both stages below (the build stage's before the warm-up;
# the runtime stage's is inherited by the Deployment). See docs/deploy.md.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1

WORKDIR /src
# Only what the wheel is built from. koordsched/data/koord-scheduler.yaml is a symlink to
# config/koord-scheduler.yaml, so config/ comes along; README.md is the package's readme.
COPY pyproject.toml README.md ./
COPY config ./config
COPY koordsched ./koordsched
RUN python -m pip wheel --no-deps --wheel-dir /wheels .

# The virtualenv lives at the same path here and in the runtime image: numba keys its cache
# directory on the absolute path of the kernels' source files.
# With the "otlp" extra: OTEL_TRACES_EXPORTER=otlp exports traces over OTLP/HTTP (protobuf).
RUN python -m venv /opt/koordsched/venv \
 && /opt/koordsched/venv/bin/pip install "$(echo /wheels/koordsched-*.whl)[otlp]"

# Compile the kernels once, the shared ones and the plugins' own (they have eager signatures, so
# importing them compiles them; the warm-up calls each one as well), and keep the result. Then a
# smoke test of the installed command on the bundled example. The runtime stage checks that the
# cache is used.
ENV NUMBA_CACHE_DIR=/opt/koordsched/numba-cache
COPY examples ./examples
RUN /opt/koordsched/venv/bin/python -c "from koordsched.plugins.registry import in_tree_registry as r; r().warm_up()" \
 && /opt/koordsched/venv/bin/koordsched --version \
 && /opt/koordsched/venv/bin/koordsched simulate examples/gpu-cluster.yaml > /dev/null


FROM ${PYTHON_IMAGE}

LABEL org.opencontainers.image.title="koordsched" \
      org.opencontainers.image.description="A Kubernetes scheduler in Python, drop-in for Koordinator's koord-scheduler" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"

# A fixed, unprivileged uid/gid (the distroless "nonroot" numbers), which the Deployment's
# securityContext names too.
RUN groupadd --system --gid 65532 koordsched \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin koordsched

COPY --from=build /opt/koordsched/venv /opt/koordsched/venv
# Owned by the runtime user: numba needs the cache directory writable even to read a hit (it
# probes it with a temporary file), and uses it as is when the root filesystem is writable
# (docker run). The Deployment runs with a read-only root filesystem instead and copies this
# directory into an emptyDir first (deploy/deployment.yaml, init container seed-numba-cache).
COPY --from=build --chown=65532:65532 /opt/koordsched/numba-cache /opt/koordsched/numba-cache
COPY --from=build /src/examples /opt/koordsched/examples
# The default profile, where the CMD looks for it; the Deployment mounts its ConfigMap here.
COPY config/koord-scheduler.yaml /etc/koordsched/koord-scheduler.yaml

ENV PATH=/opt/koordsched/venv/bin:$PATH \
    NUMBA_CACHE_DIR=/opt/koordsched/numba-cache \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1

USER 65532:65532
WORKDIR /opt/koordsched

# The cache only counts if it fits this stage's layout: numba files it under a directory named
# after each source file's absolute path and checks the file's content hash, so a venv at another
# path (or other sources) would compile every kernel at each start: about 8 CPU-seconds before
# /readyz. A fresh process loads every plugin and warms the kernels up, as `koordsched run` does at
# start, and the build fails unless all of them came from the cache. (It runs on the build
# machine's CPU; a node with another CPU model compiles, and `koordsched run` logs a warning.)
RUN python -c "from koordsched.plugins.registry import in_tree_registry as r; r().warm_up(); from koordsched.kernels.cache import check; raise SystemExit(check())"

# /healthz /livez /readyz /metrics /configz, plain HTTP for now.
EXPOSE 10259

ENTRYPOINT ["koordsched"]
CMD ["run", "--config", "/etc/koordsched/koord-scheduler.yaml"]
