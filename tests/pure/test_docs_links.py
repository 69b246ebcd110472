"""The documentation stays navigable: every relative link in the repository's
Markdown reaches a file (and a heading, when it names one), and the ADR index
lists every record, so a moved page or a renamed section fails here, not in a
reader's browser. No page cites a tracker's issue numbers."""

import os
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIPPED = {".git", ".venv", "node_modules", "dist", "build", ".mypy_cache", ".ruff_cache"}
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.MULTILINE)


def markdown_files() -> list[Path]:
    found = []
    for folder, subfolders, names in os.walk(ROOT):
        subfolders[:] = [name for name in subfolders if name not in SKIPPED]
        found += [Path(folder, name) for name in names if name.endswith(".md")]
    return sorted(found)


def prose(path: Path) -> str:
    """The text a reader sees as prose: code blocks and code spans removed."""
    return CODE_SPAN.sub("", FENCE.sub("", path.read_text()))


@cache
def anchors(path: Path) -> frozenset[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as
    hyphens, a repeated heading numbered."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(found)


def broken_links(path: Path) -> list[str]:
    broken = []
    for link in LINK.findall(prose(path)):
        if re.match(r"[a-z][a-z0-9+.-]*:", link):
            continue  # a URL: not ours to check offline
        target, _, anchor = link.partition("#")
        resolved = (path.parent / target).resolve() if target else path
        if not resolved.exists():
            broken.append(f"{link}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{link}: no such heading")
    return broken


def test_every_relative_link_reaches_its_file_and_heading() -> None:
    broken = {
        str(path.relative_to(ROOT)): links
        for path in markdown_files()
        if (links := broken_links(path))
    }
    assert broken == {}


def test_the_adr_index_lists_every_record() -> None:
    folder = ROOT / "docs" / "adr"
    index = (folder / "README.md").read_text()
    records = sorted(path.name for path in folder.glob("[0-9][0-9][0-9][0-9]-*.md"))
    assert [name for name in records if f"]({name})" not in index] == []


def test_no_page_cites_a_tracker_issue() -> None:
    """Docs say what is true now; an issue number says how it came about."""
    issue = re.compile(r"\b[Ii]ssues? ?[-#]? ?\d+")
    cited = {
        str(path.relative_to(ROOT)): issue.findall(prose(path))
        for path in markdown_files()
        if issue.search(prose(path))
    }
    assert cited == {}


def test_a_broken_link_and_a_missing_heading_are_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# A heading\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-heading) [again](other.md#twice-1) [code](`x`)\n"
        "[gone](missing.md) [wrong](other.md#nowhere) [web](https://example.com/x.md)\n"
        "```\n[in a block](missing-too.md)\n```\n"
    )
    assert broken_links(page) == ["missing.md: no such file", "other.md#nowhere: no such heading"]
