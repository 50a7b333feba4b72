"""The Python examples of the README and docs/ that are marked to run do
run, on the current backend, as a user who copies them would run them.

A block runs when the line before its ```python fence is the marker
`<!-- docs-test: run -->` (an HTML comment, so it does not show on GitHub).
Blocks that need a trained run, TensorFlow or real data are left unmarked.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- docs-test: run -->"
BLOCK = re.compile(re.escape(MARKER) + r"\n```python\n(.*?)\n```", re.DOTALL)
# The pages whose examples must run, and how many marked blocks each holds
# at least, so that a lost marker fails here instead of silently skipping.
PAGES = {
    "README.md": 2,
    "docs/migrating-from-tensorflow-addons.md": 5,
    "docs/layers.md": 8,
}


def marked_blocks(text):
    """(line number, code) of each marked python block of a Markdown text."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK.finditer(text)]


def test_every_page_keeps_its_runnable_examples():
    for page, least in PAGES.items():
        text = (ROOT / page).read_text()
        found = len(marked_blocks(text))
        assert found >= least, f"{page}: {found} runnable examples, expected at least {least}"
        # A marker not followed by a python block would mark nothing.
        assert text.count(MARKER) == found, f"{page}: a marker is not before a ```python block"


EXAMPLES = [
    pytest.param(code, id=f"{page}:{line}")
    for page in PAGES
    for line, code in marked_blocks((ROOT / page).read_text())
]


@pytest.mark.backend_independent
def test_the_readme_preset_table_names_every_preset():
    from zoo import registry

    text = (ROOT / "README.md").read_text()
    table = text.split("## The recipes and presets", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    named = {name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    assert named == set(registry.PRESETS)


@pytest.mark.backend_independent
def test_the_docs_output_folders_are_ignored_by_git():
    """The folders that the documented `zoo train` and `zoo export` write
    runs and exports to (`--out runs/...`, `--out exported/...`) stay out of
    `git status`."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    command = re.compile(r"zoo (?:train|export) [^\n]*?--out ([a-z][\w-]*)/")
    folders = {folder for page in pages for folder in command.findall(page.read_text())}
    ignored = set((ROOT / ".gitignore").read_text().splitlines())
    assert {"runs", "exported"} <= folders
    assert {f"{folder}/" for folder in folders} <= ignored


@pytest.mark.parametrize("code", EXAMPLES)
def test_example_runs(code):
    exec(compile(code, "<docs example>", "exec"), {"__name__": "docs_example"})
