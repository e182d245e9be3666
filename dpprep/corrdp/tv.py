"""Estimating the per-feature correlation weights TV(i) (Wang et al. 2026, §4 and App. D).

Gaussian (Eq. 22): for (X^S, X^I) jointly Gaussian, ``X^S | X^I = x`` is ``N(μ_S + B(x − μ_I),
Σ_c)``
with ``B = Σ_SI Σ_II⁻¹`` and ``Σ_c = Σ_SS − B Σ_IS`` independent of x, so two conditionals share
Σ_c and their TV is exact: ``2Φ(Δ/2) − 1`` with ``Δ`` the Mahalanobis distance of the two means
under Σ_c. ``I`` may be a single insensitive feature (Def. 2.8, the default) or a block (as
Algorithm 1's line 1 writes it). :func:`synthetic_tv_factors` is the App. E.1 construction;
:func:`tv_upper_bound` is Def. 4.3.

Plug-in estimators (App. D.1–D.3) and the dataset procedures (Adult App. E.2, Sepsis App. E.3)
follow.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Sequence

import numpy as np
from scipy import special

from dpprep.corrdp.defs import check_index_sets, check_tv
from dpprep.validation import check_delta, check_finite_array, check_positive, check_positive_int


def tv_from_mahalanobis(distance) -> np.ndarray:
    """TV between two Gaussians with a common covariance whose means are ``distance`` apart in
    that covariance's Mahalanobis metric: ``2Φ(Δ/2) − 1`` (= ``erf(Δ / (2√2))``, accurate near 0).
    """
    distance = np.asarray(distance, np.float64)
    if np.any(distance < 0) or not np.all(np.isfinite(distance)):
        raise ValueError("distance must be finite and >= 0")
    return special.erf(distance / (2.0 * math.sqrt(2.0)))


def gaussian_tv(mean_a, mean_b, cov) -> float:
    """Exact ``TV(N(a, Σ), N(b, Σ))`` for a positive-definite Σ."""
    a = check_finite_array(mean_a, "mean_a", ndim=1).astype(np.float64)
    b = check_finite_array(mean_b, "mean_b", ndim=1).astype(np.float64)
    cov = _check_cov(cov, a.shape[0])
    diff = a - b
    return float(tv_from_mahalanobis(math.sqrt(max(float(diff @ np.linalg.solve(cov, diff)), 0.0))))


def _check_cov(cov, m: int) -> np.ndarray:
    cov = check_finite_array(cov, "cov", ndim=2).astype(np.float64)
    if cov.shape != (m, m):
        raise ValueError(f"cov must have shape ({m}, {m}), got {cov.shape}")
    if not np.allclose(cov, cov.T, rtol=1e-10, atol=1e-12):
        raise ValueError("cov must be symmetric")
    return cov


def gaussian_conditional(mean, cov, sensitive: Sequence[int], given: Sequence[int]):
    """Eq. 22 for ``X^S | X^I``: returns ``(μ_S, μ_I, B, Σ_c)`` with conditional mean
    ``μ_S + B (x − μ_I)`` and conditional covariance ``Σ_c`` (both blocks must be disjoint)."""
    mean = check_finite_array(mean, "mean", ndim=1).astype(np.float64)
    cov = _check_cov(cov, mean.shape[0])
    s, i = check_index_sets(
        sensitive, given, mean.shape[0], names=("sensitive", "given"), cover=False
    )
    s, i = list(s), list(i)  # type: ignore[assignment]  # lists for np.ix_
    sig_si, sig_ii = cov[np.ix_(s, i)], cov[np.ix_(i, i)]
    b = np.linalg.solve(sig_ii, sig_si.T).T  # Σ_SI Σ_II⁻¹ (Σ_II symmetric)
    cond = cov[np.ix_(s, s)] - b @ sig_si.T
    return mean[s], mean[i], b, 0.5 * (cond + cond.T)


def gaussian_posterior_tv(
    mean, cov, sensitive: Sequence[int], given: Sequence[int], x_given, x_given_other
) -> float:
    """``TV(P_{X^S | X^I = x}, P_{X^S | X^I = x'})`` under ``N(mean, cov)`` (Eq. 22, exact)."""
    _, _, b, cond = gaussian_conditional(mean, cov, sensitive, given)
    k = b.shape[1]
    x = check_finite_array(np.atleast_1d(x_given), "x_given", ndim=1).astype(np.float64)
    x2 = check_finite_array(np.atleast_1d(x_given_other), "x_given_other", ndim=1).astype(
        np.float64
    )
    if x.shape != (k,) or x2.shape != (k,):
        raise ValueError(f"x_given and x_given_other must have {k} entries (one per given feature)")
    return gaussian_tv(b @ x, b @ x2, cond)


def e1_half_width(m_s: int, delta: float) -> float:
    """App. E.1's range half-width ``2·sqrt(log(2 m_s / δ))`` around μ_i."""
    return 2.0 * math.sqrt(math.log(2 * check_positive_int(m_s, "m_s") / check_delta(delta)))


def synthetic_tv_factors(
    mean, cov, sensitive: Sequence[int], insensitive: Sequence[int], *, delta: float = 1e-4
) -> np.ndarray:
    """App. E.1: for each ``i`` in ``insensitive`` (in order), Eq. 22 on the (S, i) sub-block
    evaluated at ``x_i = μ_i ∓ 2·sqrt(log(2 m_s/δ))``; returns TV(i), shape ``(|U|,)``.

    With the population mean/cov of the §5.1 generator this gives 0.364 at m_s = 10 (the paper
    reports no value); with the empirical mean and full empirical covariance of the generated X,
    the per-feature plug-in values (upward biased: sampling noise in the covariance blocks inflates
    the Mahalanobis distance). Only the difference of the two points matters, so μ_i cancels."""
    mean = check_finite_array(mean, "mean", ndim=1).astype(np.float64)
    cov = _check_cov(cov, mean.shape[0])
    s, u = check_index_sets(sensitive, insensitive, mean.shape[0], cover=False)
    s, u = list(s), list(u)  # type: ignore[assignment]  # lists for np.ix_
    gap = 2.0 * e1_half_width(len(s), delta)
    sig_ss, sig_su, var_u = cov[np.ix_(s, s)], cov[np.ix_(s, u)], np.diag(cov)[u]
    if np.any(var_u <= 0):
        raise ValueError("cov must have a positive variance on every insensitive feature")
    # Per i: B = Σ_Si/Σ_ii, Σ_c = Σ_SS − Σ_Si Σ_iSᵀ/Σ_ii, a − b = B·gap; Δ² = gap²·Bᵀ Σ_c⁻¹ B.
    out = np.empty(len(u))
    for k in range(len(u)):
        b = sig_su[:, k] / var_u[k]
        cond = sig_ss - np.outer(sig_su[:, k], sig_su[:, k]) / var_u[k]
        out[k] = gap * math.sqrt(max(float(b @ np.linalg.solve(cond, b)), 0.0))
    return tv_from_mahalanobis(out)


def tv_upper_bound(
    tv_hat, c2: float, gamma: float, n: int, m: int, m_s: int, delta: float
) -> np.ndarray:
    """Def. 4.3: ``TV~(i) = TV̂(i) + 2 c2 sqrt(log((m − m_s)/δ)) / n^γ``, clipped to [0, 1]."""
    tv_hat = check_tv(tv_hat, "tv_hat")
    c2 = check_positive(c2, "c2", allow_zero=True)
    gamma = float(gamma)
    if not (0.0 < gamma <= 0.5):
        raise ValueError(f"gamma must lie in (0, 1/2] (Assumption 4.1), got {gamma!r}")
    n = check_positive_int(n, "n")
    m = check_positive_int(m, "m")
    m_s = check_positive_int(m_s, "m_s", minimum=0)
    if m_s >= m:
        raise ValueError(f"m_s must be < m (U must not be empty), got m_s={m_s}, m={m}")
    delta = check_delta(delta)
    return np.clip(tv_hat + 2.0 * c2 * math.sqrt(math.log((m - m_s) / delta)) / n**gamma, 0.0, 1.0)


def plugin_tv_factors(
    x, sensitive: Sequence[int], insensitive: Sequence[int], *, delta: float = 1e-4
) -> np.ndarray:
    """:func:`synthetic_tv_factors` with the empirical mean and full empirical covariance
    (``np.cov``, ddof 1) of the rows ``x`` plugged in (App. E.1 says "empirical mean and variance";
    a conditional needs the covariance blocks too): the paper-mode factors."""
    x = check_finite_array(x, "x", ndim=2).astype(np.float64)
    return synthetic_tv_factors(
        x.mean(axis=0), np.cov(x, rowvar=False), sensitive, insensitive, delta=delta
    )


# --- plug-in estimators (App. D.1–D.3) ------------------------------------------------------------


def _rows(values, name: str, n: int | None = None) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(
            f"{name} must be a non-empty (n,) or (n, k) array, got shape {np.shape(values)}"
        )
    check_finite_array(arr, name)
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} rows, expected {n} (one per sample)")
    return arr


def _joint_codes(values) -> np.ndarray:
    """Index of each row's joint category (the distinct rows of ``values``)."""
    return np.unique(values, axis=0, return_inverse=True)[1].reshape(-1)


def conditioning_cells(u, name: str = "u") -> tuple[np.ndarray, list[tuple]]:
    """The conditioning cells of a discrete feature (n,) or block (n, k): every combination of the
    levels each column takes (the product of the per-column supports), and each row's cell.
    A cell of that product with no rows raises ValueError naming it (its conditional law cannot be
    estimated)."""
    u = _rows(u, name)
    levels = [np.unique(u[:, j]) for j in range(u.shape[1])]
    index = [np.searchsorted(lv, u[:, j]) for j, lv in enumerate(levels)]
    codes = np.ravel_multi_index(index, [len(lv) for lv in levels])
    counts = np.bincount(codes, minlength=math.prod(len(lv) for lv in levels))
    as_level = lambda v: int(v) if float(v).is_integer() else v.item()  # noqa: E731  (1.0 -> 1 in messages)
    cells = [
        tuple(as_level(lv[i]) for lv, i in zip(levels, idx))
        for idx in np.ndindex(*[len(lv) for lv in levels])
    ]
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        raise ValueError(
            f"conditioning cell {cells[empty[0]]} of {name} has no rows "
            f"({empty.size} empty cell(s) of {len(cells)}); its conditional law cannot be estimated"
        )
    return codes, cells


def _max_pairwise_tv(s_codes: np.ndarray, u_codes: np.ndarray, k_u: int) -> float:
    """``max_{j1,j2} ½ Σ_i |P̂_{j1}(i) − P̂_{j2}(i)|`` for the empirical conditionals of s given
    u."""
    s_codes = np.unique(s_codes, return_inverse=True)[1].reshape(-1)  # only occupied bins matter
    k_s = int(s_codes.max()) + 1
    counts = np.zeros((k_u, k_s))
    np.add.at(counts, (u_codes, s_codes), 1.0)
    cond = counts / counts.sum(axis=1, keepdims=True)
    return float(_pmf_pairwise_max(cond))


def _pmf_pairwise_max(pmfs: np.ndarray) -> float:
    """Largest TV between any two rows of a (k, K) matrix of pmfs."""
    best = 0.0
    for j in range(pmfs.shape[0] - 1):  # row by row: k·k·K memory would be large for many cells
        best = max(best, float(0.5 * np.abs(pmfs[j + 1 :] - pmfs[j]).sum(axis=1).max()))
    return min(best, 1.0)


def discrete_tv(s, u) -> float:
    """App. D.1 plug-in: ``max`` over pairs of conditioning cells of the TV between the empirical
    conditional pmfs of the discrete sensitive ``s`` ((n,), or (n, k) taken as joint categories,
    App. D.2 item 1) given the discrete ``u`` ((n,) feature or (n, k) block; cells as
    :func:`conditioning_cells`)."""
    s = _rows(s, "s")
    u_codes, cells = conditioning_cells(_rows(u, "u", s.shape[0]))
    return _max_pairwise_tv(_joint_codes(s), u_codes, len(cells))


def default_bins(n_min: int, k: int = 1) -> int:
    """Bins per dimension for a k-dim histogram: ``ceil(n_min^{1/(k+2)})`` (h = Θ(n^{−1/(k+2)}),
    App. D.2; n^{1/3} for k = 1) with ``n_min`` the smallest conditioning cell."""
    return max(1, math.ceil(check_positive_int(n_min, "n_min") ** (1.0 / (k + 2)) - 1e-9))


def histogram_codes(s, bins: int | Sequence[int]) -> np.ndarray:
    """Joint bin index of each row of continuous ``s`` (n, k): ``bins`` equal-width bins per
    dimension with edges on the pooled sample's range (the maximum falls in the last bin)."""
    s = _rows(s, "s").astype(np.float64)
    k = s.shape[1]
    bins = [int(bins)] * k if np.ndim(bins) == 0 else [int(b) for b in bins]  # type: ignore[arg-type, union-attr]  # np.ndim picks the branch
    if len(bins) != k or min(bins) < 1:
        raise ValueError(
            f"bins must be a positive integer or one per dimension of s ({k}), got {bins}"
        )
    index = []
    for j, b in enumerate(bins):
        edges = np.histogram_bin_edges(s[:, j], bins=b)
        index.append(np.clip(np.searchsorted(edges, s[:, j], side="right") - 1, 0, b - 1))
    return np.ravel_multi_index(index, bins)


def histogram_tv(s, u, *, bins: int | Sequence[int] | None = None) -> float:
    """App. D.2 plug-in for continuous ``s`` ((n,) or (n, k), a joint histogram) given discrete
    ``u`` ((n,) or (n, k) block): ``max_{j1,j2} ½ Σ_bins |n_{i,j1}/n_{·,j1} − n_{i,j2}/n_{·,j2}|``.
    ``bins`` per dimension (default :func:`default_bins` of the smallest cell); edges on the pooled
    sample. An empty conditioning cell raises ValueError naming it."""
    s = _rows(s, "s")
    u_codes, cells = conditioning_cells(_rows(u, "u", s.shape[0]))
    if bins is None:
        bins = default_bins(int(np.bincount(u_codes).min()), s.shape[1])
    return _max_pairwise_tv(histogram_codes(s, bins), u_codes, len(cells))


def regression_gaussian_tv(s, u) -> float:
    """App. D.3 (Eq. 21): fit ``s = φᵀu + ψ + N(0, η²)`` by least squares (``u`` (n,) or an (n, k)
    block) and return ``max_{k,l} 2Φ(|φᵀ(u_k − u_l)| / (2η̂)) − 1`` over the sample, i.e. at the
    extremes of ``φ̂ᵀu``. For one u this is Eq. 21 with the sample's min and max."""
    s = _rows(s, "s").astype(np.float64)
    if s.shape[1] != 1:
        raise ValueError(
            "regression_gaussian_tv takes one sensitive feature; use gaussian_plugin_tv for a block"
        )
    s = s[:, 0]
    u = _rows(u, "u", s.shape[0]).astype(np.float64)
    uc = u - u.mean(axis=0)
    phi = np.linalg.lstsq(uc, s - s.mean(), rcond=None)[0]
    eta = math.sqrt(float(np.mean((s - s.mean() - uc @ phi) ** 2)))
    if eta == 0.0:
        raise ValueError(
            "s is an exact linear function of u (η̂ = 0): the Gaussian model is degenerate"
        )
    proj = u @ phi
    return float(tv_from_mahalanobis((proj.max() - proj.min()) / eta))


def gaussian_plugin_tv(s, u, x_u=None, x_u_other=None) -> float:
    """Eq. 22 with the empirical mean and covariance of the rows ``(s, u)`` plugged in: the TV
    between the fitted ``X^S | X^U = x_u`` and ``X^S | X^U = x_u_other``. For a single u the two
    points default to the sample's min and max (where the TV is largest); a block needs both."""
    s = _rows(s, "s").astype(np.float64)
    u = _rows(u, "u", s.shape[0]).astype(np.float64)
    if x_u is None or x_u_other is None:
        if u.shape[1] != 1:
            raise ValueError(
                "x_u and x_u_other are required when conditioning on a block of features"
            )
        x_u, x_u_other = u.min(axis=0), u.max(axis=0)
    joint = np.concatenate([s, u], axis=1)
    k = s.shape[1]
    return gaussian_posterior_tv(
        joint.mean(axis=0),
        np.atleast_2d(np.cov(joint, rowvar=False)),
        range(k),
        range(k, joint.shape[1]),
        x_u,
        x_u_other,
    )


# --- dataset procedures (App. E.2 Adult mixed, App. E.3 Sepsis joint cells) -----------------------


@dataclasses.dataclass(frozen=True)
class MixedTV:
    """The App. E.2 bound for one insensitive feature: ``min{discrete part + continuous part,
    1}``."""

    feature: str
    kind: str  # "discrete" or "continuous" insensitive feature
    discrete_part: float
    continuous_part: float

    @property
    def total(self) -> float:
        # App. E.2 prints max{…, 1}; min is meant (a TV is at most 1, and max would make every
        # factor at least 1, contradicting the paper's Table 2).
        return min(self.discrete_part + self.continuous_part, 1.0)


def _lr_pmfs(design: np.ndarray, labels: np.ndarray, points: np.ndarray, c: float) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression

    if np.unique(labels).size < 2:
        return np.ones((points.shape[0], 1))
    # Identical rows enter the (sum-of-losses) objective only through their count, so fit on the
    # distinct (row, label) pairs weighted by multiplicity: same model, far fewer rows.
    rows, counts = np.unique(np.column_stack([design, labels]), axis=0, return_counts=True)
    # Newton-CG to a tight tolerance: the optimum, not where a solver stops, decides the estimate
    # (sklearn's default lbfgs at tol 1e-4 stops early on fnlwgt: 0.332 vs the optimum's 0.318).
    model = LogisticRegression(C=c, solver="newton-cg", tol=1e-6, max_iter=1000)  # multinomial
    # sklearn's "many classes per sample" hint; the rows are weighted
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="The number of unique classes", category=UserWarning
        )
        model.fit(
            rows[:, :-1], rows[:, -1].astype(np.int64), sample_weight=counts.astype(np.float64)
        )
    return model.predict_proba(points)


