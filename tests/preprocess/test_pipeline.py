"""Pipelines of pre-processing steps: the composition rules in closed form, the error for an order
with no known bound, and every composed (Δ∞, Δ2) checked over sampled replace-one neighbours."""

from __future__ import annotations

import numpy as np
import pytest

from dpprep.preprocess import Pipeline, Sensitivity, Step
from dpprep.preprocess import pipeline as pl

ETA = 0.05


def test_composition_rules_closed_form():
    imp, quant, pca = pl.impute_mean_step(), pl.quantize_step(ETA), pl.pca_rank_step(1)
    half = pl.rowwise("halve", lambda x: 0.5 * x, 0.5)
    n = 100
    s_imp, s_q, s_pca = Sensitivity(5, 0.01), Sensitivity(4, 2 * ETA), Sensitivity(n, 0.004)
    trace = pl.compose([imp, half, quant, pca], [s_imp, None, s_q, s_pca], n)
    assert trace[0].composed == s_imp  # first data-dependent step: Def. 4 verbatim
    assert trace[1].composed == Sensitivity(5, 0.005)  # Lipschitz map: Δ2·L, Δ∞ kept
    # quantization after 5 changed records: k = 6 differing inputs; Δ∞ = 5 + 6·4, Δ2 = max(2η, 0.005
    # + 2η)
    assert trace[2].composed.linf == 29 and trace[2].composed.l2 == pytest.approx(0.005 + 2 * ETA)
    # PCA (uniform): every record, Δ2 = r + k·Δ2_pca with k = 30
    assert trace[3].composed.linf == n and trace[3].composed.l2 == pytest.approx(
        0.005 + 2 * ETA + 30 * 0.004
    )
    # Caps: Δ∞ ≤ n, Δ2 ≤ 2 (outputs in the unit ball).
    capped = pl.compose([imp, pca], [Sensitivity(50, 0.01), Sensitivity(n, 0.5)], n)
    assert capped[-1].composed == Sensitivity(n, 2.0)
    # Row-wise first: the data-dependent step sees replace-one neighbours.
    assert pl.compose([half, quant], [None, s_q], n)[-1].composed == s_q
    # A step that changed nothing (Δ∞ = 0, e.g. no missing value) leaves the next step's inputs
    # replace-one.
    assert pl.compose([imp, quant], [Sensitivity(0, 0.01), s_q], n)[-1].composed == s_q


@pytest.mark.parametrize(
    "steps,pair",
    [
        (
            (pl.quantize_step(ETA), pl.impute_mean_step()),
            ("quantization (eta=0.05)", "mean imputation"),
        ),
        (
            (pl.impute_mean_step(), pl.project_step(), pl.impute_median_step()),
            ("mean imputation", "median imputation"),
        ),
        ((pl.pca_rank_step(1), pl.impute_mean_step()), ("PCA rank-1", "mean imputation")),
    ],
)
def test_unknown_order_raises_naming_the_pair(steps, pair):
    pipe = Pipeline(steps)
    with pytest.raises(ValueError, match="no sensitivity bound is known") as info:
        pipe.check()
    assert all(repr(name) in str(info.value) for name in pair)
    x = np.full((10, 2), 0.1)
    with pytest.raises(ValueError, match="no sensitivity bound is known"):
        pipe.run(x)
    with pytest.raises(ValueError, match="no sensitivity bound is known"):
        pl.compose(steps, [Sensitivity(3, 0.1)] + [Sensitivity(1, 0.1)] * (len(steps) - 1), 10)


def test_bad_steps():
    with pytest.raises(ValueError, match="steps"):
        Pipeline(())
    with pytest.raises(TypeError, match="Step"):
        Pipeline((lambda x: x,))
    with pytest.raises(ValueError, match="displacement"):
        Step("q", lambda x: (x, Sensitivity(0, 0)), group="displacement")
    with pytest.raises(ValueError, match="group"):
        Step("q", lambda x: (x, Sensitivity(0, 0)), group="chain")
    with pytest.raises(ValueError, match="lipschitz"):
        pl.rowwise("f", lambda x: x, -1.0)
    with pytest.raises(ValueError, match="eta"):
        pl.quantize_step(0.0)
    with pytest.raises(ValueError, match="same length"):
        pl.compose([pl.impute_mean_step()], [], 5)


# ---- composed bounds over sampled neighbours -----------------------------------------------------


def _dataset(rng: np.random.Generator, n: int, d: int, missing: float) -> np.ndarray:
    """Unit-ball rows in near-duplicate groups spread along a dominant axis (a clear PCA gap), with
    NaNs completely at random in column 1."""
    rows = []
    while len(rows) < n:
        centre = np.zeros(d)
        centre[0] = rng.uniform(-0.8, 0.8)
        centre[1:] = rng.normal(scale=0.08, size=d - 1)
        for _ in range(rng.integers(1, 4)):
            off = rng.normal(size=d)
            rows.append(centre + off * rng.uniform(0, 0.45 * ETA) / np.linalg.norm(off))
    x = np.array(rows[:n])
    x[rng.random(n) < missing, 1] = np.nan
    return x[rng.permutation(n)]


def _neighbour(rng: np.random.Generator, x: np.ndarray) -> tuple[int, np.ndarray]:
    """Replace one row: by a copy of another row (with its NaNs), a point near one (inside η or in
    the 3η annulus), or a random unit-ball point, sometimes missing column 1."""
    i = int(rng.integers(x.shape[0]))
    x2 = x.copy()
    base = np.nan_to_num(x[int(rng.integers(x.shape[0]))])
    kind = rng.integers(4)
    if kind == 0:
        z = x[int(rng.integers(x.shape[0]))].copy()
    elif kind == 3:
        z = rng.normal(size=x.shape[1])
        z *= rng.uniform(0, 0.95) / np.linalg.norm(z)
    else:
        off = rng.normal(size=x.shape[1])
        z = base + ETA * (
            rng.uniform(0.1, 1.0) if kind == 1 else rng.uniform(1.1, 3.0)
        ) * off / np.linalg.norm(off)
        z /= max(1.0, np.linalg.norm(z))
    if rng.random() < 0.3:
        z[1] = np.nan
    x2[i] = z
    return i, x2


