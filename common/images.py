"""How a TrussiumRuntime's image spec becomes a container image reference."""

from trussium_operator.common.api import ImageSpec


def render_image(image: ImageSpec) -> str:
    """`repository@digest` when a digest is set, else `repository:tag`.

    A digest pins the exact bytes, so it wins over a (mutable) tag; the
    schema forbids both being set, this order only makes the rule total.
    """
    if image.digest:
        return f"{image.repository}@{image.digest}"
    return f"{image.repository}:{image.tag or ''}"
