"""CorrDP-SGD noise levels (Wang, Zhang, Cummings 2026, §3.1 Eq. 4 and §5).

Everything here is host-side numpy: it turns the paper's variances into *variance factors* per
input feature (``f_i``, the multiplier of a base variance ``σ²``) and into the engine's
per-coordinate std scales (``sqrt(f)``), which :mod:`dpprep.corrdp.sgd` feeds to the engine.

* **Eq. 4 (theory).** ``σ_i² = K_δ·L²·T/(n²ε²)`` on ``i ∈ S`` and the same times
  ``max{TV(i), m_s²/m²}`` on ``i ∈ U`` (``use_floor``), with ``K_δ = log(1/δ) + 1`` and ``n`` the
  **full** dataset size even for minibatches. :func:`eq4_variances`.
* **§5 (experiments).** ``σ_i² = C·K_δ/ε² · f_i`` with ``f`` from the method
  (:func:`method_factors`): Standard 1 everywhere, Semi 0 on ``U``, CorrDP ``TV~(i)`` on ``U``
  (no floor), Partial non-private on the ``U`` columns only. ``C`` is a constant:
  ``C_mode="theory"`` gives ``C = L²T/n²`` (Eq. 4 literally, the library default) and
  ``C_mode="paper"`` our calibrated per-dataset constants (:data:`PAPER_C`; the paper never states
  its ``C``). In paper mode ε enters only through ``σ² ∝ 1/ε²``: it is a **nominal** ε, not an
  accounted guarantee (the paper's experiments run no accountant, and Eq. 4 itself holds only up
  to constants).
* **Eq. 5 (networks).** The reduced factor sits on the first-layer weights *leaving* each
  insensitive input (rows of ``w1``, shape ``(d_in, hidden)``); every later layer gets factor 1.
  The first-layer bias gets the reduced factor in the paper's experiments (App. E.3/E.5, although
  Eq. 5 covers only the weights; ``bias_factor="insensitive"``) or 1 (``bias_factor="sensitive"``,
  the conservative choice: ``b1``'s gradient depends on the sensitive inputs too).
  :func:`param_factors`.
* **Relaxations (App. C.2, optional).** Graded sensitivity ``s_i`` (1 = fully sensitive) gives
  ``(1 − s_i)·TV(i) + s_i``; a label scale ``s_l`` gives ``max{TV(i), m_s²/m², s_l}``.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import jax
import numpy as np
from jax.typing import ArrayLike

from dpprep.corrdp.data import CorrDPData, domain_bound
from dpprep.models import Params
from dpprep.renames import renamed_kwargs
from dpprep.validation import (
    check_delta,
    check_epsilon,
    check_finite_array,
    check_positive,
    check_positive_int,
)

METHODS = ("standard", "semi", "corrdp", "partial", "nonprivate")
PRIVATE_METHODS = ("standard", "semi", "corrdp")
C_MODES = ("theory", "paper")
BIAS_FACTORS = ("insensitive", "sensitive")
#: Paper-mode constants (the paper never states its C). Synthetic and Adult are our calibrations
#: against the text (Adult's 3e-3 lies between 1e-3 and 1e-2, which bracket §5.2's "less than a 4%
#: accuracy drop" for 0.2 < ε < 0.5); Credit, Sepsis and Medical have no target in the text, so
#: they take a list (:data:`PAPER_C_SWEEP`, C_theory first).
PAPER_C: dict[str, float] = {"synthetic": 1.0, "adult": 3e-3}
PAPER_C_SWEEP: tuple[float, ...] = (1e-3, 1e-2, 1e-1, 1.0)
#: δ of §5: 1e-4 on synthetic data, 1e-5 on the real datasets.
PAPER_DELTA: dict[str, float] = {
    "synthetic": 1e-4,
    "adult": 1e-5,
    "sepsis": 1e-5,
    "credit": 1e-5,
    "medical": 1e-5,
}


def k_delta(delta: float) -> float:
    """``K_δ = log(1/δ) + 1`` (natural log): 10.2103 at δ = 1e-4, 12.5129 at δ = 1e-5."""
    return math.log(1.0 / check_delta(delta)) + 1.0


def theory_constant(lipschitz: float, steps: int, n: int) -> float:
    """``C_theory = L²T/n²`` (Eq. 4 with ``n`` the full dataset size; like Eq. 4, it omits the
    ``B²`` of the proof's Eq. 12)."""
    lipschitz = check_positive(lipschitz, "lipschitz")
    steps = check_positive_int(steps, "steps")
    n = check_positive_int(n, "n")
    return lipschitz**2 * steps / n**2


def paper_constant(dataset: str) -> float:
    """Our paper-mode calibrated ``C`` of ``dataset`` (synthetic 1.0, adult 3e-3); the others have
    none (ValueError pointing at :data:`PAPER_C_SWEEP`)."""
    if dataset not in PAPER_C:
        raise ValueError(
            f"dataset {dataset!r} has no calibrated paper constant (known: {sorted(PAPER_C)}); "
            f"the paper's experiments run C in C_theory + {list(PAPER_C_SWEEP)} for it"
        )
    return PAPER_C[dataset]


def constant(
    c_mode: str,
    *,
    dataset: str | None = None,
    lipschitz: float | None = None,
    steps: int | None = None,
    n: int | None = None,
) -> float:
    """``C`` of a preset: ``"theory"`` needs ``lipschitz, steps, n``; ``"paper"`` needs
    ``dataset``."""
    if c_mode not in C_MODES:
        raise ValueError(f"c_mode must be one of {C_MODES}, got {c_mode!r}")
    if c_mode == "theory":
        if lipschitz is None or steps is None or n is None:
            raise ValueError("c_mode='theory' needs lipschitz, steps and n (C = L²T/n²)")
        return theory_constant(lipschitz, steps, n)
    if dataset is None:
        raise ValueError("c_mode='paper' needs dataset")
    return paper_constant(dataset)


def base_variance(epsilon: float, delta: float, c: float) -> float:
    """``σ² = C·K_δ/ε²``: the variance of a sensitive coordinate of the averaged gradient."""
    epsilon = check_epsilon(epsilon)
    c = check_positive(c, "C")
    return c * k_delta(delta) / epsilon**2


def _check_split(
    m: int, sensitive: Sequence[int], insensitive: Sequence[int] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    m = check_positive_int(m, "m")
    s = np.asarray(sorted(set(int(i) for i in sensitive)), int)
    if insensitive is None:
        u = np.setdiff1d(np.arange(m), s)
    else:
        u = np.asarray(sorted(set(int(i) for i in insensitive)), int)
    for name, idx in (("sensitive", s), ("insensitive", u)):
        if idx.size and (idx.min() < 0 or idx.max() >= m):
            raise ValueError(f"{name} indices must lie in [0, {m}), got {idx.tolist()}")
    if np.intersect1d(s, u).size:
        raise ValueError(f"sensitive and insensitive overlap on {np.intersect1d(s, u).tolist()}")
    return s, u


def check_factor(values: ArrayLike, name: str) -> np.ndarray:
    """Variance factors (TV weights) must be finite and lie in [0, 1]."""
    arr = check_finite_array(np.asarray(values, np.float64), name)
    if np.any(arr < 0) or np.any(arr > 1):
        raise ValueError(f"{name} must lie in [0, 1], got values in [{arr.min():g}, {arr.max():g}]")
    return arr


def corrdp_factors(
    m: int,
    sensitive: Sequence[int],
    tv: ArrayLike,
    *,
    use_floor: bool = True,
    insensitive: Sequence[int] | None = None,
    graded: ArrayLike | None = None,
    label_scale: float | None = None,
) -> np.ndarray:
    """Per-feature variance factors of Eq. 4: 1 on ``S``, ``max{TV(i), m_s²/m²}`` on ``U``
    (``use_floor``) or ``TV(i)`` (§5, which drops the floor). ``tv``: a scalar or one value per
    insensitive feature (ascending index order). Features in neither set (e.g. an intercept) get 1.

    ``graded`` (optional, ``(m,)`` in [0, 1], 1 = fully sensitive) replaces ``TV(i)`` by
    ``(1 − s_i)·TV(i) + s_i``; ``label_scale`` ``s_l`` adds ``s_l`` inside the max (App. C.2)."""
    s, u = _check_split(m, sensitive, insensitive)
    tv = check_factor(
        np.broadcast_to(np.asarray(tv, np.float64), u.shape) if np.ndim(tv) == 0 else tv, "tv"
    )
    if tv.shape != u.shape:
        raise ValueError(
            f"tv must be a scalar or have one value per insensitive feature ({u.size}), got shape"
            f" {tv.shape}"
        )
    weights = tv.copy()
    if graded is not None:
        g = check_factor(graded, "graded")
        if g.shape != (m,):
            raise ValueError(f"graded must have one score per feature ({m}), got shape {g.shape}")
        weights = (1.0 - g[u]) * weights + g[u]
    if use_floor:
        weights = np.maximum(weights, (s.size / m) ** 2)
    if label_scale is not None:
        weights = np.maximum(weights, check_factor(label_scale, "label_scale"))
    factors = np.ones(m)
    factors[u] = weights
    return factors


def eq4_variances(
    m: int,
    sensitive: Sequence[int],
    tv: ArrayLike,
    *,
    lipschitz: float,
    steps: int,
    n: int,
    epsilon: float,
    delta: float,
    use_floor: bool = True,
    insensitive: Sequence[int] | None = None,
) -> np.ndarray:
    """Eq. 4: ``σ_i² = K_δ L² T/(n² ε²)·{1 on S; max{TV(i), m_s²/m²} on U}`` (``n`` = the full
    dataset size, also for minibatches)."""
    factors = corrdp_factors(m, sensitive, tv, use_floor=use_floor, insensitive=insensitive)
    return base_variance(epsilon, delta, theory_constant(lipschitz, steps, n)) * factors


def method_factors(
    method: str,
    m: int,
    sensitive: Sequence[int],
    tv: ArrayLike | None = None,
    *,
    insensitive: Sequence[int] | None = None,
    use_floor: bool = False,
) -> np.ndarray:
    """§5 per-feature variance factors: Standard 1; Semi 0 on ``U``; CorrDP ``TV~(i)`` on ``U``
    (``use_floor=False``: §5 drops Eq. 4's floor); Partial and the non-private reference
    have no noise (0; Partial additionally drops the ``S`` columns, see
    :func:`partial_feature_mask`). Columns in neither set (an intercept) keep factor 1 under every
    private method."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    s, u = _check_split(m, sensitive, insensitive)
    if method == "standard":
        return np.ones(m)
    if method in ("partial", "nonprivate"):
        return np.zeros(m)
    if method == "semi":
        out = np.ones(m)
        out[u] = 0.0
        return out
    if tv is None:
        raise ValueError(
            "method 'corrdp' needs tv (one factor per insensitive feature, or a scalar)"
        )
    # index arrays work as sequences
    return corrdp_factors(m, s, tv, use_floor=use_floor, insensitive=u)  # type: ignore[arg-type]


def partial_feature_mask(
    m: int, sensitive: Sequence[int], insensitive: Sequence[int] | None = None
) -> np.ndarray:
    """Partial trains on the insensitive columns only (and an intercept column, in neither set):
    a 0/1 feature scale that zeroes the ``S`` columns (their weights then get zero gradient)."""
    s, _ = _check_split(m, sensitive, insensitive)
    mask = np.ones(m)
    mask[s] = 0.0
    return mask


def param_factors(
    params: Params,
    column_factors: ArrayLike,
    *,
    leaf: str | None = None,
    bias_factor: str | float = "insensitive",
    insensitive: Sequence[int] | None = None,
) -> Params:
    """Variance factors as a pytree matching ``params`` (Eq. 5 layout).

    ``leaf`` (default ``"w"`` for GLMs, ``"w1"`` for MLPs) gets ``column_factors[j]`` on row ``j``
    (the weights leaving input ``j``); every other leaf gets 1, except the first-layer bias
    ``"b1"`` of an MLP: ``bias_factor="insensitive"`` (paper mode, as App. E.3/E.5) gives it the
    largest factor
    of the insensitive inputs (``insensitive``, default: every input with factor < 1, or 1 when
    there is none), ``"sensitive"`` keeps 1, a number sets it."""
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a dict of leaves, got {type(params).__name__}")
    if leaf is None:
        leaf = "w1" if "w1" in params else "w"
    if leaf not in params:
        raise ValueError(f"leaf {leaf!r} not in params (leaves: {sorted(params)})")
    f = check_factor(column_factors, "column_factors")
    rows = np.shape(params[leaf])[0]
    if f.shape != (rows,):
        raise ValueError(f"column_factors has shape {f.shape}, params[{leaf!r}] has {rows} rows")
    out: dict[str, Any] = {name: np.float32(1.0) for name in params}
    out[leaf] = f.astype(np.float32)[:, None]
    if leaf == "w1" and "b1" in params:
        if isinstance(bias_factor, str):
            if bias_factor not in BIAS_FACTORS:
                raise ValueError(
                    f"bias_factor must be one of {BIAS_FACTORS} or a number, got {bias_factor!r}"
                )
            if bias_factor == "sensitive":
                value = 1.0
            else:
                u = (
                    np.flatnonzero(f < 1.0)
                    if insensitive is None
                    else np.asarray(list(insensitive), int)
                )
                value = float(f[u].max()) if u.size else 1.0
        else:
            value = float(check_factor(bias_factor, "bias_factor"))
        out["b1"] = np.float32(value)
    # the params' own mapping type
    return type(params)(out) if not isinstance(params, dict) else out  # type: ignore[call-arg]


def check_param_factors(params: Params, factors: Params, name: str = "noise_factors") -> Params:
    """A factor pytree must match the params: same leaves, each broadcastable to its leaf's shape,
    values in [0, 1]. ValueError naming the offending leaf."""
    p_paths = dict(jax.tree_util.tree_leaves_with_path(params))
    f_paths = dict(jax.tree_util.tree_leaves_with_path(factors))
    p_names = {jax.tree_util.keystr(k): v for k, v in p_paths.items()}
    f_names = {jax.tree_util.keystr(k): v for k, v in f_paths.items()}
    missing, extra = sorted(set(p_names) - set(f_names)), sorted(set(f_names) - set(p_names))
    if missing or extra:
        raise ValueError(
            f"{name} does not match the params: missing leaves {missing}, unknown leaves {extra}"
        )
    for key, p in p_names.items():
        f = check_factor(f_names[key], f"{name}{key}")
        try:
            ok = np.broadcast_shapes(f.shape, np.shape(p)) == np.shape(p)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"{name}{key} has shape {f.shape}, which does not broadcast to the "
                f"parameter's shape {np.shape(p)}"
            )
    return factors


def std_scales(factors: Params) -> Params:
    """The engine's per-coordinate std scales: ``sqrt`` of variance factors (float32 leaves)."""
    return jax.tree_util.tree_map(lambda f: np.sqrt(np.asarray(f, np.float32)), factors)


def noise_trace(factors: Params, params: Params) -> float:
    """``Σ`` over every parameter coordinate of its variance factor (``Σσ_i² / σ²``)."""
    return float(
        sum(
            np.sum(np.broadcast_to(np.asarray(f, np.float64), np.shape(p)))
            for f, p in zip(jax.tree_util.tree_leaves(factors), jax.tree_util.tree_leaves(params))
        )
    )


@renamed_kwargs(clip_norm="l2_clip_norm")
def whitened_gradient_bound(
    data: CorrDPData, factors: ArrayLike, l2_clip_norm: float | None = None
) -> tuple[float, str]:
    """``(L_f, why)``: a bound on ``‖D^{-1/2}∇ℓ‖`` over every record of the domain, ``D = diag(f)``
    the per-column variance ``factors`` of a GLM's weights (:meth:`CorrDPData.column_factors`).

    Noise ``N(0, σ² D)`` on the mean gradient releases what ``D^{-1/2}·mean + N(0, σ² I)`` does,
    whose replace-one sensitivity is ``2·L_f/n``: the run is then a Gaussian mechanism with
    multiplier ``σ·n/L_f`` that dp-accounting can certify (standard DP; the paper's ε is nominal).
    With per-example clipping at ``l2_clip_norm`` = L: ``L_f = L/√min f`` (the Euclidean clip bounds
    the whitened norm only through the smallest factor). Unclipped: a loss with ``|∂ℓ/∂(θᵀx)| ≤ 1``
    (logistic) on a data set with a :func:`dpprep.corrdp.data.domain_bound` (blocks of norm ≤ 1)
    gives ``L_f² = Σ_blocks max_{i∈block} 1/f_i`` (+ ``1/f`` of the intercept). ValueError where a
    factor is 0 (a coordinate released without noise: no finite ε) or nothing bounds the gradient.

    >>> import numpy as np
    >>> from dpprep.corrdp.data import CorrDPData
    >>> toy = CorrDPData("adult", np.array([[1.0, 0.0, 0.5, 1.0]]), np.array([1.0]),
    ...                  "classification", ("a=x", "a=y", "b", "intercept"), (0, 1), (2,),
    ...                  {"b": (2,)}, 3, {"b": 0.25}, "toy",
    ...                  sensitive_groups={"a": (0, 1)})
    >>> factors = toy.column_factors({"b": 0.25})
    >>> round(whitened_gradient_bound(toy, factors)[0], 4)  # √(1 + 4 + 1)
    2.4495
    >>> round(whitened_gradient_bound(toy, factors, l2_clip_norm=1.0)[0], 4)  # 1/√0.25
    2.0
    """
    f = np.asarray(factors, np.float64).ravel()
    if f.shape[0] != data.m:
        raise ValueError(f"factors has {f.shape[0]} entries, the data {data.m} columns")
    if not np.all(np.isfinite(f)) or np.any(f <= 0):
        raise ValueError(
            "a zero (or non-finite) noise factor releases a coordinate without noise: no"
            " standard-DP guarantee"
        )
    if l2_clip_norm is not None:
        clip = check_positive(l2_clip_norm, "l2_clip_norm")
        return clip / math.sqrt(f.min()), (
            f"per-example clip L = {clip:.4g}"
            + (f", / √min f = √{f.min():g}" if f.min() < 1 else "")
        )
    bound, why = domain_bound(data)
    if bound is None:
        raise ValueError(
            f"data set {data.name!r} has no a-priori gradient bound ({why}); clip per example"
            " (l2_clip_norm)"
        )
    blocks = [*data.sensitive_groups.values(), *data.insensitive_groups.values()]
    total = sum(float(np.max(1.0 / f[list(cols)])) for cols in blocks)
    if data.intercept is not None:
        total += 1.0 / float(f[data.intercept])
    return math.sqrt(total), f"domain: {why}; whitened by the factors: √{total:.4g}"
