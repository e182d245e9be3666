"""The library's shape: its modules import no experiment infrastructure (the results store,
progress and comparisons in dpprep.results)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_library_modules_do_not_import_the_results_store():
    code = ("import sys, pkgutil, importlib, dpprep\n"
            "for info in pkgutil.walk_packages(dpprep.__path__, 'dpprep.'):\n"
            "    if info.name != 'dpprep.results' and not info.name.endswith('__main__'):\n"
            "        importlib.import_module(info.name)\n"
            "print('dpprep.results' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False", out.stderr[-2000:]

