"""README examples marked "runs as written" run as written, each on its own in a fresh
interpreter (so one example cannot lean on names another defined)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

MARK = "<!-- README example: runs as written (tests/test_readme.py) -->"


def _examples() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return re.findall(re.escape(MARK) + r"\s*```python\n(.*?)```", text, flags=re.S)


EXAMPLES = _examples()


def test_marked_examples_were_found():
    assert len(EXAMPLES) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_readme_example_runs(index, tmp_path):
    script = tmp_path / f"example_{index}.py"
    script.write_text(EXAMPLES[index], encoding="utf-8")
    env = {**os.environ, "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"README example {index} failed:\n{done.stdout}\n{done.stderr[-3000:]}"
