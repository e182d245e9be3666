"""Every ```python block of README.md and of the documentation's pages (``docs/**/*.md``) runs as
written, each on its own in a fresh interpreter (so one example cannot lean on names another
defined, and a reader can paste any one of them alone).

A block that truly must not run (a multi-host snippet, say) is preceded by the comment
``<!-- example: not run: <the reason> -->``; shell commands belong in non-python blocks."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The README and every page of the docs site (its Markdown sources), in a fixed order.
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
PAGES = [page for page in PAGES if "_build" not in page.relative_to(REPO).parts]
TEXTS = {page.relative_to(REPO).as_posix(): page.read_text(encoding="utf-8") for page in PAGES}

SKIP = re.compile(r"<!-- example: not run: (?P<reason>[^>]*\S[^>]*?) -->\s*$")
# The fence of a code block and its info string (```python, ```py, ``` ...), at the start of a line.
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", flags=re.S | re.M)
# Spellings of Python that GitHub highlights but a test looking for ```python would miss.
PYTHON_ALIASES = {"py", "py3", "python3", "pycon", "ipython", "ipython3"}
# What marks a block that reads the real datasets (it gets the shared data directory, or skips).
NEEDS_DATA = re.compile(r"\bdata\.load\(|\bload_corrdp\(")


def _blocks(text: str) -> list[tuple[str, str, str | None]]:
    """``(info string, body, reason not to run or None)`` for every fenced block, in order."""
    out = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = SKIP.search(before)
        out.append((match["info"].strip(), match["body"], skip["reason"] if skip else None))
    return out


BLOCKS = {name: _blocks(text) for name, text in TEXTS.items()}
# (page, index of the example on that page, source)
EXAMPLES = [
    (name, i, body)
    for name, blocks in BLOCKS.items()
    for i, body in enumerate(
        body for info, body, reason in blocks if info == "python" and reason is None
    )
]


def test_every_python_block_is_found_and_runs_unless_a_reason_says_why():
    assert len(EXAMPLES) >= 8
    assert any(name == "README.md" for name, _, _ in EXAMPLES), "the README's example is run too"
    for name, text in TEXTS.items():
        # Every fence opened is closed (an odd count would mean a block the regex paired wrongly).
        # MyST directives (```{toctree}, ```{eval-rst}) are fences too.
        assert len(re.findall(r"^```", text, flags=re.M)) == 2 * len(BLOCKS[name]), name
        for info, body, reason in BLOCKS[name]:
            assert info.lower() not in PYTHON_ALIASES, (
                f"{name}: write ```python (not ```{info}) so the block is run:\n{body[:200]}"
            )
            assert reason is None or info == "python", (
                f"{name}: only python blocks are run; the not-run mark on ```{info} is moot"
            )


def test_a_not_run_block_must_say_why():
    marked = _blocks("<!-- example: not run: needs 4 hosts -->\n```python\nimport x\n```\n")
    assert marked == [("python", "import x\n", "needs 4 hosts")]
    unexplained = _blocks("<!-- example: not run:  -->\n```python\nimport x\n```\n")
    assert unexplained == [("python", "import x\n", None)]  # no reason given: the block runs


def _bound_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Names a block binds by ``import`` and names it binds any other way (assignment, def,
    loop...)."""
    imported, assigned = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            assigned.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            assigned.add(node.name)
    return imported, assigned


def test_no_example_rebinds_a_name_another_example_imports():
    """A reader pasting the examples into one session must not find, e.g., ``dpprep.data`` shadowed
    by a dataset called ``data`` (so that a later ``data.load`` fails)."""
    trees = [(name, i, ast.parse(body)) for name, i, body in EXAMPLES]
    imported = set().union(*(_bound_names(t)[0] for _, _, t in trees))
    for name, i, tree in trees:
        clash = _bound_names(tree)[1] & imported
        assert not clash, f"{name} example {i} rebinds {sorted(clash)}, which an example imports"


@pytest.mark.slow
@pytest.mark.parametrize(
    "index", range(len(EXAMPLES)), ids=[f"{name}-{i}" for name, i, _ in EXAMPLES]
)
def test_example_runs(index, tmp_path, request):
    name, number, source = EXAMPLES[index]
    env = {
        **os.environ,
        "MPLBACKEND": "Agg",
        "DPPREP_NO_DOWNLOAD": "1",
        # Hermetic: nothing read from or written to the user's caches (as tests/conftest.py).
        "DPPREP_CALIBRATION_CACHE": "0",
        "DPPREP_CORRDP_CACHE": "0",
    }
    if NEEDS_DATA.search(source):
        env["DPPREP_DATA_DIR"] = str(request.getfixturevalue("data_dir"))  # skips without the data
    script = tmp_path / f"example_{index}.py"
    script.write_text(source, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (
        f"{name} example {number} failed:\n{source}\n{done.stdout}\n{done.stderr[-3000:]}"
    )
    assert done.stdout.strip(), (
        f"{name} example {number} prints nothing: a reader should see what it computes"
    )
    # What a snippet shows should be a few numbers, not a page of repr (e.g. a result with ~100 RDP
    # orders).
    assert max(map(len, done.stdout.splitlines())) <= 200, done.stdout[:1000]
