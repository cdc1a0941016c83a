"""The README stays short, the manual lives in docs/, and every relative link in them resolves."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#+\s+(.*)$")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code (links there are examples)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation out, spaces as hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found = (HEADING.match(line) for line in prose(page.read_text()).splitlines())
    return {slug(m.group(1)) for m in found if m}


def test_the_readme_is_short_and_the_manual_has_its_pages() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 150
    assert len(list(DOCS.glob("*.md"))) >= 5


def test_every_relative_link_resolves_to_a_file_and_its_heading() -> None:
    broken = []
    for page in pages():
        for link in LINK.findall(prose(page.read_text())):
            if re.match(r"^[a-z][a-z0-9+.-]*:", link):  # http:, https:, mailto:
                continue
            path, _, anchor = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            if not target.exists():
                broken.append(f"{page.name}: {link} (no such file)")
            elif anchor and target.suffix == ".md" and anchor not in anchors(target):
                broken.append(f"{page.name}: {link} (no such heading)")
    assert not broken, broken


def test_the_checker_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# Title\n\nsee [x](missing.md) and [y](#title) and `[z](nowhere.md)`\n")
    links = LINK.findall(prose(page.read_text()))
    assert links == ["missing.md", "#title"]
    assert "title" in anchors(page)


def test_no_file_outside_the_tests_points_outside_the_repository() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    outside = "../" + "shared"  # spelled apart so this file does not name it
    named = [
        name
        for name in tracked
        if not name.startswith("tests/")
        and (ROOT / name).is_file()
        and outside in (ROOT / name).read_text(errors="replace")
    ]
    assert not named, named
