"""Renamed public names: every old name still works, warns with RenamedWarning and does exactly
what the new one does; giving both names is a TypeError; and nothing in the repository uses an
old name any more (the aliases are for users' code only)."""

from __future__ import annotations

import dataclasses
import importlib
import math
import re
import subprocess
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

from dpprep import renames
from dpprep.renames import RenamedWarning

ROOT = Path(__file__).resolve().parents[1]


def _old(fn):
    """``fn()`` under the old name: it must warn exactly RenamedWarning, and return its value."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    kinds = {w.category for w in caught}
    assert kinds == {RenamedWarning}, [str(w.message) for w in caught]
    return out


# (module, old attribute, new attribute)
MODULE_RENAMES = [
    ("dpprep.accounting.dp", "NEIGHBOURINGS", "NEIGHBORING_RELATIONS"),
    ("dpprep.accounting.dp", "Neighbouring", "NeighboringRelationName"),
    ("dpprep.noise", "noise_std", "leaf_stddevs"),
    ("dpprep.corrdp", "sum_noise_std", "sum_stddev"),
    ("dpprep.corrdp.sgd", "sweep", "sweep_points"),
    ("dpprep.corrdp.utility", "exact_minimiser", "exact_minimizer"),
    ("dpprep.dpsgdf", "Model", "GridModel"),
    ("dpprep.preprocess", "sign_normalise", "sign_normalize"),
    ("dpprep.preprocess.pca", "sign_normalise", "sign_normalize"),
    ("dpprep.preprocess.ptr", "dp_gd_noise_std", "dp_gd_stddev"),
    ("dpprep.preprocess.privacy.meta", "calibrate", "calibrate_mechanism"),
    ("dpprep.preprocess.privacy.meta", "Calibration", "MechanismCalibration"),
    # the module's old path serves the same module, old names included
    ("dpprep.accounting.meta", "calibrate", "calibrate_mechanism"),
]


@pytest.mark.parametrize("module, old, new", MODULE_RENAMES)
def test_an_old_module_attribute_is_the_new_one_with_a_warning(module, old, new):
    mod = importlib.import_module(module)
    assert _old(lambda: getattr(mod, old)) is getattr(mod, new)
    assert old not in getattr(mod, "__all__", ())
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        mod.not_a_name  # noqa: B018


def test_old_keyword_arguments_give_the_same_result():
    from dpprep.accounting import dp
    from dpprep.dpsgdf import theory
    from dpprep.plan import DPPlan, ExecutionPlan

    new = dp.sgd_iter_rdp(2.0, stddev=3.0, lipschitz=1.0, n=1000)
    assert _old(lambda: dp.sgd_iter_rdp(2.0, noise_std=3.0, lipschitz=1.0, n=1000)) == new
    assert _old(
        lambda: ExecutionPlan.create("full", 100, steps=3, neighbouring="replace_one")
    ) == ExecutionPlan.create("full", 100, steps=3, neighboring_relation="replace_one")
    kwargs = dict(l2_clip_norm=1.0, delta=1e-5, noise_multiplier=2.0, steps=3)
    assert (
        _old(lambda: DPPlan.create("full", 100, neighbouring="replace_one", **kwargs)).epsilon
        == DPPlan.create("full", 100, neighboring_relation="replace_one", **kwargs).epsilon
    )
    x, y = theory.counterexample(40, 0.5)
    common = dict(clip=1.0, lr=0.1, steps=5, batch_size=4, sampling="replacement")
    draws = {"batches": [np.arange(4)] * 5, "noise": np.ones((5, 2))}
    old = _old(
        lambda: theory.dpsgd_linear(x, y, noise_std_sum=0.5, normaliser=4, draws=draws, **common)
    )
    new = theory.dpsgd_linear(x, y, stddev=0.5, normalize_by=4, draws=draws, **common)
    np.testing.assert_array_equal(old["average"], new["average"])


def test_old_field_names_construct_and_read_the_same_object():
    from dpprep import dpsgdf
    from dpprep.accounting import dp
    from dpprep.plan import DPPlan

    options = _old(lambda: dp.AccountingOptions(neighbouring="replace_one"))
    assert options == dp.AccountingOptions(neighboring_relation="replace_one")
    assert _old(lambda: options.neighbouring) == "replace_one"
    cfg = _old(lambda: dpsgdf.DpsgdfConfig(clip_norm=2.0, neighbouring="replace_one"))
    assert cfg == dpsgdf.DpsgdfConfig(l2_clip_norm=2.0, neighboring_relation="replace_one")
    assert _old(lambda: cfg.clip_norm) == 2.0
    plan = DPPlan.create("poisson", 1000, batch_size=50, steps=4, l2_clip_norm=1.0,
                         noise_multiplier=1.0, delta=1e-5)  # fmt: skip
    assert _old(lambda: plan.normaliser) == plan.normalize_by == 50
    assert _old(lambda: plan.neighbouring) == plan.neighboring_relation
    assert _old(lambda: plan.execution.normaliser) == 50


def test_both_names_at_once_is_a_type_error_not_a_choice():
    from dpprep import dpsgdf
    from dpprep.accounting import dp

    with pytest.raises(TypeError, match="both 'neighbouring' and its new name"):
        dp.AccountingOptions(neighbouring="replace_one", neighboring_relation="add_remove")
    with pytest.raises(TypeError, match="both 'noise_std' and its new name 'stddev'"):
        dp.sgd_iter_rdp(2.0, noise_std=3.0, stddev=3.0, lipschitz=1.0, n=10)
    cfg = dpsgdf.DpsgdfConfig()
    # replace passes every field under its new name: an old one is a conflict, never dropped
    with pytest.raises(TypeError, match="both 'clip_norm'"):
        dataclasses.replace(cfg, clip_norm=3.0)


def test_old_sweep_point_names_are_renamed_and_train_the_same():
    """``clip_norm`` (core) and CorrDP's ``noise_std`` field in points, per_seed and
    ``Hyper.extra``: the same runs as under the new names, bit for bit."""
    from dpprep import models, sweeps
    from dpprep.algorithms import Hyper, TrainConfig
    from dpprep.corrdp.sgd import CoordinateNoise
    from dpprep.plan import DPPlan

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3)).astype(np.float32)
    y = (rng.random(64) < 0.5).astype(np.float32)
    model = models.logistic_regression(3)
    params0 = model.init(None)
    keys = jax.random.split(jax.random.key(0), 2)
    plan = DPPlan.non_private("full", 64, steps=3, l2_clip_norm=math.inf)
    config = TrainConfig(model=model, plan=plan, hyper=Hyper(0.5), extensions=(CoordinateNoise(),))

    def params(points, **kw):
        return np.asarray(
            sweeps.sweep_points(config, params0, (x, y), keys, points, **kw).params["w"]
        )

    new = params({"stddev": [0.0, 0.5], "l2_clip_norm": [1.0, 2.0]})
    old = _old(lambda: params({"noise_std": [0.0, 0.5], "clip_norm": [1.0, 2.0]}))
    np.testing.assert_array_equal(old, new)
    per_seed = {"stddev": np.array([[0.1, 0.2], [0.3, 0.4]])}
    new = params(per_seed, per_seed=("stddev",))
    old = _old(lambda: params(per_seed, per_seed=("noise_std",)))
    np.testing.assert_array_equal(old, new)
    with pytest.raises(TypeError, match="both 'noise_std' and its new name 'stddev'"):
        params({"noise_std": [0.1], "stddev": [0.1]})

    extra = dataclasses.replace(config, hyper=Hyper(0.5, extra={"noise_std": 0.5}))
    new_extra = dataclasses.replace(config, hyper=Hyper(0.5, extra={"stddev": 0.5}))
    one = {"learning_rate": [0.5]}
    old = _old(lambda: sweeps.sweep_points(extra, params0, (x, y), keys, one).params["w"])
    new = sweeps.sweep_points(new_extra, params0, (x, y), keys, one).params["w"]
    np.testing.assert_array_equal(np.asarray(old), np.asarray(new))


def test_a_sampler_written_with_the_old_attribute_still_plans():
    from dpprep import sampling
    from dpprep.plan import ExecutionPlan

    class OldPoisson:
        """A user's sampler from before the rename: Poisson's methods, the old attribute name."""

        name = "old_poisson_for_test"
        neighbouring = "add_remove"

        def __getattr__(self, attr):
            if attr == "neighboring_relation":
                raise AttributeError(attr)
            return getattr(sampling.PoissonSampler(), attr)

    impl = OldPoisson()
    sampling.SAMPLERS[impl.name] = impl
    try:
        plan = _old(lambda: ExecutionPlan.create(impl.name, 100, batch_size=10, steps=3))
        assert plan.neighboring_relation == "add_remove"
    finally:
        del sampling.SAMPLERS[impl.name]


def test_renamed_fields_refuses_what_it_cannot_do():
    with pytest.raises(TypeError, match="decorates dataclasses"):
        renames.renamed_fields(a="b")(type("Plain", (), {}))

    @dataclasses.dataclass(frozen=True)
    class Point:
        b: int

    with pytest.raises(TypeError, match="no fields \\['c'\\]"):
        renames.renamed_fields(a="c")(Point)


# Old names that must not appear in the repository's own code, docs or notebooks (as text, so that
# code inside strings — subprocess scripts, notebooks — is seen too). The alias tables name them on
# purpose; so do committed results (their CSV columns keep the old names, see docs/development.md).
OLD_NAME_PATTERNS = [
    r"(?<![\w.])clip_norm\s*=",
    r"\.clip_norm\b",
    r"[\"']clip_norm[\"']\s*:",
    r"\bneighbouring\s*=",
    r"\.neighbouring\b",
    r"[\"']neighbouring[\"']",
    r"\bNEIGHBOURINGS\b",
    r"\bnormaliser\s*=",
    r"\.normaliser\b",
    r"\bnoise_std_sum\b",
    r"\bsum_noise_std\b",
    r"\bdp_gd_noise_std\b",
    r"\bnoise\.noise_std\b",
    r"\bsign_normalise\b",
    r"\bexact_minimiser\b",
    r"\bmeta\.calibrate\b(?!_)",
    r"\bmeta\.Calibration\b",
    r"\bdpsgdf\.Model\b",
    r"\bsgd\.sweep\b(?!_)",
]
ALIAS_LINE = re.compile(
    r"renamed_fields\(|renamed_kwargs\(|module_renames\(|renamed_fields: ClassVar|CORE_RENAMES ="
    r"|warn_renamed\(|globals\(\), \{"
)
# The alias machinery and these tests name old names on purpose.
ALIAS_FILES = {"dpprep/renames.py", "tests/test_renames.py"}
# Columns of committed result CSVs that keep their names (renaming them is a results change).
KEPT_COLUMNS = {
    "experiments/wang2026_selection/report.py": r"[\"']clip_norm[\"']\s*:",
}


def test_the_repository_uses_no_old_name():
    files = subprocess.run(
        ["git", "ls-files", "dpprep", "experiments", "tests", "docs", "notebooks", "benchmarks",
         "scripts", "README.md"],  # fmt: skip
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    found = []
    for name in files:
        if name in ALIAS_FILES or not name.endswith((".py", ".md", ".ipynb")):
            continue
        path = ROOT / name
        if not path.is_file():
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        in_table = False  # docs/development.md's "Renamed names" section lists them on purpose
        for number, line in enumerate(lines, 1):
            if line.startswith("## "):
                in_table = line == "## Renamed names"
            if in_table:
                continue
            near = lines[max(0, number - 3) : number + 2]  # an alias's call may span lines
            if any(ALIAS_LINE.search(other) for other in near):
                continue
            for pattern in OLD_NAME_PATTERNS:
                if pattern == KEPT_COLUMNS.get(name):
                    continue
                if re.search(pattern, line):
                    found.append(f"{name}:{number}: {line.strip()}")
    assert not found, "old names in use:\n" + "\n".join(found)
