"""Every ```python block of README.md and of the documentation's pages (``docs/**/*.md``) runs as
written, each on its own in a fresh interpreter (so one example cannot lean on names another
defined, and a reader can paste any one of them alone), and prints what the page says it prints.

What an example prints is shown right below it, in an ```output block, and compared here with what
it printed, doctest-style: the same words and punctuation (whitespace aside; ``...`` stands for any
text), the same integers, and every number written with a decimal point or an exponent within the
tolerance stated in the comment before the block, ``<!-- output: atol=0.002 rtol=0 -->``
(|printed − shown| ≤ atol + rtol·|shown|; no comment: equal). A number in a comment next to a
``print`` would be a claim about the output that nothing compares, so comments there hold none.

A block that truly must not run (a multi-host snippet, say) is preceded by the comment
``<!-- example: not run: <the reason> -->``; shell commands belong in non-python blocks."""

from __future__ import annotations

import ast
import io
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path
from typing import NamedTuple

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
# The comment before an output block: nothing but blank lines may separate it from the example
# above and from the block below; its tolerances are ``name=value`` pairs.
OUTPUT_MARK = re.compile(r"<!--\s*output(?::(?P<tolerance>[^>]*?))?\s*-->")


class Block(NamedTuple):
    info: str
    body: str
    reason: str | None  # why it is not run (python blocks only), or None
    start: int  # offsets of the fence in the page
    end: int


class Example(NamedTuple):
    page: str
    number: int  # its index among the page's run examples
    source: str
    output: str | None  # the ```output block below it
    tolerance: dict[str, float]


def _blocks(text: str) -> list[tuple[str, str, str | None]]:
    """``(info string, body, reason not to run or None)`` for every fenced block, in order."""
    return [(b.info, b.body, b.reason) for b in _fenced(text)]


def _fenced(text: str) -> list[Block]:
    out = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = SKIP.search(before)
        reason = skip["reason"] if skip else None
        out.append(Block(match["info"].strip(), match["body"], reason, match.start(), match.end()))
    return out


def _tolerance(spec: str | None) -> dict[str, float]:
    """``"atol=0.002 rtol=1e-4"`` → ``{"atol": 0.002, "rtol": 1e-4}`` (missing ones are 0)."""
    tolerance = {"atol": 0.0, "rtol": 0.0}
    for item in (spec or "").replace(",", " ").split():
        name, _, value = item.partition("=")
        if name not in tolerance or not value:
            raise ValueError(f"an output tolerance is atol=… and/or rtol=…, not {item!r}")
        tolerance[name] = float(value)
        if not tolerance[name] >= 0:
            raise ValueError(f"a tolerance is a number ≥ 0, not {item!r}")
    return tolerance


def _examples(name: str, text: str) -> tuple[list[Example], list[Block]]:
    """The run examples of a page with their output blocks, and the output blocks that follow no
    run example (an error: what they show is compared with nothing)."""
    blocks = _fenced(text)
    examples, orphans, claimed = [], [], set()
    for i, block in enumerate(blocks):
        if block.info != "python" or block.reason is not None:
            continue
        output, tolerance = None, {"atol": 0.0, "rtol": 0.0}
        if i + 1 < len(blocks) and blocks[i + 1].info == "output":
            between = text[block.end : blocks[i + 1].start]
            mark = OUTPUT_MARK.search(between)
            if not OUTPUT_MARK.sub("", between).strip():
                output, tolerance = blocks[i + 1].body, _tolerance(mark and mark["tolerance"])
                claimed.add(i + 1)
        examples.append(Example(name, len(examples), block.body, output, tolerance))
    orphans = [b for i, b in enumerate(blocks) if b.info == "output" and i not in claimed]
    return examples, orphans


PARSED = {name: _examples(name, text) for name, text in TEXTS.items()}
BLOCKS = {name: _blocks(text) for name, text in TEXTS.items()}
EXAMPLES = [example for examples, _ in PARSED.values() for example in examples]


def test_every_python_block_is_found_and_runs_unless_a_reason_says_why():
    assert len(EXAMPLES) >= 8
    assert any(e.page == "README.md" for e in EXAMPLES), "the README's example is run too"
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


def test_every_example_shows_its_output_and_every_output_is_an_example_s():
    for name, (examples, orphans) in PARSED.items():
        for example in examples:
            assert example.output is not None, (
                f"{name} example {example.number} has no ```output block right below it (a"
                f" reader should see what it prints):\n{example.source[:300]}"
            )
        assert not orphans, (
            f"{name}: an ```output block must follow a run example (only blank lines and its"
            f" <!-- output: … --> comment between):\n{orphans[0].body[:300]}"
        )


