"""Reading the Dockerfile for the image built without Docker (hack/image/dockerfile.py):
the forms it understands give Docker's meaning, the others are refused."""

from collections.abc import Callable

import pytest

from hack.image.dockerfile import (
    BASE_ENV,
    DOCKERFILE,
    builder_copies,
    image_config,
    python_version,
)

SAMPLE = """\
# syntax=docker/dockerfile:1
ARG PYTHON_IMAGE=python:3.12-slim-bookworm
ARG VERSION=1.2.3
ARG UNUSED=x
FROM ${PYTHON_IMAGE} AS builder
WORKDIR /src
COPY a.toml b.md ./
COPY pkg ./pkg
FROM ${PYTHON_IMAGE}
ARG VERSION
ARG FLAVOUR=slim
LABEL one="first value" \\
      two=${VERSION}-${FLAVOUR} three=${UNUSED}
ENV A=1 \\
    B="two words"
USER 1000:1000
WORKDIR /app
EXPOSE 80 53/udp
ENTRYPOINT ["tini", "--"]
CMD ["serve", "--port=80"]
"""


def test_the_final_stage_gives_docker_s_image_config() -> None:
    config = image_config(SAMPLE)
    assert config.user == "1000:1000"
    assert config.entrypoint == ("tini", "--")
    assert config.cmd == ("serve", "--port=80")
    assert config.workdir == "/app"
    assert config.exposed_ports == ("80/tcp", "53/udp")
    # A global ARG reaches a stage only when the stage declares it again.
    assert config.labels == {"one": "first value", "two": "1.2.3-slim", "three": "${UNUSED}"}
    assert config.env == BASE_ENV | {"A": "1", "B": "two words"}


def test_the_builder_copies_map_to_the_build_directory() -> None:
    assert builder_copies(SAMPLE) == [("a.toml", "a.toml"), ("b.md", "b.md"), ("pkg", "pkg")]
    assert python_version(SAMPLE) == "3.12"


def test_the_project_dockerfile_is_understood() -> None:
    text = DOCKERFILE.read_text()
    copies = dict(builder_copies(text))
    assert {"pyproject.toml", "common", "webhook", "controller", "certs"} <= copies.keys()
    assert python_version(text) == "3.11"
    assert image_config(text).cmd


@pytest.mark.parametrize(
    ("change", "read", "message"),
    [
        (('CMD ["serve", "--port=80"]', "CMD serve --port=80"), image_config, "exec"),
        (('CMD ["serve", "--port=80"]', 'CMD "serve"'), image_config, "exec"),
        (("ENV A=1", "ENV A 1"), image_config, "KEY=value form"),
        (("COPY pkg ./pkg", "COPY --chown=1 pkg ./pkg"), builder_copies, "plain COPY"),
        (
            ("ARG PYTHON_IMAGE=python:3.12-slim-bookworm", "ARG PYTHON_IMAGE=debian"),
            python_version,
            "python:X.Y",
        ),
    ],
)
def test_forms_it_does_not_understand_are_refused(
    change: tuple[str, str], read: Callable[[str], object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        read(SAMPLE.replace(*change))