def mixed_tv(
    s_cont,
    s_disc,
    u,
    *,
    kind: str,
    bins: int | Sequence[int] | None = None,
    lr_c: float = 1.0,
    feature: str = "u",
) -> MixedTV:
    """The Adult procedure (App. E.2) for one insensitive feature ``u`` ((n,) or (n, k) one-hot
    rows).

    Discrete part: a multinomial logistic regression (sklearn, ``C = lr_c``) of the joint category
    of ``s_disc`` on u; TV between its predicted pmfs, max over pairs of u's levels (discrete u)
    or at u's min and max (continuous u). Continuous part: the joint histogram TV of ``s_cont``
    given u's levels (:func:`histogram_tv`, discrete u) or the Eq. 22 Gaussian model of
    (``s_cont``, u) at u's min and max (continuous u). Either sensitive block may be None (part 0).
    """
    if kind not in ("discrete", "continuous"):
        raise ValueError(f"kind must be 'discrete' or 'continuous', got {kind!r}")
    lr_c = check_positive(lr_c, "lr_c")
    u = _rows(u, "u").astype(np.float64)
    n = u.shape[0]
    if kind == "continuous" and u.shape[1] != 1:
        raise ValueError("a continuous insensitive feature must be a single column")
    # one feature (its value or one-hot row); its observed levels are the cells
    if kind == "discrete":
        levels, codes = np.unique(u, axis=0, return_inverse=True)
        codes = codes.reshape(-1)
        points = levels
    else:
        points = np.array([u.min(axis=0), u.max(axis=0)])
    disc = 0.0
    if s_disc is not None:
        pmfs = _lr_pmfs(u, _joint_codes(_rows(s_disc, "s_disc", n)), points, lr_c)
        disc = _pmf_pairwise_max(pmfs)
    cont = 0.0
    if s_cont is not None:
        s_cont = _rows(s_cont, "s_cont", n)
        if kind == "discrete":
            b = (
                default_bins(int(np.bincount(codes).min()), s_cont.shape[1])
                if bins is None
                else bins
            )
            cont = _max_pairwise_tv(histogram_codes(s_cont, b), codes, levels.shape[0])
        else:
            cont = gaussian_plugin_tv(s_cont, u)
    return MixedTV(feature, kind, disc, cont)


