"""The library's shape: dpprep imports no experiment infrastructure (the results store, progress
and comparisons live in experiments.results, outside the package)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_library_modules_do_not_import_the_experiments():
    code = (
        "import sys, pkgutil, importlib, dpprep\nfor info in pkgutil.walk_packages(dpprep.__path__,"
        " 'dpprep.'):\n    if not info.name.endswith('__main__'):\n       "
        " importlib.import_module(info.name)\nprint(sorted(m for m in sys.modules if m =="
        " 'experiments' or m.startswith('experiments.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert out.stdout.strip() == "[]", out.stderr[-2000:]


#: The model-agnostic core: the engine, its drivers and primitives (each paper is a module that
#: extends it: dpsgdf, corrdp, ptr/dp_pca/accounting's Theorem 2 for Hu et al.).
CORE = (
    "algorithms",
    "clipping",
    "extensions",
    "features",
    "frameworks",
    "models",
    "noise",
    "optimizers",
    "plan",
    "sampling",
    "selection",
    "step",
    "streams",
    "sweeps",
    "taps",
    "validation",
    "files",
    "tracing",
)
#: What the core may load of the package besides itself: the accountant wrappers it calibrates with.
CORE_MAY_IMPORT = {"dpprep", "dpprep.accounting", "dpprep.accounting.dp", "dpprep.renames"}


def test_the_core_imports_no_paper_module():
    code = (
        "import sys, importlib\n"
        f"for name in {CORE!r}:\n"
        "    importlib.import_module('dpprep.' + name)\n"
        "print(sorted(m for m in sys.modules if m.startswith('dpprep')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    loaded = set(eval(out.stdout.strip()))  # a printed list of module names
    assert loaded - {f"dpprep.{name}" for name in CORE} <= CORE_MAY_IMPORT, sorted(loaded)


def test_the_engine_names_no_paper():
    """Hyper carries only the learning rate and the extensions' fields (the papers' live there), the
    engine traces only those and the plan's noise and clip bound, and no core module's code
    (docstrings aside, which cite the papers) names a paper's module or its quantities."""
    import ast
    import dataclasses

    from dpprep.algorithms import Hyper, Traced

    assert [f.name for f in dataclasses.fields(Hyper)] == ["learning_rate", "extra"]
    assert [f.name for f in dataclasses.fields(Traced)] == [
        "learning_rate",
        "noise_multiplier",
        "l2_clip_norm",
        "extra",
    ]
    paper_words = (
        "dpsgdf",
        "corrdp",
        "ptr",
        "batch_clip",
        "noise_scales",
        "private_mean",
        "theorem",
    )
    for name in CORE:
        tree = ast.parse((REPO / "dpprep" / f"{name}.py").read_text())
        for node in ast.walk(tree):  # names, attributes and imports: the code, not its docstrings
            words = []
            if isinstance(node, ast.Name):
                words = [node.id]
            elif isinstance(node, ast.Attribute):
                words = [node.attr]
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                words = [alias.name for alias in node.names] + [getattr(node, "module", None) or ""]
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.arg)):
                words = [getattr(node, "name", None) or getattr(node, "arg", "")]
            for word in words:
                assert not any(p in word.lower() for p in paper_words), (
                    f"dpprep/{name}.py names {word!r}"
                )


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    """import-linter's contracts of pyproject.toml (as `make test` runs them) on the tree at
    ``root``."""
    import os

    env = os.environ | {"PYTHONPATH": str(root)}  # ``root``'s packages, not the installed checkout
    command = (
        "import sys; from importlinter.cli import lint_imports_command;"
        " sys.exit(lint_imports_command())"
    )
    return subprocess.run(
        [sys.executable, "-c", command, str(root / "pyproject.toml")],
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
    )


def test_the_import_contracts_hold_and_catch_a_planted_upward_import(tmp_path):
    import shutil

    for name in ("dpprep", "experiments"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    done = _lint_imports(tmp_path)
    assert done.returncode == 0 and "Contracts: 2 kept, 0 broken." in done.stdout, (
        done.stdout[-3000:] + done.stderr[-2000:]
    )
    # A model module reaching up into the plan, one paper importing another, and library code using
    # a moved module's old name: each refused.
    for path, line, contract in [
        ("dpprep/models.py", "import dpprep.plan", "Layers of dpprep"),
        ("dpprep/corrdp/tv.py", "import dpprep.dpsgdf", "Layers of dpprep"),
        ("dpprep/selection.py", "from dpprep.accounting import meta", "Layers of dpprep"),
    ]:
        original = (tmp_path / path).read_text()
        (tmp_path / path).write_text(original + f"\n{line}  # planted\n")
        done = _lint_imports(tmp_path)
        (tmp_path / path).write_text(original)
        assert done.returncode != 0 and f"{contract}" in done.stdout, done.stdout[-3000:]
        broken = [row for row in done.stdout.splitlines() if row.endswith("BROKEN")]
        assert len(broken) == 1 and broken[0].startswith(contract), broken


def test_moved_modules_old_names_are_aliases_of_the_new_modules():
    """Each paper's modules live in its package; the names they had before (``dpprep.ptr``,
    ``dpprep.accounting.meta``...) are the same module objects, so old imports, attributes and
    monkeypatches keep working."""
    import importlib

    moved = {
        "dpprep.ptr": "dpprep.preprocess.ptr",
        "dpprep.dp_pca": "dpprep.preprocess.dp_pca",
        "dpprep.dpsgdf_theory": "dpprep.dpsgdf.theory",
        **{
            f"dpprep.accounting.{m}": f"dpprep.preprocess.privacy.{m}"
            for m in ("renyi", "table1", "table2", "meta", "sgd_samp", "theorem7")
        },
    }
    for old, new in moved.items():
        assert importlib.import_module(old) is importlib.import_module(new), old
    from dpprep import ptr
    from dpprep.accounting import meta

    assert ptr.guarantee is importlib.import_module("dpprep.preprocess.ptr").guarantee
    assert (
        meta.overall_privacy
        is importlib.import_module("dpprep.preprocess.privacy.meta").overall_privacy
    )
