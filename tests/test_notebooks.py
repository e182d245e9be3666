"""Every notebook's code cells run top to bottom (shell/magic lines skipped) and their asserts hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, data_dir, monkeypatch):
    monkeypatch.setenv("DPPREP_DATA_DIR", str(data_dir))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    cells = json.loads(path.read_text())["cells"]
    namespace: dict = {"__name__": "__notebook__"}
    for index, cell in enumerate(c for c in cells if c["cell_type"] == "code"):
        lines = [line for line in "".join(cell["source"]).splitlines() if not line.lstrip().startswith(("!", "%"))]
        exec(compile("\n".join(lines), f"{path.name}[cell {index}]", "exec"), namespace)
