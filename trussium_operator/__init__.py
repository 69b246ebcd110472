"""The trussium-operator distribution's one top-level package.

In the repository the subpackages live in top-level folders (common/, webhook/,
controller/, certs/, cmdline/) and appear here as symlinks, so imports read
`trussium_operator.common` in development and in the installed wheel alike, and
the wheel adds no generic top-level module to the environment it is installed in
(docs/adr/0023-platform-chart-conventions-and-locked-releases.md).
"""
