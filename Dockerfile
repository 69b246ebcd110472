# syntax=docker/dockerfile:1
# One image for both programs: the chart runs `trussium-webhook serve` or
# `trussium-controller run` by setting `command`. The final stage holds the
# installed wheels only: no compiler, no source tree, no pip, and nothing it
# needs to write, so it runs under a read-only root filesystem as UID 65532.
# A tag, not yet a digest: no registry is reachable where this is built and tested,
# so the digest could not be established (docs/adr/0023 says how to pin it).
ARG PYTHON_IMAGE=python:3.11-slim
# Equal to the VERSION file (a unit test holds them together); release builds
# pass --build-arg VERSION="$(cat VERSION)".
ARG VERSION=0.1.0

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md VERSION LICENSE MANIFEST.in requirements.lock ./
COPY trussium_operator ./trussium_operator
COPY common ./common
COPY webhook ./webhook
COPY controller ./controller
COPY certs ./certs
COPY cmdline ./cmdline
COPY serving ./serving
COPY offline ./offline
# The project's wheel plus a wheel for every dependency, so the final stage
# installs offline from /wheels and never needs a build tool. The dependencies
# are the locked ones, each checked against its hashes (requirements.lock).
RUN pip wheel --require-hashes --wheel-dir /wheels -r requirements.lock \
    && pip wheel --no-deps --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ARG VERSION
LABEL org.opencontainers.image.title="trussium-operator-python" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.description="Kubernetes operator and admission webhook for Trussium runtimes" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp
# Bytecode is compiled here, at build time, because the root filesystem is
# read-only at run time; pip itself is removed afterwards.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels /wheels/trussium_operator-*.whl \
    && pip uninstall --yes pip setuptools wheel
USER 65532:65532
EXPOSE 8081 8443 9443
CMD ["trussium-controller", "run"]