def test_a_not_run_block_must_say_why():
    marked = _blocks("<!-- example: not run: needs 4 hosts -->\n```python\nimport x\n```\n")
    assert marked == [("python", "import x\n", "needs 4 hosts")]
    unexplained = _blocks("<!-- example: not run:  -->\n```python\nimport x\n```\n")
    assert unexplained == [("python", "import x\n", None)]  # no reason given: the block runs


def test_an_output_block_is_found_with_its_tolerance():
    page = "```python\nprint(1)\n```\n\n<!-- output: atol=0.01 -->\n```output\n1\n```\n"
    (example,), orphans = _examples("page", page)
    assert example.output == "1\n" and example.tolerance == {"atol": 0.01, "rtol": 0.0}
    assert not orphans
    # Prose between the example and the block: the block is nobody's.
    (example,), orphans = _examples("page", page.replace("\n\n<!--", "\nsome text\n<!--"))
    assert example.output is None and len(orphans) == 1
    with pytest.raises(ValueError, match="atol"):
        _examples("page", page.replace("atol=0.01", "within 0.01"))


@pytest.mark.parametrize(
    "shown, printed, tolerance, same",
    [
        ("accuracy 0.905 at ε = 2.000", "accuracy 0.9051 at ε = 1.99998", {"atol": 0.001}, True),
        ("accuracy 0.905", "accuracy 0.912", {"atol": 0.001}, False),
        ("z=1.06233", "z=1.06229", {}, False),  # the README's drift, caught
        ("z=1.06233", "z=1.06229", {"rtol": 1e-4}, True),
        ("batch 2048, 88 steps", "batch 2048, 89 steps", {"atol": 10}, False),  # integers exact
        ("(10, 3) [1.0 2.0]", "(10, 3)\n[1.  2.]", {}, True),  # whitespace and 1.0 vs 1.
        ("(10, 3)", "(10, 3, 1)", {}, False),
        ("shape (2, ...) done", "shape (2, 32, 1) done", {}, True),
        ("float32", "float64", {"atol": 1.0}, False),  # digits in a word are text
        ("caught by ()", "caught by ('noise:scale',)", {}, False),
        ("nan", "nan", {}, True),
    ],
)
def test_the_output_comparison(shown, printed, tolerance, same, output_mismatch):
    assert (output_mismatch(shown, printed, **tolerance) is None) == same


def _print_comments(source: str) -> list[tuple[int, str]]:
    """Comments on a ``print(...)`` call's lines and the comment lines right above it."""
    comments = {
        tok.start[0]: tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "print"
        ):
            continue
        rows = set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        row = node.lineno - 1
        while row >= 1 and lines[row - 1].lstrip().startswith("#"):
            rows.add(row)
            row -= 1
        found += [(r, comments[r]) for r in sorted(rows) if r in comments]
    return found


def test_no_comment_beside_a_print_states_a_number():
    for example in EXAMPLES:
        for row, comment in _print_comments(example.source):
            assert not re.search(r"\d", comment), (
                f"{example.page} example {example.number}, line {row}: {comment!r} states a"
                " number beside a print; show it in the example's ```output block, where the"
                " test compares it"
            )


def test_the_comment_check_finds_the_readme_s_old_comment():
    old = (
        "x = 1\n# (2, 1e-05)-DP: z=1.06233\nprint(x)\nprint(x)  # ≈ 0.916\n"
        "print(x)  # dropout off\n"
    )
    assert [row for row, _ in _print_comments(old)] == [2, 4, 5]
    assert [row for row, c in _print_comments(old) if re.search(r"\d", c)] == [2, 4]


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
    trees = [(e.page, e.number, ast.parse(e.source)) for e in EXAMPLES]
    imported = set().union(*(_bound_names(t)[0] for _, _, t in trees))
    for name, i, tree in trees:
        clash = _bound_names(tree)[1] & imported
        assert not clash, f"{name} example {i} rebinds {sorted(clash)}, which an example imports"


@pytest.mark.slow
@pytest.mark.parametrize(
    "index", range(len(EXAMPLES)), ids=[f"{e.page}-{e.number}" for e in EXAMPLES]
)
def test_example_runs_and_prints_what_its_page_shows(index, tmp_path, request, output_mismatch):
    name, number, source, shown, tolerance = EXAMPLES[index]
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
    assert shown is not None, f"{name} example {number} shows no output; it printed:\n{done.stdout}"
    mismatch = output_mismatch(shown, done.stdout, **tolerance)
    assert mismatch is None, (
        f"{name} example {number} prints other than its page shows ({mismatch}; tolerance"
        f" {tolerance}).\nThe page shows:\n{shown}\nIt printed:\n{done.stdout}"
    )
