#!/usr/bin/env python
"""Runs the tutorials (``notebooks/*.ipynb``) top to bottom in a Jupyter kernel and stores their
outputs in them: what the docs render, and what ``tests/test_notebooks.py`` compares a fresh run
with.

    python scripts/execute_notebooks.py                          # every notebook, in place
    python scripts/execute_notebooks.py notebooks/tour.ipynb     # one

Each notebook runs as a reader runs it (magics and shell lines included; the install cell does
nothing where dpprep imports), in a kernel of this interpreter with this checkout first on its
path, at the ``smoke`` profile (``DPPREP_NOTEBOOK_PROFILE``: a paper notebook computes its
experiments at the smallest size, into a temporary directory), on the datasets of ``--data-dir``
(default ``$DPPREP_DATA_DIR``, else ``../shared/data``; nothing is downloaded). What is stored is
what a reader sees: standard output, results and figures; standard error (warnings, progress bars)
and interactive widgets are left out, and so is the run's metadata (timestamps), so a re-run that
prints the same leaves the file unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
KERNEL = "dpprep-tutorials-python"
PROFILE = "smoke"
CELL_TIMEOUT_S = 900
# Output types a reader sees in the rendered page; a widget (tqdm's bar under Jupyter) is a view
# of state that the stored file does not carry.
WIDGET = "application/vnd.jupyter.widget-view+json"


def kernel_manager(kernels: Path) -> KernelManager:
    """A kernel of this interpreter (a ``python3`` spec on the user's Jupyter path could start
    another Python, without this checkout's dependencies), its spec written under ``kernels``."""
    spec = kernels / KERNEL
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "dpprep tutorials", "language": "python"})
    )
    specs = KernelSpecManager(kernel_dirs=[str(kernels)], ensure_native_kernel=False)
    return KernelManager(kernel_name=KERNEL, kernel_spec_manager=specs)


def execute(
    nb: nbformat.NotebookNode,
    cwd: Path,
    data_dir: Path,
    kernels: Path,
    results: Path | None = None,
) -> nbformat.NotebookNode:
    """Runs ``nb`` in a fresh kernel in ``cwd`` (raises nbclient's ``CellExecutionError`` with
    the failing cell's traceback); ``results``: where the notebook's experiments write
    (``DPPREP_NOTEBOOK_OUT``; an earlier run's directory is read back, its units reused)."""
    env = (
        os.environ
        | ({"DPPREP_NOTEBOOK_OUT": str(results)} if results is not None else {})
        | {
            "PYTHONPATH": os.pathsep.join(
                [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
            "DPPREP_DATA_DIR": str(data_dir),
            "DPPREP_NO_DOWNLOAD": "1",
            "DPPREP_NOTEBOOK_PROFILE": PROFILE,
            "MPLBACKEND": "Agg",
        }
    )
    client = NotebookClient(
        nb,
        km=kernel_manager(kernels),
        timeout=CELL_TIMEOUT_S,
        # plain tracebacks in pytest's report
        extra_arguments=["--InteractiveShell.colors=nocolor", "--IPKernelApp.log_level=ERROR"],
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute(env=env)
    return nb


def reader_outputs(cell: nbformat.NotebookNode) -> list[dict]:
    """The outputs of a code cell that a reader of the page sees (see the module's docstring)."""
    kept = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream" and output["name"] != "stdout":
            continue
        if output["output_type"] == "display_data" and WIDGET in output["data"]:
            continue
        kept.append(output)
    return kept


def stored(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` as committed: a reader's outputs, without the run's metadata."""
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)  # a copy
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = [nbformat.from_dict(o) for o in reader_outputs(cell)]
    nb.metadata.pop("widgets", None)
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, default=NOTEBOOKS)
    default_data = os.environ.get("DPPREP_DATA_DIR") or str(REPO.parent / "shared" / "data")
    parser.add_argument("--data-dir", type=Path, default=Path(default_data))
    args = parser.parse_args(argv)
    for path in args.notebooks:
        if not path.is_file():
            parser.error(f"{path}: no such notebook")
    with tempfile.TemporaryDirectory(prefix="dpprep-tutorials-") as scratch:
        root = Path(scratch)
        for path in args.notebooks:
            print(f"{path}: running at profile {PROFILE}", file=sys.stderr, flush=True)
            nb = nbformat.read(path, as_version=4)
            cwd = root / path.stem
            cwd.mkdir()
            execute(nb, cwd, args.data_dir, root / "kernels", results=root / "results")
            nbformat.write(stored(nb), path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
