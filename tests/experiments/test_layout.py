"""The experiments' layout rules that keep cached units honest and modules small."""

from __future__ import annotations

from pathlib import Path

from experiments import REGISTRY
from experiments.results import identity

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 300


def _sources() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "experiments").rglob("*.py"))


def _not_keyed(relpath: str) -> bool:
    return not identity._keyed(relpath)


def test_figures_and_cost_models_are_imported_only_where_they_cannot_feed_a_unit():
    """The units' digest leaves out ``plots.py``, ``plotting.py``, ``cost.py`` and ``notes.py``
    (``experiments.results.NOT_KEYED``); that is sound only while no unit can run their code:
    figures are imported by an experiment's ``__init__.py`` (which draws them after its units)
    or by other figure modules, cost models only by the planner (and other cost models), report
    notes only by an experiment's ``__init__.py`` and ``report.py`` (tables, after the units)."""
    wrong = []
    for relpath in _sources():
        path = Path(relpath)
        for dep in identity._imported_experiment_files(ROOT, relpath):
            if not _not_keyed(dep):
                continue
            if Path(dep).name == "cost.py":
                allowed = path.parent.name == "planning" or path.name == "cost.py"
            elif Path(dep).name == "notes.py":  # report text: rendered after the units
                allowed = path.name in ("__init__.py", "report.py")
            else:
                allowed = path.name in ("__init__.py", "plots.py", "plotting.py") and (
                    relpath != "experiments/__init__.py"
                )
            if not allowed:
                wrong.append(f"{relpath} imports {dep}")
    assert not wrong, wrong


def test_the_rule_catches_a_unit_module_importing_a_figure(tmp_path):
    (tmp_path / "experiments" / "c").mkdir(parents=True)
    (tmp_path / "experiments" / "c" / "compute.py").write_text("from . import plots\n")
    (tmp_path / "experiments" / "c" / "plots.py").write_text("X = 1\n")
    deps = identity._imported_experiment_files(tmp_path, "experiments/c/compute.py")
    assert "experiments/c/plots.py" in deps and _not_keyed("experiments/c/plots.py")


def test_every_experiment_is_a_package_runnable_alone():
    for experiment_id, (module, _) in REGISTRY.items():
        package = ROOT / module.replace(".", "/")
        assert module == f"experiments.{experiment_id}"
        assert (package / "__init__.py").is_file() and (package / "__main__.py").is_file()


def test_no_file_under_experiments_is_over_300_lines():
    """Each file holds one job (config, units, report, figures, cost model, infrastructure)."""
    long = {
        relpath: n
        for relpath in _sources()
        if (n := len((ROOT / relpath).read_text().splitlines())) > MAX_LINES
    }
    assert not long, long


def _modules_with_examples() -> list[str]:
    return [
        relpath.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        for relpath in _sources()
        if ">>>" in (ROOT / relpath).read_text() and not relpath.endswith("__main__.py")
    ]


def test_the_experiments_docstring_examples_run():
    import doctest
    import importlib

    names = _modules_with_examples()
    assert {"experiments.plotting", "experiments.targets"} <= set(names)
    for name in names:
        result = doctest.testmod(
            importlib.import_module(name),
            optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        )
        assert result.attempted > 0 and result.failed == 0, name
