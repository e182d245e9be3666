"""Every notebook runs top to bottom in a real Jupyter kernel, as a Colab user runs it, and shows
what it stores.

Each ``notebooks/*.ipynb`` is executed with nbclient through ipykernel (magics and shell lines
included: the install cell is a no-op where dpprep imports), at the smoke profile, on the offline
data (nothing is downloaded), with this checkout first on the kernel's path, by
``scripts/execute_notebooks.py``, which also stored the outputs the docs render. A failing cell (an
exception or a notebook's own ``assert``) fails the test with that cell's traceback; a cell that
prints other than its stored output fails it too.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient.exceptions import CellExecutionError

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "execute_notebooks", REPO / "scripts" / "execute_notebooks.py"
)
assert _spec is not None and _spec.loader is not None
notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(notebooks)
NOTEBOOKS = notebooks.NOTEBOOKS
# Text a reader's page must not show: this machine's directories (a stored output holds none).
MACHINE_PATHS = re.compile(r"(/work/|/tmp/|/home/|/root/|/private/var/|[A-Z]:\\)")


@pytest.fixture(scope="session")
def kernels(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("kernels")


def execute(nb, cwd: Path, kernels: Path, data_dir: Path, results: Path | None = None):
    return notebooks.execute(nb, cwd, data_dir, kernels, results=results)


def _shown(cell) -> tuple[str, list[tuple[str, ...]]]:
    """What a reader sees of a code cell: its printed and displayed text, and for each output
    its kind and formats (a figure stays a figure). Consecutive printed outputs are one text: the
    kernel flushes stdout on a timer, so where one print's output is cut into several outputs
    depends on the machine's speed, not on what the cell prints."""
    text, kinds = [], []
    for output in notebooks.reader_outputs(cell):
        if output["output_type"] == "stream":
            if kinds and kinds[-1] == ("stream",):
                text[-1] += output["text"]
            else:
                text.append(output["text"])
                kinds.append(("stream",))
        else:
            data = output.get("data", {})
            # a displayed table's Markdown holds its numbers; its text/plain is an object's repr
            text.append(data.get("text/markdown") or data.get("text/plain", ""))
            kinds.append((output["output_type"], *sorted(output.get("data", {}))))
    return "\n".join(text), kinds


def test_kernel_is_this_interpreter_and_checkout(tmp_path, kernels, data_dir):
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "import os, sys, dpprep, experiments\nprint(sys.executable, dpprep.__file__,"
                " experiments.__file__, os.getcwd(), os.environ['DPPREP_NOTEBOOK_PROFILE'],"
                " sep='\\n')"
            )
        ]
    )
    execute(nb, tmp_path, kernels, data_dir)
    executable, dpprep_init, experiments_init, cwd, profile = (
        nb.cells[0].outputs[0]["text"].splitlines()
    )
    assert executable == sys.executable
    assert Path(dpprep_init) == REPO / "dpprep" / "__init__.py"
    assert Path(experiments_init) == REPO / "experiments" / "__init__.py"
    assert Path(cwd).resolve() == tmp_path.resolve()
    assert profile == "smoke"


def test_failing_cell_fails_with_its_traceback(tmp_path, kernels, data_dir):
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("def check(x):\n    assert x == 2, 'x is not 2'\ncheck(1)")
        ]
    )
    with pytest.raises(CellExecutionError) as err:
        execute(nb, tmp_path, kernels, data_dir)
    assert "Traceback (most recent call last)" in str(
        err.value
    ) and "AssertionError: x is not 2" in str(err.value)


def test_a_notebook_is_stored_with_what_a_reader_sees():
    out = nbformat.v4.new_output
    cell = nbformat.v4.new_code_cell("x", execution_count=1)
    cell.metadata["execution"] = {"iopub.execute_input": "2026-11-28T09:00:00Z"}
    cell.outputs = [
        out("stream", name="stdout", text="accuracy 0.905\n"),
        out("stream", name="stderr", text="WARNING: slow\n"),
        out("display_data", data={notebooks.WIDGET: {}, "text/plain": "  0%|"}),
        out("display_data", data={"text/markdown": "| ε | 1.0 |", "text/plain": "<Markdown>"}),
        out("display_data", data={"image/png": "iVBO", "text/plain": "<Image>"}),
    ]
    kept = notebooks.stored(nbformat.v4.new_notebook(cells=[cell])).cells[0]
    assert "execution" not in kept.metadata and kept.execution_count == 1
    shown, kinds = _shown(kept)
    assert shown == "accuracy 0.905\n\n| ε | 1.0 |\n<Image>"
    assert kinds == [
        ("stream",),
        ("display_data", "text/markdown", "text/plain"),
        ("display_data", "image/png", "text/plain"),
    ]


