"""The REPORT cites the papers (section, table, figure) or a page of the docs, never the internal
reproduction specs, which users do not have (issue 47, item 8).

Checked where the citations come from, so none can come back: every ``targets.csv`` (data and
comments), every string an experiment builds its rows from (its Python string literals; docstrings
and comments are for developers), the REPORT's header, and the committed REPORTs themselves. A
section number cited as "§5.2" or "Wang et al. 5.2" must be one of the papers' own sections: the
specs' (§6.1, §9.4, §11.5, ...) are not.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from experiments.results.identity import source_digest

REPO = Path(__file__).resolve().parents[2]
DECISIONS = "docs/papers/decisions.md"

# A citation of the specs: the word "spec" (also "specs", "spec's"; not "specified", "specific"),
# their assumption labels ("(A15)", "A15 variant"), their tags and their "[checked]" marks.
SPEC = re.compile(
    r"(?i:\bspecs?\b|\bspec's\b)|\(A\d{1,2}\)|\bA\d{1,2} variant\b"
    r"|\[(?:checked|DERIVED|ASSUMPTION|PILOT)\b"
)
# Every section of the three papers, as numbered in the versions read (docs/papers/decisions.md):
# Hu et al. 1-7 (2.1, 2.2, 3.1, 3.2, 4.1, 4.2, 5.1, 5.2), Sun et al. 1-8, Wang et al. 1-6 (1.1,
# 2.1, 3.1, 3.2, 5.1, 5.2).
SECTIONS = {str(s) for s in range(1, 9)} | {
    "1.1", "2.1", "2.2", "3.1", "3.2", "4.1", "4.2", "5.1", "5.2",
}  # fmt: skip
# "§5.2", "§ 5.2", "Section 5.2", "Sections 3-4", "Wang et al. 5.2", "Sun et al. §7"
SECTION = re.compile(
    r"(?:§\s?|\bSections?\s|\bet al\.,?\s(?:§\s?)?)(\d{1,2}(?:\.\d{1,2})*)(?!\d)"
    r"(?:\s?[-–]\s?(\d{1,2}(?:\.\d{1,2})*)(?!\d))?"
)


def spec_citations(text: str) -> list[str]:
    """Every spec citation in ``text``: a SPEC match or a section the papers do not have."""
    found = [m.group(0) for m in SPEC.finditer(text)]
    for m in SECTION.finditer(text):
        found += [f"{m.group(0)} (no such section)" for s in m.groups() if s and s not in SECTIONS]
    return found


def _string_literals(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module (f-strings' literal parts included), but its docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_spec_citations_are_recognised():
    for cited in (
        "spec 5.3",
        "spec §3 [DERIVED]: 1/16",
        "the spec's pick",
        "(spec)",
        "spec: 0.83–0.90",
        "A15 variant",
        "(A21)",
        "[PILOT §9.3, not the paper]",
        "Sun et al. 6.1",
        "§5.2 magnitude, §5.4 table",  # §5.4: no paper has it
        "(§9.4, no PTR)",
        "Theorem 7 (§10.19)",
        "Section 3.3",
        "Sections 3-9",
    ):
        assert spec_citations(cited), cited
    for fine in (
        "Wang et al. §5.2",
        "Hu et al. Table 2",
        "Sun et al. §7, standard split",
        "Hu et al. Thm 7 (§5.2)",
        "App. E.5",
        "Section 4 / App. A",
        "Sections 3-4",
        "underspecified; specific; specifically",
        "pilot: 0.38 (0.20–0.62)",
        "C = 3e-3, A = 15",
        "Analyze-Gauss (Dwork et al. 2014); De et al. 2022",
        DECISIONS,
    ):
        assert spec_citations(fine) == [], fine


@pytest.mark.parametrize(
    "path",
    sorted((REPO / "experiments").glob("*/targets.csv")),
    ids=lambda p: p.parent.name,
)
def test_targets_cite_the_papers_or_the_docs(path):
    """Rows and comments: the label and source columns become the REPORT's row names."""
    bad = [
        f"line {i}: {cited!r}: {line.strip()}"
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for cited in spec_citations(line)
    ]
    assert not bad, "\n".join(bad)


def test_experiment_strings_cite_the_papers_or_the_docs():
    """What an experiment writes into its rows and tables comes from its string literals."""
    bad = [
        f"{path.relative_to(REPO)}:{line}: {cited!r} in {text[:120]!r}"
        for path in sorted((REPO / "experiments").rglob("*.py"))
        for line, text in _string_literals(path)
        for cited in spec_citations(text)
    ]
    assert not bad, "\n".join(bad)


def test_report_header_names_where_references_come_from():
    strings = " ".join(text for _, text in _string_literals(REPO / "scripts" / "run_all.py"))
    assert "reproduction-spec" not in strings and "paper (or" not in strings
    assert DECISIONS in strings
    assert (REPO / DECISIONS).is_file()


@pytest.mark.parametrize("report", ["results/REPORT.md", "results-paper/REPORT.md"])
def test_committed_reports_cite_the_papers_or_the_docs(report):
    path = REPO / report
    if not path.exists():
        pytest.skip(f"{report} is not committed")
    text = path.read_text(encoding="utf-8")
    produced_by = re.search(r"source digest `([0-9a-f]+)`", text)
    if produced_by is None or produced_by.group(1) != source_digest():
        # A REPORT's rows are what its code wrote: one written before the labels changed keeps
        # its labels until the profile is regenerated, and is checked from then on.
        pytest.skip(f"{report} was generated by other code than this checkout's")
    bad = [
        f"line {i}: {cited!r}: {line[:160]}"
        for i, line in enumerate(text.splitlines(), 1)
        if line.startswith(("|", "## ", "Each "))
        for cited in spec_citations(line)
    ]
    assert not bad, "\n".join(bad)


def test_the_decisions_page_is_in_the_docs():
    index = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    assert "papers/decisions" in index
    page = (REPO / DECISIONS).read_text(encoding="utf-8")
    assert not spec_citations(page), spec_citations(page)