PIPELINES = {
    "impute>quantize": lambda: (pl.impute_mean_step(), pl.quantize_step(ETA)),
    "impute>project>quantize": lambda: (
        pl.impute_mean_step(),
        pl.project_step(),
        pl.quantize_step(ETA),
    ),
    "impute>quantize>pca": lambda: (
        pl.impute_mean_step(),
        pl.quantize_step(ETA),
        pl.pca_rank_step(1),
    ),
    "impute>pca": lambda: (pl.impute_mean_step(), pl.pca_rank_step(1)),
    "impute>dedup": lambda: (pl.impute_mean_step(), pl.dedup_step(ETA)),
    "median>quantize": lambda: (pl.impute_median_step(), pl.quantize_step(ETA)),
    "impute>halve>quantize": lambda: (
        pl.impute_mean_step(),
        pl.rowwise("halve", lambda x: 0.5 * x, 0.5),
        pl.quantize_step(ETA),
    ),
    "halve>impute": lambda: (pl.rowwise("halve", lambda x: 0.5 * x, 0.5), pl.impute_mean_step()),
}


@pytest.mark.parametrize("name", list(PIPELINES))
def test_composed_bounds_hold_over_sampled_neighbours(name):
    pipe = Pipeline(PIPELINES[name]())
    rng = np.random.default_rng(sum(map(ord, name)))
    worst_linf = worst_l2 = 0.0
    moved = 0
    for trial in range(80):
        if trial % 10 == 0:  # a fresh dataset every 10 trials (trial 0 included)
            x = _dataset(rng, 60, 3, missing=0.1)
        i, x2 = _neighbour(rng, x)
        r1, r2 = pipe.run(x), pipe.run(x2)
        common = np.ones(x.shape[0], bool)
        common[i] = False
        dist = np.linalg.norm(r1.data[common] - r2.data[common], axis=1)
        h, l2 = int(np.count_nonzero(dist > 1e-12)), float(dist.max())
        # The bound over ℒ must cover both datasets of the pair: the larger of the two.
        linf = max(r1.sensitivity.linf, r2.sensitivity.linf)
        bound_l2 = max(r1.sensitivity.l2, r2.sensitivity.l2)
        assert h <= linf, (name, trial, h, linf)
        assert l2 <= bound_l2 + 1e-12, (name, trial, l2, bound_l2)
        moved += h > 0
        worst_linf = max(worst_linf, h / linf if linf else 0.0)
        worst_l2 = max(worst_l2, l2 / bound_l2 if bound_l2 else 0.0)
    assert moved > 0  # the neighbours do move common records through the pipeline
    print(f"{name}: worst measured/bound Δ∞ {worst_linf:.3f}, Δ2 {worst_l2:.3f}")


def test_single_step_pipeline_is_the_step():
    rng = np.random.default_rng(3)
    x = _dataset(rng, 50, 3, missing=0.1)
    res = Pipeline((pl.impute_mean_step(),)).run(x)
    from dpprep.preprocess import impute_mean

    direct = impute_mean(x)
    np.testing.assert_array_equal(res.data, direct.data)
    assert res.sensitivity == direct.sensitivity and len(res.trace) == 1


def test_why_a_group_version_is_needed():
    """Imputation moves K rows slightly; each sits just outside the 3η annulus of its own good
    cluster,
    so a replaced row that shifts the imputed mean breaks K clusters at once. The common records
    that
    change (2K) exceed the sum of the steps' own Δ∞ (K + 2·max|B|), but not the composed bound."""
    k_rows, eta = 6, ETA
    centres = np.linspace(-0.75, 0.75, k_rows)
    imputed_rows = [[c, np.nan] for c in centres]  # mean of column 1 will be 0
    clusters = [r for c in centres for r in ([c, 3 * eta + 0.002], [c + 0.004, 3 * eta + 0.002])]
    # four fillers pull the observed mean of column 1 to 0
    fill = -2 * k_rows * (3 * eta + 0.002) / 4
    fillers = [[x, fill] for x in (-0.6, -0.2, 0.2, 0.6)]
    x1 = np.array(imputed_rows + clusters + fillers)
    x2 = x1.copy()
    x2[-1, 1] = fill + 0.156  # the replaced row: the imputed mean rises by ~0.01 > 0.002
    pipe = Pipeline((pl.impute_mean_step(), pl.quantize_step(eta)))
    r1, r2 = pipe.run(x1), pipe.run(x2)
    common = np.arange(len(x1)) != len(x1) - 1
    changed = int(
        np.count_nonzero(np.linalg.norm(r1.data[common] - r2.data[common], axis=1) > 1e-12)
    )
    naive = max(
        t.trace[0].step_sensitivity.linf + t.trace[1].step_sensitivity.linf for t in (r1, r2)
    )
    assert changed == 2 * k_rows and naive == k_rows + 4
    assert changed > naive  # adding the steps' own Δ∞ would be invalid
    n = len(x1)
    assert r1.sensitivity.linf == min(k_rows + (k_rows + 1) * 4, n)  # chain rule, capped at n
    # S2's clusters are broken: p = 2
    assert r2.sensitivity.linf == min(k_rows + (k_rows + 1) * 2, n)
    assert changed <= min(r1.sensitivity.linf, r2.sensitivity.linf)