def mixed_tv_factors(
    data,
    continuous_sensitive: Sequence[str],
    discrete_sensitive: Sequence[str],
    feature_kinds: dict[str, str],
    *,
    bins=None,
    lr_c: float = 1.0,
) -> dict[str, MixedTV]:
    """:func:`mixed_tv` for every insensitive feature of a ``CorrDPData`` (Adult's App. E.2
    procedure;
    also usable for Medical). ``continuous_sensitive`` / ``discrete_sensitive`` name raw sensitive
    features (``data.sensitive_groups``); discrete ones are combined into joint categories from
    their encoded columns. ``feature_kinds`` says which insensitive features are continuous."""
    x = np.asarray(data.x, np.float64)

    def block(names):
        missing = [g for g in names if g not in data.sensitive_groups]
        if missing:
            raise ValueError(
                f"{missing} are not sensitive features of {data.name!r}"
                f" ({list(data.sensitive_groups)})"
            )
        cols = [c for g in names for c in data.sensitive_groups[g]]
        return x[:, cols] if cols else None

    s_cont, s_disc = block(continuous_sensitive), block(discrete_sensitive)
    out = {}
    for group, cols in data.insensitive_groups.items():
        kind = feature_kinds.get(group, "discrete")
        out[group] = mixed_tv(
            s_cont, s_disc, x[:, list(cols)], kind=kind, bins=bins, lr_c=lr_c, feature=group
        )
    return out


