"""CorrDP (Wang, Zhang, Cummings 2026): per-coordinate noise for insensitive features.

What the engine needs from the paper lives here, apart from the engine: the mapping from the
paper's noise on the *averaged* gradient to the engine's noise on the sum, and per-input-feature
noise scales for a first weight layer. ``dpprep.corrdp.data`` holds the
five datasets as CorrDP sees them (``load_corrdp``), ``dpprep.corrdp.tv`` the TV estimators and
``dpprep.corrdp.defs`` the definition (Eq. 1, Def. 2.8, Def. 2.9).

**CorrDP-SGD (Algorithm 1 / §5)** adds ``b_i ~ N(0, σ_i²)`` to the averaged gradient,
unclipped. In a non-private plan (``DPPlan.non_private``, ``l2_clip_norm = inf``, normaliser
``N``), choose a base level ``σ`` and set the :class:`~dpprep.corrdp.sgd.CoordinateNoise`
extension's ``stddev = sum_stddev(σ, N)`` and ``noise_scales = feature_scales(params,
sqrt(f), leaf)`` (``Hyper(lr, extra={...})``, or a sweep axis) where ``f`` are the
paper's variance *factors* (``TV~(i)``, or ``max{TV(i), m_s²/m²}``), which multiply ``σ²``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpprep.corrdp.data import CorrDPData, load_corrdp, sepsis_rebalanced, synthetic_truth
from dpprep.corrdp.defs import (
    check_index_sets,
    check_tv,
    correlated_sensitivity,
    corrdp_distance,
    corrdp_laplace,
    feature_tv_weights,
    laplace_tail_bound,
    lower_bound_dimension_term,
)
from dpprep.corrdp.tv import (
    MixedTV,
    adult_tv,
    discrete_tv,
    gaussian_conditional,
    gaussian_plugin_tv,
    gaussian_posterior_tv,
    gaussian_tv,
    histogram_tv,
    mixed_tv,
    mixed_tv_factors,
    plugin_tv_factors,
    regression_gaussian_tv,
    sepsis_tv,
    synthetic_tv_factors,
    tv_upper_bound,
)
from dpprep.models import Params
from dpprep.noise import isotropic_scales
from dpprep.renames import module_renames
from dpprep.validation import check_finite_array, check_positive

if not TYPE_CHECKING:  # old names, for users' code (they warn)
    __getattr__ = module_renames(globals(), {"sum_noise_std": "sum_stddev"})

__all__ = [
    "CorrDPData",
    "MixedTV",
    "adult_tv",
    "check_index_sets",
    "check_tv",
    "corrdp_distance",
    "corrdp_laplace",
    "correlated_sensitivity",
    "discrete_tv",
    "feature_scales",
    "feature_tv_weights",
    "gaussian_conditional",
    "gaussian_plugin_tv",
    "gaussian_posterior_tv",
    "gaussian_tv",
    "histogram_tv",
    "laplace_tail_bound",
    "load_corrdp",
    "lower_bound_dimension_term",
    "mixed_tv",
    "mixed_tv_factors",
    "plugin_tv_factors",
    "regression_gaussian_tv",
    "sepsis_rebalanced",
    "sepsis_tv",
    "sum_stddev",
    "synthetic_truth",
    "synthetic_tv_factors",
    "tv_upper_bound",
]


def sum_stddev(std_on_mean: float, normalize_by: float) -> float:
    """The engine's absolute ``stddev`` (on the gradient sum) that gives std ``std_on_mean``
    on the averaged gradient: ``σ·N``."""
    std_on_mean = check_positive(std_on_mean, "std_on_mean", allow_zero=True)
    normalize_by = check_positive(normalize_by, "normalize_by")
    return std_on_mean * normalize_by


def feature_scales(params: Params, row_scales: ArrayLike, leaf: str) -> Params:
    """Scales that are ``row_scales[j]`` on row ``j`` of ``params[leaf]`` (shape ``(d, k)``) and 1
    elsewhere. Row ``j`` holds the weights of input feature ``j`` (GLM ``"w"``, MLP ``"w1"``).
    Pass standard-deviation factors (square roots of variance factors such as CorrDP's TV~)."""
    if leaf not in params:
        raise ValueError(f"leaf {leaf!r} not in params (leaves: {sorted(params)})")
    rows = check_finite_array(row_scales, "row_scales", ndim=1)
    if rows.shape[0] != params[leaf].shape[0]:
        raise ValueError(
            f"row_scales has {rows.shape[0]} entries, params[{leaf!r}] has {params[leaf].shape[0]}"
            " rows"
        )
    if np.any(rows < 0):
        raise ValueError("row_scales must be >= 0")
    scales = isotropic_scales(params)
    scales[leaf] = jnp.asarray(rows, jnp.float32)[:, None]
    return scales
