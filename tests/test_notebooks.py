"""Every notebook runs top to bottom in a real Jupyter kernel, as a Colab user runs it.

Each ``notebooks/*.ipynb`` is executed with nbclient through ipykernel (magics and shell lines
included: the install cell is a no-op where dpprep imports), at the smoke profile, on the offline
data (nothing is downloaded), with this checkout first on the kernel's path. A failing cell (an
exception or a notebook's own ``assert``) fails the test with that cell's traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
KERNEL = "dpprep-test-python"
CELL_TIMEOUT_S = 900


@pytest.fixture(scope="session")
def jupyter_path(tmp_path_factory) -> Path:
    """A Jupyter data dir with a kernelspec that runs this interpreter: a `python3` spec on the
    user's own Jupyter path could start another Python, without this checkout's dependencies."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "dpprep tests", "language": "python"})
    )
    return root


def execute(
    nb: nbformat.NotebookNode,
    cwd: Path,
    jupyter_path: Path,
    data_dir: Path,
    monkeypatch,
    results: Path | None = None,
) -> None:
    """Runs ``nb`` in a fresh kernel; ``results``: the notebook's experiments write there
    (``DPPREP_NOTEBOOK_OUT``; a copy of the session's smoke run, so they read its units back)."""
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter_path))  # read here, by the kernelspec lookup
    env = (
        os.environ
        | ({"DPPREP_NOTEBOOK_OUT": str(results)} if results is not None else {})
        | {
            "PYTHONPATH": os.pathsep.join(
                [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
            "DPPREP_DATA_DIR": str(data_dir),
            "DPPREP_NO_DOWNLOAD": "1",
            "DPPREP_NOTEBOOK_PROFILE": "smoke",
            "MPLBACKEND": "Agg",
        }
    )
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name=KERNEL,
        # plain tracebacks in pytest's report
        extra_arguments=["--InteractiveShell.colors=nocolor"],
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute(env=env)


def test_kernel_is_this_interpreter_and_checkout(tmp_path, jupyter_path, data_dir, monkeypatch):
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "import os, sys, dpprep, experiments\nprint(sys.executable, dpprep.__file__,"
                " experiments.__file__, os.getcwd(), os.environ['DPPREP_NOTEBOOK_PROFILE'],"
                " sep='\\n')"
            )
        ]
    )
    execute(nb, tmp_path, jupyter_path, data_dir, monkeypatch)
    executable, dpprep_init, experiments_init, cwd, profile = (
        nb.cells[0].outputs[0]["text"].splitlines()
    )
    assert executable == sys.executable
    assert Path(dpprep_init) == REPO / "dpprep" / "__init__.py"
    assert Path(experiments_init) == REPO / "experiments" / "__init__.py"
    assert Path(cwd).resolve() == tmp_path.resolve()
    assert profile == "smoke"


def test_failing_cell_fails_with_its_traceback(tmp_path, jupyter_path, data_dir, monkeypatch):
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("def check(x):\n    assert x == 2, 'x is not 2'\ncheck(1)")
        ]
    )
    with pytest.raises(CellExecutionError) as err:
        execute(nb, tmp_path, jupyter_path, data_dir, monkeypatch)
    assert "Traceback (most recent call last)" in str(
        err.value
    ) and "AssertionError: x is not 2" in str(err.value)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_opens_with_install_cell_and_is_stored_clean(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    # Colab: the first code cell installs dpprep, and only where it is not importable.
    assert (
        "import dpprep\nexcept ImportError:" in code[0].source and "%pip install" in code[0].source
    )
    assert all(not cell.outputs and cell.execution_count is None for cell in code), (
        "strip the outputs before committing"
    )


@pytest.mark.slow  # 20-90 s each at smoke (a paper notebook runs all its experiments)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, jupyter_path, data_dir, monkeypatch, smoke_out):
    nb = nbformat.read(path, as_version=4)
    # raises CellExecutionError with the traceback
    execute(nb, tmp_path, jupyter_path, data_dir, monkeypatch, results=smoke_out)
