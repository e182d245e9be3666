"""The library's shape: dpprep imports no experiment infrastructure (the results store, progress
and comparisons live in experiments.results, outside the package)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_library_modules_do_not_import_the_experiments():
    code = ("import sys, pkgutil, importlib, dpprep\n"
            "for info in pkgutil.walk_packages(dpprep.__path__, 'dpprep.'):\n"
            "    if not info.name.endswith('__main__'):\n"
            "        importlib.import_module(info.name)\n"
            "print(sorted(m for m in sys.modules if m == 'experiments' or m.startswith('experiments.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]", out.stderr[-2000:]
