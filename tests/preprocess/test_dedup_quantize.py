"""Deduplication and quantization: good clusters, empirical (Δ∞, Δ2) over neighbouring pairs, the
paper's pathological example (§5.1) and two configurations where Prop. 3's numbers are exceeded."""

from __future__ import annotations

import numpy as np
import pytest

from dpprep.preprocess import deduplicate, good_clusters, quantize

ETA = 0.05


def _clustered(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """Unit-ball data with near-duplicate groups (sizes 1–4) and isolated points."""
    rows = []
    while len(rows) < n:
        centre = rng.normal(size=d)
        centre *= rng.uniform(0.2, 0.85) / np.linalg.norm(centre)
        for _ in range(rng.integers(1, 5)):
            offset = rng.normal(size=d)
            rows.append(centre + offset * rng.uniform(0, 0.45 * ETA) / np.linalg.norm(offset))
    x = np.array(rows[:n])
    return x[rng.permutation(n)]


def _replacement(rng: np.random.Generator, x: np.ndarray) -> np.ndarray:
    """A neighbour's record: random point, near an existing point (inside η or in the 3η annulus),
    or an exact copy."""
    kind = rng.integers(4)
    if kind == 0:
        z = rng.normal(size=x.shape[1])
        z *= rng.uniform(0, 0.95) / np.linalg.norm(z)
        return z
    base = x[rng.integers(x.shape[0])]
    if kind == 3:
        return base.copy()
    radius = ETA * (rng.uniform(0.1, 1.0) if kind == 1 else rng.uniform(1.1, 3.0))
    offset = rng.normal(size=x.shape[1])
    return base + radius * offset / np.linalg.norm(offset)


def _changes(out1: np.ndarray, out2: np.ndarray, replaced: int) -> tuple[int, float]:
    common = np.ones(out1.shape[0], bool)
    common[replaced] = False
    dist = np.linalg.norm(out1[common] - out2[common], axis=1)
    return int(np.count_nonzero(dist > 1e-12)), float(dist.max(initial=0.0))


def test_good_clusters_partition_and_representative():
    x = np.array(
        [[0.0, 0.0], [0.01, 0.0], [0.5, 0.5], [0.5, 0.52], [0.9 * ETA + 0.5, 0.5], [-0.5, 0.0]]
    )
    gc = good_clusters(x, ETA)
    # {0,1} and {2,3,4} are good clusters; 5 is isolated (a size-1 good cluster).
    assert list(gc.cluster_id) == [0, 0, 2, 2, 2, 5]
    assert gc.sizes == {0: 2, 2: 3, 5: 1}
    # Row 4 is 0.045 from row 2 but 0.047 from row 3 — within η of all; row 2 is the first such row.
    assert list(gc.representative) == [0, 0, 2, 2, 2, 5]
    dd = deduplicate(x, ETA)
    assert list(dd.kept_mask) == [True, False, True, False, False, True]
    assert np.all(dd.data[~dd.kept_mask] == 0) and dd.data.shape == x.shape
    assert dd.p == 6 and dd.sensitivity.linf == 6 and dd.sensitivity.l2 == 1
    qq = quantize(x, ETA)
    np.testing.assert_array_equal(qq.data[[3, 4]], x[[2, 2]])
    assert qq.sensitivity.l2 == pytest.approx(2 * ETA)
    assert quantize(x, ETA, conservative=False).sensitivity.l2 == pytest.approx(ETA)


def test_annulus_point_breaks_a_cluster():
    x = np.array([[0.0, 0.0], [0.01, 0.0], [2 * ETA, 0.0]])
    gc = good_clusters(x, ETA)
    assert not gc.in_cluster[:2].any()  # the third point sits in the (η, 3η] annulus of both


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_prop3_bounds_hold_on_random_neighbours(seed):
    rng = np.random.default_rng(seed)
    x = _clustered(rng, 40, 3)
    worst_linf = worst_ratio_q = 0.0
    for _ in range(120):
        i = int(rng.integers(x.shape[0]))
        x2 = x.copy()
        x2[i] = _replacement(rng, x)
        d1, d2 = deduplicate(x, ETA), deduplicate(x2, ETA)
        q1, q2 = quantize(x, ETA), quantize(x2, ETA)
        p = max(d1.p, d2.p)  # the bound over ℒ must cover both datasets of the pair
        assert q1.p == d1.p and q2.p == d2.p
        h, l2 = _changes(d1.data, d2.data, i)
        assert h <= p and l2 <= 1.0 + 1e-12
        hq, l2q = _changes(q1.data, q2.data, i)
        assert hq <= p
        assert l2q <= max(q1.sensitivity.l2, q2.sensitivity.l2) + 1e-12  # conservative 2η
        worst_linf = max(worst_linf, h / p)
        worst_ratio_q = max(worst_ratio_q, l2q / ETA)
    # the neighbours do move dedup'd and quantized points
    assert worst_linf > 0 and worst_ratio_q > 0


def test_pathological_example_moves_every_common_point():
    """§5.1: points pairwise ≥ η apart but all within η of x; adding x removes all of them."""
    d = 5
    x0 = np.full(d, 0.1)
    r = 0.99 * ETA  # within η of x0 (clear of rounding), pairwise √2·r > η apart
    common = np.concatenate([x0 + r * np.eye(d), x0 - r * np.eye(d)])
    far = -x0 * 3
    s2 = np.vstack([common, far])  # far point in the last slot
    s1 = np.vstack([common, x0])  # ... replaced by the reference point
    n = s1.shape[0]
    d1, d2 = deduplicate(s1, ETA), deduplicate(s2, ETA)
    assert d2.kept_mask.all()  # nothing is a near-duplicate without x0
    assert d1.kept_mask.sum() == 1 and d1.kept_mask[-1]  # only x0 survives
    h, l2 = _changes(d1.data, d2.data, n - 1)
    assert h == n - 1  # every common record changes: the group-privacy regime
    assert h <= max(d1.p, d2.p) == 2 * n  # Prop. 3's 2·max|B| (|B| = n) still covers it
    assert l2 == pytest.approx(np.linalg.norm(common, axis=1).max())
    q1, q2 = quantize(s1, ETA), quantize(s2, ETA)
    hq, l2q = _changes(q1.data, q2.data, n - 1)
    assert hq == n - 1 and l2q == pytest.approx(r)


def _crowded_neighbour(d: int) -> tuple[np.ndarray, np.ndarray, int]:
    """2d tight pairs at distance 2.9η around z2, on the ± coordinate axes: every pair is a good
    cluster until z2 arrives within 3η of all their centers."""
    z2 = np.zeros(d)
    rows = []
    for axis in range(d):
        for sign in (1.0, -1.0):
            a = z2 + sign * 2.9 * ETA * np.eye(d)[axis]
            b = a + 0.3 * ETA * np.eye(d)[(axis + 1) % d]
            rows += [a, b]
    z1 = np.full(d, 0.5)  # far from everything
    s1 = np.vstack([rows, z1])
    s2 = np.vstack([rows, z2])
    return s1, s2, s1.shape[0] - 1


@pytest.mark.parametrize("d", [3, 4])
def test_prop3_linf_is_exceeded_by_a_crowded_neighbour(d):
    """Known gap in Prop. 3 (reported, not hidden): a neighbour within 3η of several good clusters
    destroys them all, so Δ∞ reaches 2d·(|B|−1) while 2·max|B| = 4."""
    s1, s2, i = _crowded_neighbour(d)
    for algo in (deduplicate, quantize):
        r1, r2 = algo(s1, ETA), algo(s2, ETA)
        assert r1.max_cluster_size == 2 and r2.max_cluster_size == 1
        h, _ = _changes(r1.data, r2.data, i)
        assert h == 2 * d > max(r1.p, r2.p) == 4


def test_quantization_l2_reaches_nearly_2eta_when_the_representative_changes():
    """Spec §10.13: the representative of x is z1 in S1 and z2 in S2, 1.8η apart; Prop. 3's Δ2 = η
    is exceeded, the conservative 2η is not."""
    x = np.array([0.3, 0.3])
    s1 = np.array([x + [-0.9 * ETA, 0.0], x])
    s2 = np.array([x + [0.9 * ETA, 0.0], x])
    q1, q2 = quantize(s1, ETA), quantize(s2, ETA)
    _, l2 = _changes(q1.data, q2.data, 0)
    assert l2 == pytest.approx(1.8 * ETA)
    assert l2 > quantize(s1, ETA, conservative=False).sensitivity.l2
    assert l2 <= q1.sensitivity.l2


@pytest.mark.parametrize("bad", [0.0, -0.1, float("nan"), float("inf")])
def test_bad_eta(bad):
    with pytest.raises(ValueError, match="eta"):
        deduplicate(np.zeros((3, 2)), bad)


def test_rejects_non_finite_and_outside_ball():
    with pytest.raises(ValueError, match="non-finite"):
        quantize(np.array([[0.0, np.nan], [0.1, 0.1]]), ETA)
    with pytest.raises(ValueError, match="unit L2 ball"):
        deduplicate(np.array([[0.9, 0.9], [0.1, 0.1]]), ETA)
    with pytest.raises(ValueError, match="2-D"):
        deduplicate(np.zeros(3), ETA)
