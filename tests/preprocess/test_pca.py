"""PCA rank/dimension reduction: Prop. 5 bound on random neighbours, sign convention,
determinism."""

from __future__ import annotations

import numpy as np
import pytest

from dpprep.preprocess import pca as pca_mod
from dpprep.preprocess import pca_reduce, sign_normalize
from dpprep.preprocess.sensitivity import pca_dim_sensitivity, pca_rank_sensitivity


def _low_rank(rng: np.random.Generator, n: int, d: int, k: int) -> np.ndarray:
    basis = np.linalg.qr(rng.normal(size=(d, d)))[0]
    scales = np.r_[np.linspace(0.8, 0.5, k), np.full(d - k, 0.08)]
    x = (rng.normal(size=(n, d)) * scales) @ basis.T
    norms = np.linalg.norm(x, axis=1)
    return x / np.maximum(norms, 1.0)[:, None]


def _changes(a, b, replaced):
    keep = np.ones(a.shape[0], bool)
    keep[replaced] = False
    dist = np.linalg.norm(a[keep] - b[keep], axis=1)
    return int(np.count_nonzero(dist > 1e-13)), float(dist.max())


@pytest.mark.parametrize("mode, k", [("rank", 1), ("rank", 2), ("dim", 1), ("dim", 2)])
def test_prop5_bound_holds_on_random_neighbours(mode, k):
    rng = np.random.default_rng(k)
    n, d = 60, 5
    x = _low_rank(rng, n, d, k)
    basis = np.linalg.eigh(np.cov(x, rowvar=False))[1][:, ::-1]
    worst = 0.0
    for _ in range(200):
        x2 = x.copy()
        if rng.random() < 0.5:  # random unit-ball record in a random slot
            i = int(rng.integers(n))
            z = rng.normal(size=d)
            x2[i] = z * rng.uniform(0.0, 1.0) / np.linalg.norm(z)
        else:  # adversarial: a unit record halfway between a top and a bottom eigenvector
            a, b = int(rng.integers(k)), int(k + rng.integers(d - k))
            i = (
                int(np.argmax(np.abs(x @ basis[:, a])))
                if rng.random() < 0.5
                else int(rng.integers(n))
            )
            x2[i] = (
                rng.choice([-1.0, 1.0]) * basis[:, a] + rng.choice([-1.0, 1.0]) * basis[:, b]
            ) / np.sqrt(2)
        r1, r2 = pca_reduce(x, k, mode=mode), pca_reduce(x2, k, mode=mode)
        # Bound over ℒ ∋ {S1, S2}: the smaller gap of the two.
        if mode == "rank":
            bound = pca_rank_sensitivity(n, min(r1.gap_k, r2.gap_k))
        else:
            bound = pca_dim_sensitivity(n, min(r1.gap_k, r2.gap_k), min(r1.gap_1, r2.gap_1))
        h, l2 = _changes(r1.data, r2.data, i)
        assert h <= bound.linf
        assert l2 <= bound.l2
        worst = max(worst, l2 / bound.l2)
    # Prop. 5 is a worst-case bound, ~20x (rank) to ~130x (dim) above these neighbours' changes;
    # pin that range so a bound inflated by an order of magnitude would be noticed.
    assert worst > (0.02 if mode == "rank" else 0.004)


def test_rank_reduction_is_a_projection_and_tau_constant():
    rng = np.random.default_rng(0)
    x = _low_rank(rng, 101, 4, 1)
    r = pca_reduce(x, 1)
    np.testing.assert_allclose(r.transform(r.data), r.data, atol=1e-12)
    assert r.sensitivity.linf == 101
    assert r.sensitivity.tau == pytest.approx(12.2 / r.gap_k, rel=1e-12)
    assert r.gap_used == r.gap_k == pytest.approx(r.eigenvalues[0] - r.eigenvalues[1])
    cov = np.cov(x, rowvar=False)  # 1/(n−1) centred covariance
    np.testing.assert_allclose(np.sort(np.linalg.eigvalsh(cov))[::-1], r.eigenvalues, atol=1e-12)
    smaller = pca_reduce(x, 1, gap_lower_bound=r.gap_k / 2)
    assert smaller.sensitivity.l2 == pytest.approx(2 * r.sensitivity.l2)


