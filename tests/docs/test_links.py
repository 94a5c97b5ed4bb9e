"""Every relative link in the README, the changelog and the docs reaches a file, and an ``#anchor`` a heading there.

The README introduces and points elsewhere, so a moved or renamed page must not leave a link behind it.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 200

FENCE = re.compile(r"^(```|~~~)")
INLINE_CODE = re.compile(r"(`+).*?\1")
# [text](target "title") and <…> targets; the text may hold brackets of inline code, stripped before this runs.
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def documents() -> list[Path]:
    """The pages a reader follows links through."""
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "rewards/training/README.md",
             ROOT / "demo/data/README.md"]
    return pages + sorted((ROOT / "docs").glob("*.md"))


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, with inline code spans blanked (a link there is an example)."""
    lines: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, INLINE_CODE.sub("", line)))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: Markdown marks and punctuation dropped, lower case, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"<[^>]+>", "", text)
    kept = "".join(c for c in text.lower() if c in "-_ " or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file; a repeated heading gets GitHub's -1, -2 suffixes."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """The relative link targets of a page with their line numbers."""
    targets: list[tuple[int, str]] = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        definition = REFERENCE_DEF.match(line)
        if definition:
            targets.append((number, definition.group(1)))
            continue
        targets.extend((number, target) for target in INLINE_LINK.findall(line))
    return [(n, t) for n, t in targets if not EXTERNAL.match(t)]


def broken_links(path: Path) -> list[str]:
    """What a reader of ``path`` would find missing, one line per link: line, target, why."""
    problems = []
    for number, target in links(path):
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if file_part.startswith("/") or not resolved.exists():
            problems.append(f"{number}: {target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{number}: {target}: no heading '#{anchor}' in {resolved.name}")
    return problems


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert path.exists(), f"{path.relative_to(ROOT)} is one of the pages the docs link through"
    assert broken_links(path) == [], f"broken links in {path.relative_to(ROOT)}"


def test_readme_introduces_in_at_most_200_lines() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; the detail belongs in docs/"


def test_the_checker_catches_a_broken_file_and_a_broken_anchor(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading (with `code`)\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md#a-heading-with-code) [ok](there.md#twice-1) [ok](#local)\n"
        "## Local\n"
        "[gone](missing.md) [bad](there.md#nowhere) [web](https://example.org/x.md) `[code](nope.md)`\n"
        "```\n[fenced](nope.md)\n```\n"
    )
    assert broken_links(page) == [
        "3: missing.md: no such file",
        "3: there.md#nowhere: no heading '#nowhere' in there.md",
    ]

