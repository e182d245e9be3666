"""The utility protocol of Wang, Zhang & Cummings (2026), §5 and Figure 1 (host-side, float64).

What a CorrDP experiment needs around the engine (:mod:`dpprep.corrdp.sgd`) to score its runs:

* :func:`dataset_tv`: the TV factor ``TV~(i)`` of every insensitive column of a
  :class:`~dpprep.corrdp.data.CorrDPData` (synthetic: the per-feature Eq. 22 plug-in on the
  empirical mean and covariance, App. E.1, or the population value; real data: the paper's
  factors), the ``tv`` argument of :func:`dpprep.corrdp.noise.method_factors`.
* :func:`objective`, :func:`exact_minimizer`: the in-sample objective ``F(θ)`` of the paper's GLM
  panels (ridge ``mean((y − Xθ)²) + ||θ||²/n`` on the synthetic data, §5.1; OLS; logistic) and its
  exact minimiser ``θ̂`` (least squares), for the utility gap ``F(θ^priv) − F(θ̂)``. Float64 on the
  host: the gaps are small differences of O(1) objectives, below float32's resolution.
* :func:`gradient_bound`: a per-example gradient bound ``L`` of the data, for
  ``C_theory = L²T/n²`` (:func:`dpprep.corrdp.noise.theory_constant`): ``max‖x_i‖`` for logistic
  regression, ``2·max|r_i|·‖x_i‖`` at ``θ̂`` for least squares (data-dependent: a diagnostic).
* :func:`accuracy_pp`: the in-sample accuracy (%) of stacked GLM weight vectors, exact in float64
  (the accuracy gap ``acc(non-private) − acc(private)`` of §5.2 in percentage points).

Networks are scored by :func:`dpprep.sweeps.evaluate` (the sweep's ``eval_data``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from jax.typing import ArrayLike

from dpprep.corrdp import tv as tv_lib
from dpprep.corrdp.data import CorrDPData
from dpprep.renames import module_renames
from dpprep.validation import check_delta

#: The GLM objectives of the paper's panels: ridge (synthetic, penalty ``||θ||²/n``), OLS
#: (Medical Cost) and logistic regression (Adult, Credit Card).
GLM_OBJECTIVES = ("ridge", "ols", "logistic")


def _check_kind(kind: str, allowed: tuple[str, ...] = GLM_OBJECTIVES) -> str:
    if kind not in allowed:
        raise ValueError(f"kind must be one of {allowed}, got {kind!r}")
    return kind


def _check_xy(x: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"x must be (n, d) and y (n,), got {x.shape} and {y.shape}")
    return x, y


def dataset_tv(data: CorrDPData, delta: float, *, population: bool = False) -> np.ndarray:
    """``TV~(i)`` for every insensitive column of ``data``, in ascending column order (the ``tv``
    of :func:`dpprep.corrdp.noise.method_factors` with ``insensitive=sorted(data.insensitive)``).

    Synthetic data (Wang, Zhang & Cummings 2026, App. E.1): Eq. 22 per feature on the empirical
    mean and covariance of ``data.x`` (the plug-in of the paper's experiments, upward biased), or
    on the generator's population values (``population=True``; 0.364 at ``m_s = 10``). Real data:
    the paper's factors (``data.paper_factors``) on every column of their insensitive feature;
    ``population`` is then an error (there is no population to use). ``delta``: the δ of Eq. 22.
    """
    delta = check_delta(delta)
    if data.truth is not None:
        if population:
            tv = tv_lib.synthetic_tv_factors(
                data.truth.mean, data.truth.cov, data.sensitive, data.insensitive, delta=delta
            )
        else:
            tv = tv_lib.plugin_tv_factors(data.x, data.sensitive, data.insensitive, delta=delta)
        columns = np.ones(data.m)
        columns[list(data.insensitive)] = tv
    else:
        if population:
            raise ValueError(
                f"population TV factors need the generator's truth; {data.name!r} has none"
            )
        columns = data.column_factors(data.paper_factors)
    return columns[sorted(data.insensitive)]


def objective(kind: str, x: ArrayLike, y: ArrayLike, w: ArrayLike) -> np.ndarray:
    """``F(θ)`` of a GLM panel for a stack of weight vectors ``w`` (shape ``(..., d)``), float64.

    ``kind``: "ols" ``mean((y − Xθ)²)``; "ridge" adds ``||θ||²/n`` (the synthetic panel of
    Wang, Zhang & Cummings 2026, §5.1); "logistic" ``mean(log(1 + e^z) − y·z)`` with ``z = Xθ``.
    The intercept, if any, is a column of ``x``. Returns an array of shape ``w.shape[:-1]``."""
    kind = _check_kind(kind)
    x, y = _check_xy(x, y)
    w = np.asarray(w)
    if w.shape[-1:] != (x.shape[1],):
        raise ValueError(f"w must end in the {x.shape[1]} features of x, got shape {w.shape}")
    x64 = x.astype(np.float64)
    z = np.einsum("nd,...d->...n", x64, w.astype(np.float64))
    if kind == "logistic":
        return np.mean(np.logaddexp(0.0, z) - y * z, axis=-1)
    loss = np.mean((y.astype(np.float64) - z) ** 2, axis=-1)
    if kind == "ridge":
        loss = loss + np.sum(w.astype(np.float64) ** 2, axis=-1) / x.shape[0]
    return loss


def exact_minimizer(kind: str, x: ArrayLike, y: ArrayLike) -> np.ndarray:
    """The exact minimiser ``θ̂`` of :func:`objective` for least squares (float64, shape ``(d,)``):
    "ridge" solves ``(XᵀX + I)θ = Xᵀy`` (the stationarity condition of
    ``mean((y − Xθ)²) + ||θ||²/n``), "ols" is ``lstsq``. Logistic regression has no closed form
    (ValueError)."""
    kind = _check_kind(kind, ("ridge", "ols"))
    x, y = _check_xy(x, y)
    if kind == "ridge":
        x64 = x.astype(np.float64)
        return np.linalg.solve(x64.T @ x64 + np.eye(x.shape[1]), x64.T @ y.astype(np.float64))
    return np.linalg.lstsq(x.astype(np.float64), y.astype(np.float64), rcond=None)[0]


def gradient_bound(
    kind: str, x: ArrayLike, y: ArrayLike, theta_hat: ArrayLike | None = None
) -> float:
    """A per-example gradient bound ``L`` of the data for ``C_theory = L²T/n²``.

    "logistic": ``max_i ‖x_i‖`` (``|σ(z) − y| ≤ 1``; a bound at every θ). "ridge"/"ols":
    ``max_i 2|y_i − θ̂ᵀx_i|·‖x_i‖``, the loss term's per-example gradient at ``theta_hat`` (the
    exact minimiser, required): data-dependent and only at θ̂, so a diagnostic, not a DP bound."""
    kind = _check_kind(kind)
    x, y = _check_xy(x, y)
    norms = np.linalg.norm(x.astype(np.float64), axis=1)
    if kind == "logistic":
        return float(norms.max())
    if theta_hat is None:
        raise ValueError(f"kind {kind!r} needs theta_hat (see exact_minimizer)")
    r = np.abs(y - x @ np.asarray(theta_hat))
    return float(np.max(2.0 * r * norms))


def accuracy_pp(x: ArrayLike, y: ArrayLike, w: ArrayLike) -> np.ndarray:
    """In-sample accuracy in percent of binary GLM classifiers (predict ``1`` iff ``θᵀx > 0``,
    labels in {0, 1}) for a stack of weight vectors ``w`` (``(..., d)``), computed in float64
    (exact ``100·k/n``). Returns shape ``w.shape[:-1]``."""
    x, y = _check_xy(x, y)
    w = np.asarray(w)
    if w.shape[-1:] != (x.shape[1],):
        raise ValueError(f"w must end in the {x.shape[1]} features of x, got shape {w.shape}")
    z = np.einsum("nd,...d->...n", x.astype(np.float64), w.astype(np.float64))
    return 100.0 * np.mean((z > 0) == (y > 0.5), axis=-1)


if not TYPE_CHECKING:  # old names, for users' code (they warn)
    __getattr__ = module_renames(globals(), {"exact_minimiser": "exact_minimizer"})