def test_sign_convention_and_determinism():
    rng = np.random.default_rng(1)
    x = _low_rank(rng, 80, 6, 2)
    a = pca_reduce(x, 2, mode="dim")
    b = pca_reduce(x.copy(), 2, mode="dim")
    np.testing.assert_array_equal(a.components, b.components)
    np.testing.assert_array_equal(a.data, b.data)
    for col in a.components.T:
        assert col[np.argmax(np.abs(col))] > 0
    perm = rng.permutation(x.shape[0])
    c = pca_reduce(x[perm], 2, mode="dim")
    np.testing.assert_allclose(c.components, a.components, atol=1e-10)  # same signs
    np.testing.assert_allclose(c.data, a.data[perm], atol=1e-10)
    d = pca_reduce(-x, 2, mode="dim")  # same covariance, so same basis
    np.testing.assert_allclose(d.components, a.components, atol=1e-10)
    v = np.array([[0.6, -0.8], [-0.8, -0.6]])
    np.testing.assert_array_equal(sign_normalize(v), [[-0.6, 0.8], [0.8, 0.6]])


def test_bad_input():
    x = _low_rank(np.random.default_rng(2), 20, 3, 1)
    with pytest.raises(ValueError, match="k must be smaller"):
        pca_reduce(x, 3)
    with pytest.raises(ValueError, match="k must be"):
        pca_reduce(x, 0)
    with pytest.raises(ValueError, match="mode"):
        pca_reduce(x, 1, mode="svd")
    with pytest.raises(ValueError, match="at least 2 rows"):
        pca_reduce(x[:1], 1)
    with pytest.raises(ValueError, match="exceeds"):
        pca_reduce(x, 1, gap_lower_bound=10.0)
    with pytest.raises(ValueError, match="gap_lower_bound"):
        pca_reduce(x, 1, gap_lower_bound=0.0)
    with pytest.raises(ValueError, match="eigen-gap"):
        pca_reduce(np.tile([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]], (5, 1)), 2)
    with pytest.raises(ValueError, match="non-finite"):
        pca_reduce(np.where(x > 0.5, np.inf, x), 1)
    with pytest.raises(ValueError, match="unit L2 ball"):
        pca_reduce(x * 5, 1)


@pytest.mark.parametrize(
    "rows",
    [
        # constant rows: centring leaves rounding residue (gap ~1e-31, "l2" ~1e29 before)
        np.full((100, 5), 0.1),
        np.tile([0.3, 0.1, 0.2, 0.05, 0.4], (100, 1)),
        np.tile([0.3, 0.1, 0.2, 0.05, 0.4], (100, 1))
        + 1e-12 * np.random.default_rng(0).normal(size=(100, 5)),
    ],
)
@pytest.mark.parametrize("mode", ["rank", "dim"])
def test_rounding_level_gap_is_a_tie(rows, mode):
    with pytest.raises(
        ValueError, match=r"eigen-gap is .* within rounding error of a tie \(tolerance .*d=5\)"
    ):
        pca_reduce(rows, 1, mode=mode)


def _two_variances(n, d, var1, var2):
    """Rows with covariance diag(var1, var2, 0, ...) exactly up to rounding (orthogonal ±1
    columns)."""
    t = np.arange(n)
    x = np.zeros((n, d))
    x[:, 0] = np.sqrt(var1 * (n - 1) / n) * np.where(t % 2 == 0, 1.0, -1.0)
    x[:, 1] = np.sqrt(var2 * (n - 1) / n) * np.where(t % 4 < 2, 1.0, -1.0)
    return x


def test_gap_tolerance_is_relative_to_the_data_scale():
    n, d = 400, 4
    for scale in (1.0, 1e-4, 1e-8):  # the same data at any scale: gaps and tolerance shrink alike
        var1 = 0.25 * scale**2
        tol = pca_mod.gap_tolerance(_two_variances(n, d, var1, var1), np.array([var1]))
        assert 0 < tol < 1e-12 * scale**2
        # a genuine gap, 100× the tolerance
        ok = pca_reduce(_two_variances(n, d, var1, var1 - 100 * tol), 1)
        assert ok.gap_k == pytest.approx(100 * tol, rel=0.05)
        with pytest.raises(ValueError, match="within rounding error of a tie"):
            pca_reduce(_two_variances(n, d, var1, var1 - tol / 10), 1)