ADULT_CONTINUOUS_S = ("age", "educational-num", "hours-per-week")
ADULT_DISCRETE_S = ("marital-status", "relationship")


def adult_tv(data, *, bins=None, lr_c: float = 1.0) -> dict[str, MixedTV]:
    """App. E.2 on ``load_corrdp("adult")``: per insensitive feature (race, gender, workclass
    discrete;
    fnlwgt continuous) the mixed bound with S^c = (age, educational-num, hours-per-week) and S^d
    the joint (marital-status, relationship) category."""
    return mixed_tv_factors(
        data, ADULT_CONTINUOUS_S, ADULT_DISCRETE_S, {"fnlwgt": "continuous"}, bins=bins, lr_c=lr_c
    )


def sepsis_tv(x, *, bins: int | None = None) -> float:
    """App. E.3: the max pairwise TV between the histograms of age (column 0) conditional on each
    (sex, episode) cell (columns 1, 2; both insensitive features change jointly, as App. E.3
    allows). Works on raw
    or MinMax-scaled rows (the histogram TV is invariant to an affine map of age); every one of the
    sex × episode cells must hold rows."""
    x = _rows(x, "x")
    if x.shape[1] != 3:
        raise ValueError(f"x must have the 3 Sepsis columns (age, sex, episode), got {x.shape[1]}")
    return histogram_tv(x[:, 0], x[:, 1:3], bins=bins)
