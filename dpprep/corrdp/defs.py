"""The CorrDP definition (Wang et al. 2026, §2): the TV-based distance of Eq. 1, per-feature
correlation weights, correlated sensitivity (Def. 2.8) and the CorrDP Laplace mechanism (Def. 2.9).

Indices are 0-based. ``S`` (sensitive) and ``U`` (insensitive) partition the features.
"""

from __future__ import annotations

import math
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from dpprep.validation import (
    check_epsilon,
    check_finite_array,
    check_positive,
    check_positive_int,
    check_probability,
)


def check_index_sets(
    first: Sequence[int],
    second: Sequence[int],
    m: int,
    *,
    names: tuple[str, str] = ("sensitive", "insensitive"),
    cover: bool = True,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two non-empty, disjoint sets of feature indices in ``0..m-1`` (and, with ``cover``, covering
    all m features); a violation raises ValueError naming the feature and the argument."""
    out = []
    for values, name in zip((first, second), names):
        values = [int(v) for v in np.atleast_1d(np.asarray(values, dtype=np.int64))]
        if not values:
            raise ValueError(f"{name} must name at least one feature")
        bad = [v for v in values if not 0 <= v < m]
        if bad:
            raise ValueError(f"{name} has index(es) {bad} outside 0..{m - 1}")
        if len(set(values)) != len(values):
            raise ValueError(f"{name} lists a feature twice: {values}")
        out.append(tuple(values))
    both = sorted(set(out[0]) & set(out[1]))
    if both:
        raise ValueError(
            f"feature(s) {both} are in both {names[0]} and {names[1]}; the sets must be disjoint"
        )
    if cover:
        neither = sorted(set(range(m)) - set(out[0]) - set(out[1]))
        if neither:
            raise ValueError(
                f"feature(s) {neither} are in neither {names[0]} nor {names[1]}; every feature "
                "must be in exactly one"
            )
    return out[0], out[1]


def check_tv(values, name: str = "tv") -> np.ndarray:
    """TV values / factors as a float64 array, each finite and in [0, 1]."""
    arr = check_finite_array(values, name).astype(np.float64)
    bad = np.flatnonzero((arr < 0) | (arr > 1))
    if bad.size:
        raise ValueError(
            f"{name} must lie in [0, 1] (a TV), got {arr.reshape(-1)[bad[0]]!r} at position"
            f" {int(bad[0])}"
        )
    return arr


# --- Eq. 1 on a small discrete joint distribution -------------------------------------------------


def _check_joint(joint) -> np.ndarray:
    p = check_finite_array(joint, "joint").astype(np.float64)
    if p.ndim < 2:
        raise ValueError(f"joint must have one axis per feature (at least 2), got shape {p.shape}")
    if np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
        raise ValueError(
            f"joint must be a probability table (entries >= 0 summing to 1), sums to {p.sum()!r}"
        )
    return p


def _check_record(record, shape: tuple[int, ...], name: str) -> tuple[int, ...]:
    rec = tuple(int(v) for v in record)
    if len(rec) != len(shape) or any(not 0 <= v < k for v, k in zip(rec, shape)):
        raise ValueError(f"{name} must hold one level index per feature within {shape}, got {rec}")
    return rec


def conditional_law(
    joint, sensitive: Sequence[int], given: Sequence[int], record: Sequence[int]
) -> np.ndarray:
    """``P(X^S = · | X^I = record^I)`` as a table over the levels of the S-features (axes in
    increasing feature order); ``I = given`` may contain sensitive features. An event of
    probability 0 raises ValueError."""
    p = _check_joint(joint)
    m = p.ndim
    s = sorted({int(i) for i in sensitive})
    if not s or not 0 <= s[0] <= s[-1] < m:
        raise ValueError(
            f"sensitive must be a non-empty set of indices in 0..{m - 1}, got {list(sensitive)}"
        )
    record = _check_record(record, p.shape, "record")
    given = sorted({int(i) for i in given})
    mask = np.ones(p.shape, bool)
    for i in given:
        axis = [1] * m
        axis[i] = p.shape[i]
        mask &= (np.arange(p.shape[i]) == record[i]).reshape(axis)
    joint_s = np.sum(np.where(mask, p, 0.0), axis=tuple(j for j in range(m) if j not in s))
    total = joint_s.sum()
    if total <= 0:
        raise ValueError(
            f"the conditioning event X^{tuple(given)} = {tuple(record[i] for i in given)} has"
            " probability 0"
        )
    return joint_s / total


def corrdp_distance(joint, sensitive: Sequence[int], record, record_other) -> float:
    """Eq. 1: ``d(D, D') = max_{I ⊆ [m]} TV(P_{X^S | e^I}, P_{X^S | e'^I})`` for neighbours whose
    differing records are ``record`` and ``record_other`` (level indices), under the feature law
    ``joint`` (one axis per feature). Exhaustive over the 2^m subsets, so for small examples
    (Ex. 2.6). Records that differ on S are at distance 1, whatever else differs (Remark 2.4)."""
    p = _check_joint(joint)
    m = p.ndim
    e = _check_record(record, p.shape, "record")
    e2 = _check_record(record_other, p.shape, "record_other")
    s = set(int(i) for i in sensitive)
    if not s or not s < set(range(m)):
        raise ValueError(
            f"sensitive must be a non-empty proper subset of 0..{m - 1}, got {sorted(s)}"
        )
    if any(e[j] != e2[j] for j in s):  # I = S: two different point masses (also Remark 2.4)
        return 1.0
    best = 0.0
    for bits in range(1, 2**m):
        given = [j for j in range(m) if bits >> j & 1]
        try:
            a = conditional_law(p, sorted(s), given, e)
            b = conditional_law(p, sorted(s), given, e2)
        except ValueError:  # a subset whose event has probability 0 carries no conditional law
            continue
        best = max(best, 0.5 * float(np.abs(a - b).sum()))
    return min(best, 1.0)


def feature_tv_weights(joint, sensitive: Sequence[int], *, block: bool = False) -> dict:
    """Def. 2.8's ``TV(j) = max_{x1,x2} TV(P_{X^S | x1^(j)}, P_{X^S | x2^(j)})`` for each
    insensitive j (keys: feature index), or with ``block`` Algorithm 1's version conditioning on
    the whole insensitive block (one value, key ``"U"``). Levels of probability 0 are skipped."""
    p = _check_joint(joint)
    m = p.ndim
    s, u = check_index_sets(
        sensitive, [j for j in range(m) if j not in set(int(i) for i in sensitive)], m
    )
    sets = {"U": list(u)} if block else {j: [j] for j in u}
    out = {}
    for key, given in sets.items():
        laws = []
        for levels in np.ndindex(*[p.shape[j] for j in given]):
            record = [0] * m
            for j, v in zip(given, levels):
                record[j] = v
            try:
                laws.append(conditional_law(p, s, given, record).reshape(-1))
            except ValueError:
                continue
        laws = np.array(laws)  # type: ignore[assignment]  # list of rows -> one array
        out[key] = float(
            min(
                1.0,
                max(
                    (
                        0.5 * np.abs(laws[i + 1 :] - laws[i]).sum(axis=1).max()
                        for i in range(len(laws) - 1)
                    ),
                    default=0.0,
                ),
            )
        )
    return out


# --- sensitivities and the CorrDP Laplace mechanism (Def. 2.8, 2.9, Thm 2.10) ---------------------


def correlated_sensitivity(
    coord_sens,
    tv,
    sensitive: Sequence[int],
    insensitive: Sequence[int],
    *,
    l1_sens: float | None = None,
) -> float:
    """``Δ_C f = min{Σ_{j∈S} Δf_j + Σ_{j∈U} Δf_j·TV(j), Δf}`` (Def. 2.8). ``coord_sens`` has one
    entry per feature, ``tv`` one per entry of ``insensitive`` (same order); ``l1_sens`` is Δf
    (default ``Σ_j Δf_j``, an upper bound on it)."""
    sens = check_finite_array(coord_sens, "coord_sens", ndim=1).astype(np.float64)
    if np.any(sens < 0):
        raise ValueError("coord_sens must be >= 0")
    s, u = check_index_sets(sensitive, insensitive, sens.shape[0])
    tv = check_tv(np.atleast_1d(tv), "tv")
    if tv.shape != (len(u),):
        raise ValueError(
            f"tv must have one entry per insensitive feature ({len(u)}), got shape {tv.shape}"
        )
    full = float(sens.sum()) if l1_sens is None else float(l1_sens)
    if not np.isfinite(full) or full < 0:
        raise ValueError(f"l1_sens must be a finite number >= 0, got {l1_sens!r}")
    return min(float(sens[list(s)].sum() + sens[list(u)] @ tv), full)


def corrdp_laplace(
    key,
    values,
    coord_sens,
    tv,
    sensitive: Sequence[int],
    insensitive: Sequence[int],
    epsilon: float,
    *,
    l1_sens: float | None = None,
):
    """Def. 2.9: ``f(D) + (Y_1..Y_m)`` with ``Y_i`` iid Laplace of scale ``Δ_C f / ε`` (the same on
    every coordinate; f's coordinate i must depend only on feature i). (ε, 0)-CorrDP (Thm 2.10).
    ``key`` is a ``jax.random`` key; returns a jax array shaped like ``values``."""
    epsilon = check_epsilon(epsilon)
    vals = check_finite_array(values, "values", ndim=1)
    if vals.shape[0] != np.shape(coord_sens)[0]:
        raise ValueError(
            f"values has {vals.shape[0]} coordinates but coord_sens {np.shape(coord_sens)[0]} "
            "(one output coordinate per feature)"
        )
    scale = (
        correlated_sensitivity(coord_sens, tv, sensitive, insensitive, l1_sens=l1_sens) / epsilon
    )
    noise = jax.random.laplace(key, vals.shape, dtype=jnp.float32)
    return jnp.asarray(vals, jnp.float32) + scale * noise


def laplace_tail_bound(delta_c: float, epsilon: float, k: int, beta: float) -> float:
    """Thm 2.10: ``P(‖f(D) − M̃_L(D)‖_∞ ≤ Δ_C f · log(K/β) / ε) ≥ 1 − β``; returns the radius."""
    delta_c = check_positive(delta_c, "delta_c", allow_zero=True)
    epsilon = check_epsilon(epsilon)
    k = check_positive_int(k, "k")
    beta = check_probability(beta, "beta")
    return delta_c * math.log(k / beta) / epsilon


def lower_bound_dimension_term(tv) -> float:
    """``max_k k·(TV^(k))²`` with ``TV^(k)`` the k-th largest TV (Thm 3.12's lower-bound term); it
    sits between ``(TV^(1))²`` and ``Σ TV``, as §3.2 notes after Thm 3.12."""
    tv = np.sort(check_tv(np.atleast_1d(tv), "tv").reshape(-1))[::-1]
    if tv.size == 0:
        raise ValueError("tv must not be empty")
    return float(np.max(np.arange(1, tv.size + 1) * tv**2))
