"""Every relative link of the README and docs/ leads somewhere.

A Markdown link `[text](path#anchor)` of README.md or docs/**/*.md whose
target is not a URL must name a file (or folder) that exists, and where it
has an `#anchor` into a Markdown file, a heading of that file by GitHub's
anchor rules. The same holds for the `docs/<page>.md#<anchor>` references in the
Python files, which point readers at docs/performance.md and the
experiment log: moving a section must not leave them dangling.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"#{1,6} +(.*?) *#*$")
PY_REFERENCE = re.compile(r"(docs/[\w./-]+\.md)(?:#([\w-]+))?")
# Folders with no sources of the project in them.
SKIPPED_FOLDERS = {".venv", ".git", "build", "runs", "exported", "node_modules", "__pycache__"}


def markdown_pages():
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def python_files():
    return [
        path
        for path in sorted(ROOT.rglob("*.py"))
        if not SKIPPED_FOLDERS.intersection(path.relative_to(ROOT).parts)
    ]


def outside_code_blocks(text):
    """(line number, line) of each line of a Markdown text outside ``` fences."""
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            inside = not inside
            continue
        if not inside:
            yield number, line


def slug(heading):
    """GitHub's anchor of a heading: the text of its links, lowercased, all
    punctuation but hyphens and underscores dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


_anchors = {}


def anchors(page):
    """The anchors of a Markdown file's headings; a repeated heading's
    second anchor ends in -1, its third in -2, as on GitHub."""
    page = page.resolve()
    if page not in _anchors:
        found, seen = set(), {}
        for _, line in outside_code_blocks(page.read_text(encoding="utf-8")):
            match = HEADING.match(line)
            if match:
                anchor = slug(match.group(1))
                count = seen.get(anchor, 0)
                seen[anchor] = count + 1
                found.add(anchor if count == 0 else f"{anchor}-{count}")
        _anchors[page] = found
    return _anchors[page]


def problem(source, target, path, anchor):
    """What is wrong with a reference to `path` (and `anchor`), or None."""
    if not path.exists():
        return f"{source}: {target}: no such file"
    if anchor and path.suffix == ".md" and anchor not in anchors(path):
        return f"{source}: {target}: no heading with this anchor in {path.relative_to(ROOT)}"
    return None


def markdown_link_problems(page):
    problems = []
    for number, line in outside_code_blocks(page.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"[a-zA-Z][a-zA-Z+.-]*:", target):  # https:, mailto: ...
                continue
            path, _, anchor = target.partition("#")
            destination = (page.parent / path) if path else page
            source = f"{page.relative_to(ROOT)}:{number}"
            problems.append(problem(source, target, destination.resolve(), anchor))
    return [p for p in problems if p]


def python_reference_problems(path):
    problems = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for match in PY_REFERENCE.finditer(line):
            source = f"{path.relative_to(ROOT)}:{number}"
            problems.append(problem(source, match.group(0), ROOT / match.group(1), match.group(2)))
    return [p for p in problems if p]


@pytest.mark.backend_independent
def test_the_slugs_follow_github():
    assert slug("`transformer_multi30k`, a joint vocabulary of 8,000 pieces (the preset)") == (
        "transformer_multi30k-a-joint-vocabulary-of-8000-pieces-the-preset"
    )
    assert slug("`zoo bench`: layers, decoding, training") == "zoo-bench-layers-decoding-training"
    assert slug("Soft against hard attention at the preset's budget") == (
        "soft-against-hard-attention-at-the-presets-budget"
    )


@pytest.mark.backend_independent
def test_every_relative_link_of_the_docs_resolves():
    problems = [p for page in markdown_pages() for p in markdown_link_problems(page)]
    assert not problems, "\n".join(problems)


@pytest.mark.backend_independent
def test_every_docs_reference_in_the_python_files_resolves():
    problems = [p for path in python_files() for p in python_reference_problems(path)]
    assert not problems, "\n".join(problems)