def test_printed_text_is_compared_whatever_outputs_the_kernel_cut_it_into():
    """The kernel flushes stdout on a timer: the same prints arrive as one output on a fast
    machine and as two on a slow one (CI once failed the tour on that alone)."""
    out = nbformat.v4.new_output
    fast, slow, apart = (nbformat.v4.new_code_cell("x") for _ in range(3))
    fast.outputs = [out("stream", name="stdout", text="epsilon 2.0\naccuracy 0.905\n")]
    slow.outputs = [
        out("stream", name="stdout", text="epsilon 2.0\n"),
        out("stream", name="stderr", text="WARNING: slow\n"),
        out("stream", name="stdout", text="accuracy 0.905\n"),
    ]
    apart.outputs = [
        out("stream", name="stdout", text="epsilon 2.0\n"),
        out("display_data", data={"image/png": "iVBO", "text/plain": "<Image>"}),
        out("stream", name="stdout", text="accuracy 0.905\n"),
    ]
    assert _shown(fast) == _shown(slow) == ("epsilon 2.0\naccuracy 0.905\n", [("stream",)])
    # a figure between two prints keeps them apart: that is what the page shows
    figure = ("display_data", "image/png", "text/plain")
    assert _shown(apart)[1] == [("stream",), figure, ("stream",)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_opens_with_install_cell_and_is_stored_with_its_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    # Colab: the first code cell installs dpprep, and only where it is not importable.
    assert "import dpprep\nexcept ImportError:" in code[0].source and "%pip" in code[0].source
    # Stored as scripts/execute_notebooks.py writes it: every cell run once, in order, and only
    # what a reader sees (no warnings, progress bars or run metadata).
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1)), (
        "run scripts/execute_notebooks.py to store the notebook with its outputs"
    )
    assert nbformat.writes(notebooks.stored(nb)) == nbformat.writes(nb)
    assert any(cell.outputs for cell in code), "a tutorial shows what it computed"
    for cell in code:
        assert all(output["output_type"] != "error" for output in cell.outputs)
        shown, _ = _shown(cell)
        assert not MACHINE_PATHS.search(shown), (cell.source[:200], shown[:500])


@pytest.mark.slow  # 20-170 s each at smoke (a paper notebook runs all its experiments)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_and_shows_what_it_stores(
    path, tmp_path, kernels, data_dir, smoke_out, output_mismatch
):
    """Run afresh (on a copy of the session's smoke run, as scripts/execute_notebooks.py runs it
    at smoke), every cell prints what the stored notebook shows, numbers within the tolerance in
    the notebook's metadata (``dpprep.output_tolerance``: ``atol`` and ``rtol``; none: equal)."""
    stored = nbformat.read(path, as_version=4)
    # raises CellExecutionError with the traceback
    fresh = execute(nbformat.read(path, as_version=4), tmp_path, kernels, data_dir, smoke_out)
    tolerance = stored.metadata.get("dpprep", {}).get("output_tolerance", {})
    for before, after in zip(stored.cells, fresh.cells, strict=True):
        if before.cell_type != "code":
            continue
        (shown, kinds), (printed, kinds_now) = _shown(before), _shown(after)
        assert kinds_now == kinds, (before.source[:300], kinds, kinds_now)
        mismatch = output_mismatch(shown, printed, **tolerance)
        assert mismatch is None, (
            f"{path.name}: a cell prints other than the stored notebook shows ({mismatch};"
            f" tolerance {tolerance}); rerun scripts/execute_notebooks.py if the change is"
            f" meant.\nCell:\n{before.source[:400]}\nStored:\n{shown[:1500]}"
            f"\nNow:\n{printed[:1500]}"
        )
