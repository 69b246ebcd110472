"""The blocks of docs/migration-from-go-operator.md."""

from tests.support.doc_steps import REPO, steps

GUIDE = REPO / "docs" / "migration-from-go-operator.md"


def guide_steps(**placeholders: str) -> dict[str, str]:
    """Each `<!-- step: NAME -->` block of the guide, placeholders filled (see doc_steps.steps)."""
    return steps(GUIDE, **placeholders)
