"""The docs keep their shape: a README that fits a screen, one page per system with the same
sections in the same order, and links that lead somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SYSTEM_PAGES = ["dag.md", "timer.md", "pool.md", "durable.md"]
COMMON_SECTIONS = ["Contract", "API", "Guarantees", "What is checked", "Speed"]
README_LIMIT = 12_000  # bytes: the README is the first screen and pointers, the depth is in docs/


def headings(text: str, level: str = "##") -> list[str]:
    """The headings of one level, outside code blocks."""
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return re.findall(rf"^{level} (.+)$", text, re.MULTILINE)


def common_sections_in_order(sections: list[str]) -> bool:
    """Every common section once, in the common order, with at most a Quick start before them;
    a system's own sections come after them."""
    first = 1 if sections[:1] == ["Quick start"] else 0
    return sections[first:first + len(COMMON_SECTIONS)] == COMMON_SECTIONS


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def leads_somewhere(linked: Path, fragment: str) -> bool:
    """The file exists and, for a Markdown page, so does the heading the fragment names."""
    if not linked.exists():
        return False
    if not fragment or linked.suffix != ".md":
        return True
    return fragment in {anchor(h) for h in headings(linked.read_text(), "#+")}


def broken_links(path: Path) -> list[str]:
    """The relative links of a Markdown file whose file or anchor does not exist."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"\w+:", target):
            continue
        file, _, fragment = target.partition("#")
        linked = (path.parent / file) if file else path
        if not leads_somewhere(linked, fragment):
            bad.append(target)
    return bad


def test_the_readme_fits_its_budget() -> None:
    assert len((ROOT / "README.md").read_bytes()) < README_LIMIT


@pytest.mark.parametrize("page", SYSTEM_PAGES)
def test_every_system_page_has_the_common_sections_in_order(page: str) -> None:
    sections = headings((ROOT / "docs" / page).read_text())
    assert common_sections_in_order(sections), sections


def test_the_section_check_rejects_a_page_out_of_order() -> None:
    assert common_sections_in_order(["Quick start", *COMMON_SECTIONS, "Choices"])
    assert not common_sections_in_order(["Contract", "Guarantees", "API", "What is checked",
                                         "Speed"])
    assert not common_sections_in_order(["Contract", "API", "Guarantees", "Speed"])
    assert not common_sections_in_order(["Intro", *COMMON_SECTIONS])


def test_the_readme_points_at_every_system_page() -> None:
    readme = (ROOT / "README.md").read_text()
    for page in [*SYSTEM_PAGES, "map.md", "traces.md", "conformance.md", "explore.md",
                 "mutants.md"]:
        assert f"](docs/{page}" in readme, page


@pytest.mark.parametrize("path", ["README.md", *sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))])
def test_every_relative_link_leads_somewhere(path: str) -> None:
    assert broken_links(ROOT / path) == []


def test_the_link_check_finds_a_missing_file_and_a_missing_anchor(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## A `code` heading's words\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-code-headings-words) [gone](nowhere.md) "
                    "[no anchor](other.md#missing) [web](https://example.org)\n"
                    "```\n[in code](ignored.md)\n```\n")
    assert broken_links(page) == ["nowhere.md", "other.md#missing"]
