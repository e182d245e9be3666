"""DPSGD-F (Sun, Suresh & Menon, ICLR 2024), Algorithm 3: the practical variant of their Table 1.

One code path, three methods (``method=``):

* ``"dpsgdf"``: normalise every feature vector to norm ``C_F`` (zero rows map to 0), release the
  private mean ``μ̂ = (Σ_i x_i + N(0, σ_F² Δ² I)) / n`` with the analytic-Gaussian ``σ_F`` at
  ``(ε_F, δ)`` (noise on the *sum*: Algorithm 3 step 1 prints ``N(0, σ_F C_F I_d)`` added to the
  mean, a variance where a standard deviation is meant and without the ``1/n``; ``Δ = C_F`` under
  add/remove, ``2 C_F`` under replace-one, the paper's adjacency being ambiguous between the two),
  translate ``x' = x − μ̂``, and run Poisson DP-SGD (softmax cross-entropy with a per-class bias
  clipped jointly with the weights at ``C_G``, plain constant-step SGD, zero init) whose multiplier
  ``z`` is calibrated on the PLD-**composed** event
  ``[Gaussian(σ_F), T-fold Poisson-subsampled Gaussian(z)]`` at exactly ``(ε, δ)`` (step 3's
  separate budget ``ε'`` for the DP-SGD phase is not a separate quantity under PLD composition; the
  calibration is seeded by an RDP calibration, which brackets the PLD answer and keeps the PLD
  search fast). Return the bias-corrected ``W_prv = W'``, ``b_prv = b' − W'ᵀ μ̂`` (step 4),
  which act on normalised, *un-centred* features.
* ``"dpsgd"``: the baseline: the same normalisation and grid with ``μ̂ ≡ 0`` and ``z``
  calibrated for DP-SGD alone.
* ``"nonprivate"``: the same pipeline with no clipping and no noise (shuffled fixed-size
  batches; the paper does not describe its non-private runs).

The engine does the work: the data are the **unit-normalised** rows ``x̃``; ``C_F`` and ``μ̂``
enter as the per-run affine transform ``C_F·x̃ − μ̂`` of the engine extension
:class:`dpprep.features.AffineFeatures` (fields ``feature_scale``, ``feature_shift``), whose fast
GLM clipping path applies it as rank-1 corrections (never forming the transformed data), so a
grid of models shares one gathered batch and one matrix product per step
(:func:`grid_group`, ``experiments.results.run_groups``). The mean step draws its noise from its
own named stream (``"private_mean"``), so DPSGD and DPSGD-F with the same key share their Poisson
batches and DP-SGD noise (common random numbers).

Hyperparameter tuning is not charged, as in the paper (Sun et al. 2024, footnote 8).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from dp_accounting import dp_event
from jax.typing import ArrayLike

from dpprep import models, streams
from dpprep.accounting import dp
from dpprep.algorithms import Hyper, TrainConfig, train
from dpprep.extensions import Extension, Field
from dpprep.features import AffineFeatures, glm_params_for_raw_features
from dpprep.plan import DPPlan, ExecutionPlan
from dpprep.sweeps import Group, evaluate
from dpprep.renames import module_renames, renamed_fields, renamed_kwargs
from dpprep.validation import (
    check_delta,
    check_finite_array,
    check_key,
    check_positive,
    check_positive_int,
)

METHODS = ("dpsgdf", "dpsgd", "nonprivate")
MEAN_STREAM = "private_mean"


# --------------------------------------------------------------------------------------------------
# Step 0-1: normalisation and the private mean


def unit_normalize(x: ArrayLike) -> np.ndarray:
    """Rows scaled to unit L2 norm (float32); a zero row stays zero (our choice: the paper's
    ``x·C_F/‖x‖`` is undefined there)."""
    x = check_finite_array(x, "x", ndim=2).astype(np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.where(norms > 0, x / np.where(norms > 0, norms, 1.0), 0.0).astype(np.float32)


def normalize(x: ArrayLike, feature_norm: float) -> np.ndarray:
    """Step 0: ``x ← C_F · x / ‖x‖`` (zero rows map to 0)."""
    feature_norm = check_feature_norm(feature_norm)
    return (unit_normalize(x) * np.float32(feature_norm)).astype(np.float32)


def check_feature_norm(feature_norm: float, name: str = "feature_norm") -> float:
    value = float(feature_norm)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} (C_F) must be finite and > 0, got {feature_norm!r}")
    return value


def check_eps_f(eps_f: float, epsilon: float | None, name: str = "eps_F") -> float:
    """``0 < ε_F < ε`` (ValueError naming ``eps_F`` otherwise)."""
    value = float(eps_f)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be > 0, got {eps_f!r}")
    if epsilon is not None and not value < epsilon:
        raise ValueError(
            f"{name} must be < epsilon (the mean step spends part of the total budget), "
            f"got {name}={value!r} >= epsilon={epsilon!r}"
        )
    return value


@renamed_kwargs(neighbouring="neighboring_relation")
def mean_sensitivity_factor(neighboring_relation: str) -> float:
    """The L2 sensitivity of ``Σ_i x_i`` in units of ``C_F``: 1 (add/remove), 2 (replace-one)."""
    if neighboring_relation not in dp.NEIGHBORING_RELATIONS:
        raise ValueError(
            f"neighboring_relation must be one of {dp.NEIGHBORING_RELATIONS}, got "
            f"{neighboring_relation!r}"
        )
    return 1.0 if neighboring_relation == "add_remove" else 2.0


def mean_sigma(eps_f: float, delta: float) -> float:
    """``σ_F``: the analytic-Gaussian multiplier at ``(ε_F, δ)`` and sensitivity 1 (Balle & Wang;
    ``dp_accounting.get_sigma_gaussian``); 131.80 at (0.02, 1e-5)."""
    return dp.analytic_gaussian_sigma(check_eps_f(eps_f, None), check_delta(delta))


@renamed_kwargs(neighbouring="neighboring_relation")
def mean_event(
    eps_f: float, delta: float, neighboring_relation: str = "add_remove"
) -> dp_event.GaussianDpEvent:
    """The mean step as a dp-accounting event, as a multiplier of the per-record bound ``C_F``:
    noise std on the sum is ``σ_F·Δ`` = ``σ_F·factor·C_F``. Under replace-one dp-accounting's PLD
    doubles the Gaussian's sensitivity itself, so the event is ``Gaussian(factor·σ_F)`` under
    the run's own relation either way (and alone it is exactly ``(ε_F, δ)``-DP)."""
    return dp.gaussian_event(
        mean_sensitivity_factor(neighboring_relation) * mean_sigma(eps_f, delta)
    )


def mean_noise(key: jax.Array, num_features: int) -> jax.Array:
    """The standard normal ``ξ ∈ R^d`` of the mean step, from the run key's ``"private_mean"``
    stream (independent of the learner's batch and noise streams)."""
    return jax.random.normal(streams.stream(key, MEAN_STREAM), (num_features,), jnp.float32)


def mean_from_parts(
    unit_mean: ArrayLike, n: int, feature_norm: float, noise_std_unit: float, xi: ArrayLike
) -> np.ndarray:
    """``μ̂ = C_F·(x̄̃ + s·ξ/n)`` where ``x̄̃`` is the exact mean of the unit rows and ``s·C_F``
    the noise std on the sum of the normalised rows; equal to ``(Σ_i C_F x̃_i + N(0, (s C_F)²
    I))/n``.
    (One formula for :func:`fit`, :func:`grid_group` and the privacy audit, so all give the same
    ``μ̂``; traced inputs, as in the audit's vmapped runs, are computed with ``jax.numpy``.)"""
    xp: Any = jnp if any(isinstance(v, jax.core.Tracer) for v in (unit_mean, xi)) else np
    return (
        xp.float32(feature_norm)
        * (
            xp.asarray(unit_mean, xp.float32)
            + xp.float32(noise_std_unit / n) * xp.asarray(xi, xp.float32)
        )
    ).astype(xp.float32)


@renamed_kwargs(neighbouring="neighboring_relation")
def private_mean(
    x_unit: ArrayLike,
    feature_norm: float,
    eps_f: float,
    delta: float,
    key: jax.Array,
    *,
    neighboring_relation: str = "add_remove",
) -> np.ndarray:
    """Step 1 on unit-normalised rows ``x̃``: ``μ̂`` of the features ``C_F·x̃`` (their sum has
    sensitivity ``C_F``, ``2C_F`` under replace-one; ``n`` is public)."""
    x_unit = check_finite_array(x_unit, "x_unit", ndim=2)
    feature_norm = check_feature_norm(feature_norm)
    s = mean_sensitivity_factor(neighboring_relation) * mean_sigma(eps_f, delta)
    unit_mean = np.mean(np.asarray(x_unit, np.float64), axis=0)
    return mean_from_parts(
        unit_mean, x_unit.shape[0], feature_norm, s, mean_noise(key, x_unit.shape[1])
    )


def bias_correct(params: models.Params, mu_hat: ArrayLike) -> models.Params:
    """Step 5: ``W_prv = W'``, ``b_prv = b' − W'ᵀ μ̂``: parameters trained on ``x − μ̂`` that act
    on un-centred ``x`` (:func:`dpprep.features.glm_params_for_raw_features` with no scale)."""
    return glm_params_for_raw_features(params, None, jnp.asarray(mu_hat, jnp.float32))


# --------------------------------------------------------------------------------------------------
# One run


@renamed_fields(clip_norm="l2_clip_norm", neighbouring="neighboring_relation")
@dataclasses.dataclass(frozen=True)
class DpsgdfConfig:
    """One Algorithm-3 run (or its DPSGD / non-private baseline).

    ``feature_norm=None`` skips normalisation (the raw-pixel sensitivity variant; baseline and
    non-private only). ``iterates="both"`` keeps the last iterate (the reported one) and the
    average of ``θ_1..θ_T`` (a diagnostic)."""

    method: str = "dpsgdf"
    epsilon: float | None = 1.0
    delta: float = 1e-5
    eps_F: float | None = 0.05
    feature_norm: float | None = 1.0
    batch_size: int = 1024
    epochs: float = 40
    learning_rate: float = 1.0
    l2_clip_norm: float = 1.0
    neighboring_relation: str = "add_remove"
    iterates: str = "both"
    fit_intercept: bool = True
    sampling: str | None = None
    matmul_precision: str | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        mean_sensitivity_factor(self.neighboring_relation)
        check_delta(self.delta)
        check_positive_int(self.batch_size, "batch_size")
        check_positive(self.epochs, "epochs")
        check_positive(self.learning_rate, "learning_rate")
        if self.method != "nonprivate":
            if self.epsilon is None:
                raise ValueError(f"epsilon is required for method={self.method!r}")
            check_positive(self.epsilon, "epsilon")
            check_positive(self.l2_clip_norm, "l2_clip_norm")
        if self.method == "dpsgdf":
            check_eps_f(self.eps_F, self.epsilon)
            if self.feature_norm is None:
                raise ValueError(
                    "feature_norm (C_F) is required for dpsgdf: it bounds the mean's sensitivity"
                )
        if self.feature_norm is not None:
            check_feature_norm(self.feature_norm)

    @property
    def private(self) -> bool:
        return self.method != "nonprivate"

    @property
    def sampler(self) -> str:
        return self.sampling or ("poisson" if self.private else "shuffle")


@dataclasses.dataclass(frozen=True)
class PrivateMean(Extension):
    """Engine extension that declares the private feature mean a grid point's shift was computed
    from: field ``mean_multiplier`` (the multiplier of the mean's Gaussian event,
    :func:`mean_event`; NaN or None: no private mean). It changes nothing in the run; a sweep's
    account of the point composes the mean's event with the training
    (:meth:`~dpprep.extensions.Extension.fixed_events`), so each point's ε is DPSGD-F's whole ε."""

    fields: ClassVar[Mapping[str, Field]] = {"mean_multiplier": Field(privacy=True)}

    def noise_factor(self, values: Mapping[str, Any]) -> float:
        del values
        return 1.0

    def fixed_events(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        mult = values["mean_multiplier"]
        if mult is None or math.isnan(float(mult)):
            return ()
        return (dp.gaussian_event(float(mult)),)


def _epochs(cfg: DpsgdfConfig) -> float:
    if cfg.sampler == "shuffle" and cfg.epochs != int(cfg.epochs):
        raise ValueError(
            f"epochs must be a whole number for shuffled epochs (method={cfg.method!r}), "
            f"got {cfg.epochs!r}"
        )
    return cfg.epochs if cfg.sampler != "shuffle" else int(cfg.epochs)


def layout(cfg: DpsgdfConfig, n: int) -> ExecutionPlan:
    """The run's data access on ``n`` records (sampler, steps, batch, padding), without the
    calibration :func:`plan` does: for cost models and shapes."""
    return ExecutionPlan.create(
        cfg.sampler,
        check_positive_int(n, "n"),
        batch_size=cfg.batch_size,
        epochs=_epochs(cfg),
        neighboring_relation=cfg.neighboring_relation if cfg.private else None,
    )


def plan(
    cfg: DpsgdfConfig,
    n: int,
    *,
    noise_multiplier: float | None = None,
    unit: str | None = None,
    with_mean: bool = True,
) -> DPPlan:
    """The run's :class:`~dpprep.plan.DPPlan` on ``n`` records: step 3's DP-SGD with ``z``
    calibrated so that ``[mean, DP-SGD]`` (DP-SGD alone for the baseline) is exactly ``(ε, δ)``-DP
    (Poisson overflow slack included), or at the given ``noise_multiplier``; the non-private
    baseline's plan claims nothing. A calibration that fails raises ValueError naming ``unit``.
    ``with_mean=False``: the plan of a grid whose points declare their own mean
    (:class:`PrivateMean`), which then is not charged twice."""
    epochs = _epochs(cfg)
    if not cfg.private:
        return DPPlan.non_private(
            cfg.sampler, check_positive_int(n, "n"), batch_size=cfg.batch_size, epochs=epochs
        )
    with_mean = with_mean and cfg.method == "dpsgdf"
    fixed = (mean_event(cfg.eps_F, cfg.delta, cfg.neighboring_relation),) if with_mean else ()  # type: ignore[arg-type]
    target = None if noise_multiplier is not None else cfg.epsilon
    try:
        return DPPlan.create(
            cfg.sampler,
            n,
            batch_size=cfg.batch_size,
            epochs=epochs,
            l2_clip_norm=cfg.l2_clip_norm,
            delta=cfg.delta,
            target_epsilon=target,
            noise_multiplier=noise_multiplier,
            fixed_events=fixed,
            neighboring_relation=cfg.neighboring_relation,
        )
    except ValueError as err:
        where = f" for grid unit {unit}" if unit else ""
        raise ValueError(
            f"noise calibration did not converge{where} (epsilon={cfg.epsilon}, eps_F={cfg.eps_F}, "
            f"batch_size={cfg.batch_size}, epochs={cfg.epochs}, n={n}): {err}"
        ) from err


def train_config(
    cfg: DpsgdfConfig,
    run_plan: DPPlan,
    num_features: int,
    num_classes: int,
    *,
    model: models.Model | None = None,
    grid: bool = False,
) -> TrainConfig:
    """The engine config of ``cfg`` on ``run_plan`` (:func:`plan`), with the
    :class:`~dpprep.features.AffineFeatures` extension (its hyper does not set the feature
    transform) and, for a grid's points (``grid``), :class:`PrivateMean`."""
    model = model or models.softmax_regression(
        num_features, num_classes, fit_intercept=cfg.fit_intercept
    )
    extensions: tuple[Extension, ...] = (
        (AffineFeatures(), PrivateMean()) if grid else (AffineFeatures(),)
    )
    return TrainConfig(
        model,
        Hyper(cfg.learning_rate),
        run_plan,
        iterates=cfg.iterates,
        matmul_precision=cfg.matmul_precision,
        extensions=extensions,
    )


@dataclasses.dataclass(frozen=True)
class Calibration:
    """Noise of one private setting: ``sigma_F`` (None for DPSGD), the mean event's multiplier,
    the DP-SGD multiplier ``z``, the steps ``T`` and the DP-SGD part's standalone ε (diagnostic)."""

    sigma_F: float | None
    mean_multiplier: float | None
    noise_multiplier: float
    steps: int
    epsilon_dpsgd_alone: float | None = None


def calibrate(
    cfg: DpsgdfConfig, n: int, *, with_alone: bool = False, unit: str | None = None
) -> Calibration:
    """Step 3: ``z`` with ``[mean, DP-SGD]`` (or DP-SGD alone for the baseline) exactly
    ``(ε, δ)``-DP for the run ``train`` makes (:func:`plan`, Poisson overflow slack included).
    A calibration that fails raises ValueError naming ``unit``."""
    if not cfg.private:
        raise ValueError("calibrate needs a private method (dpsgdf or dpsgd)")
    run_plan = plan(cfg, n, unit=unit)
    sigma_f = mean_sigma(cfg.eps_F, cfg.delta) if cfg.method == "dpsgdf" else None  # type: ignore[arg-type]
    mult = (
        mean_sensitivity_factor(cfg.neighboring_relation) * sigma_f if sigma_f is not None else None
    )
    alone = run_plan.execution.epsilon(run_plan.noise_multiplier, cfg.delta) if with_alone else None
    return Calibration(sigma_f, mult, float(run_plan.noise_multiplier), run_plan.steps, alone)


@dataclasses.dataclass(frozen=True)
class FitResult:
    """``params``: the private output (bias-corrected, acting on ``C_F``-normalised, un-centred
    features; a dict of ``last``/``average`` with ``iterates="both"``); ``centred``: the same
    before step 5; ``mu_hat``: the released mean (zeros for the baselines)."""

    params: models.Params
    centred: models.Params
    mu_hat: np.ndarray
    calibration: Calibration | None
    evaluation: dict[str, Any] | None
    metrics: dict[str, Any]


def _check_labels(y: ArrayLike, n: int, num_classes: int | None, name: str) -> np.ndarray:
    """Integer class labels in ``[0, num_classes)`` (when given), one per row of the features."""
    y = check_finite_array(y, name, ndim=1)
    if y.shape[0] != n:
        raise ValueError(f"{name} has {y.shape[0]} labels for {n} rows")
    if y.dtype.kind not in "iub" and not (y.dtype.kind == "f" and np.all(y == np.round(y))):
        raise ValueError(f"{name} must hold integer class labels, got non-integer {y.dtype} values")
    if y.size and (y.min() < 0 or (num_classes is not None and y.max() >= num_classes)):
        bound = f"[0, {num_classes})" if num_classes is not None else ">= 0"
        raise ValueError(
            f"{name} must hold class labels in {bound}, got values in [{y.min()}, {y.max()}]"
        )
    return y.astype(np.int32)


def fit(
    cfg: DpsgdfConfig,
    x: ArrayLike,
    y: ArrayLike,
    key: jax.Array,
    *,
    eval_data: tuple[ArrayLike, ArrayLike] | None = None,
    num_classes: int | None = None,
    model: models.Model | None = None,
    track_params: bool = False,
) -> FitResult:
    """Algorithm 3 end to end on raw features ``x`` (normalised here unless ``feature_norm`` is
    None). ``eval_data`` (raw test features) are normalised the same way and scored with the
    bias-corrected parameters (Algorithm 3 step 4), so μ̂ is not subtracted again at test time.
    ``model``: a GLM of ``d`` features (:mod:`dpprep.models`; default the paper's softmax
    regression over ``num_classes``); ``track_params``: record every (centred) iterate in
    ``metrics["params"]``, as :class:`~dpprep.algorithms.TrainConfig` does."""
    key = check_key(key)
    x = check_finite_array(x, "x", ndim=2, float32=True)
    n, d = x.shape
    if n == 0:
        raise ValueError("x must contain at least one example")
    y = _check_labels(y, n, num_classes, "y")
    k = int(num_classes or (int(np.max(y)) + 1))
    if eval_data is not None:  # checked before any calibration or training
        if not (isinstance(eval_data, (tuple, list)) and len(eval_data) == 2):
            raise ValueError("eval_data must be a pair (x_test, y_test)")
        xt = check_finite_array(eval_data[0], "x_test", ndim=2, float32=True)
        if xt.shape[1] != d:
            raise ValueError(f"x_test has {xt.shape[1]} features, x has {d}")
        yt = _check_labels(eval_data[1], xt.shape[0], k, "y_test")
    unit = unit_normalize(x) if cfg.feature_norm is not None else x.astype(np.float32)
    scale = cfg.feature_norm
    if cfg.method == "dpsgdf":
        s = mean_sensitivity_factor(cfg.neighboring_relation) * mean_sigma(cfg.eps_F, cfg.delta)
        mu_hat = mean_from_parts(
            np.mean(unit.astype(np.float64), axis=0), n, cfg.feature_norm, s, mean_noise(key, d)
        )
    else:
        mu_hat = np.zeros(d, np.float32)
    run_plan = plan(cfg, n)
    calibration = calibrate(cfg, n) if cfg.private else None
    tc = train_config(cfg, run_plan, d, k, model=model)
    shift = mu_hat if cfg.method == "dpsgdf" else None
    tc = dataclasses.replace(
        tc,
        hyper=Hyper(cfg.learning_rate, extra={"feature_scale": scale, "feature_shift": shift}),
        track_params=bool(track_params),
    )
    params, metrics = train(tc, tc.model.init(None), (unit, y), key)
    if cfg.iterates == "both":
        corrected = {name: bias_correct(p, mu_hat) for name, p in params.items()}
    else:
        corrected = bias_correct(params, mu_hat)
    evaluation = None
    if eval_data is not None:
        xt = (
            normalize(xt, cfg.feature_norm)
            if cfg.feature_norm is not None
            else xt.astype(np.float32)
        )
        score = lambda p: {  # noqa: E731
            k2: float(v)
            for k2, v in evaluate(tc.model, p, jnp.asarray(xt), jnp.asarray(yt)).items()
        }
        evaluation = (
            {name: score(p) for name, p in corrected.items()}
            if cfg.iterates == "both"
            else score(corrected)
        )
    return FitResult(corrected, params, mu_hat, calibration, evaluation, metrics)


# --------------------------------------------------------------------------------------------------
# The grid: one shared batch per seed and step


@dataclasses.dataclass(frozen=True)
class GridModel:
    """One point of a (B, E) group's grid, a "model" of Sun et al.'s tables: method, ε (None for
    non-private), ε_F (DPSGD-F), C_F, η. (Not a :class:`dpprep.models.Model`.)"""

    method: str
    epsilon: float | None
    eps_F: float | None
    feature_norm: float | None
    learning_rate: float

    def config(self, batch_size: int, epochs: float, **options: Any) -> DpsgdfConfig:
        return DpsgdfConfig(
            method=self.method,
            epsilon=self.epsilon,
            eps_F=self.eps_F,
            feature_norm=self.feature_norm,
            batch_size=batch_size,
            epochs=epochs,
            learning_rate=self.learning_rate,
            **options,
        )


def grid_models(
    methods: Sequence[str],
    feature_norms: Sequence[float],
    learning_rates: Sequence[float],
    eps_fs: Sequence[float],
    epsilon: float | None,
) -> list[GridModel]:
    """The models of one (B, E) group: ``C_F × η × ({none} ∪ ε_F)`` for the private methods
    (DPSGD is the ``ε_F = none`` slice), ``C_F × η`` for non-private. Empty grids raise."""
    for name, values in (("feature_norms", feature_norms), ("learning_rates", learning_rates)):
        if len(values) == 0:
            raise ValueError(f"{name} must not be empty (an empty grid has nothing to select from)")
    for c in feature_norms:
        check_feature_norm(c, "feature_norms")
    out = []
    for method in methods:
        if method not in METHODS:
            raise ValueError(f"methods must be among {METHODS}, got {method!r}")
        if method == "dpsgdf":
            if len(eps_fs) == 0:
                raise ValueError("eps_fs must not be empty when dpsgdf is in methods")
            fs = [check_eps_f(e, epsilon, "eps_fs") for e in eps_fs]
        else:
            fs = [None]
        eps = None if method == "nonprivate" else epsilon
        out += [
            GridModel(method, eps, f, float(c), float(lr))
            for c in feature_norms
            for lr in learning_rates
            for f in fs
        ]
    if not out:
        raise ValueError("methods must not be empty")
    return out


def _setting(m: GridModel) -> str:
    return f"{m.method}/{m.epsilon}/{m.eps_F}"


@renamed_kwargs(neighbouring="neighboring_relation")
def calibrate_models(
    model_list: Sequence[GridModel],
    batch_size: int,
    epochs: float,
    n: int,
    *,
    delta: float = 1e-5,
    neighboring_relation: str = "add_remove",
    unit: str | None = None,
) -> dict[str, float]:
    """The DP-SGD multiplier of every distinct (method, ε, ε_F) among private ``model_list``
    (JSON-able: ``{"method/eps/eps_F": z}``). A failed calibration raises ValueError naming
    ``unit``.
    """
    out: dict[str, float] = {}
    for m in model_list:
        if m.method != "nonprivate" and _setting(m) not in out:
            cfg = m.config(
                batch_size, epochs, neighboring_relation=neighboring_relation, delta=delta
            )
            out[_setting(m)] = calibrate(cfg, n, unit=unit).noise_multiplier
    return out


@renamed_kwargs(neighbouring="neighboring_relation")
def grid_group(
    key: str,
    model_list: Sequence[GridModel],
    batch_size: int,
    epochs: float,
    n: int,
    unit_mean: ArrayLike,
    seed_keys: jax.Array,
    *,
    delta: float = 1e-5,
    neighboring_relation: str = "add_remove",
    fit_intercept: bool = True,
    num_classes: int = 10,
    num_features: int | None = None,
    matmul_precision: str | None = None,
    raw_features: bool = False,
    noise_multipliers: dict[str, float] | None = None,
) -> Group:
    """One (B, E) group as a :class:`~dpprep.sweeps.Group` over unit-normalised data: points
    ``feature_scale = C_F``, ``learning_rate = η``, ``noise_multiplier = z(ε, ε_F, B, E)`` and a
    per-seed ``feature_shift = μ̂`` (``C_F·(x̄̃ + σ_F·Δ·ξ_s/n)`` with ``ξ_s`` the seed's
    ``"private_mean"`` draw, shared by every ε_F and C_F of the seed; 0 for DPSGD). Private and
    non-private models cannot share a group (different samplers). ``raw_features``: no
    normalisation (feature_scale 1, the raw-pixel variant). ``noise_multipliers``: the result of
    :func:`calibrate_models` for these models (e.g. from a results store), else calibrated here."""
    if not model_list:
        raise ValueError("a grid group needs at least one model (empty grid)")
    private = {m.method != "nonprivate" for m in model_list}
    if len(private) != 1:
        raise ValueError("private and non-private models cannot share a group (different samplers)")
    private = private.pop()
    unit_mean = np.asarray(unit_mean, np.float32)
    d = num_features or unit_mean.shape[0]
    first = model_list[0].config(
        batch_size,
        epochs,
        neighboring_relation=neighboring_relation,
        fit_intercept=fit_intercept,
        matmul_precision=matmul_precision,
        iterates="both",
    )
    if private and noise_multipliers is None:
        noise_multipliers = calibrate_models(
            model_list,
            batch_size,
            epochs,
            n,
            delta=delta,
            neighboring_relation=neighboring_relation,
            unit=key,
        )
    zs, scales, lrs, mults = [], [], [], []
    for m in model_list:
        if private:
            zs.append(noise_multipliers[_setting(m)])
        scales.append(1.0 if raw_features else m.feature_norm)
        lrs.append(m.learning_rate)
        mults.append(
            mean_sensitivity_factor(neighboring_relation) * mean_sigma(m.eps_F, delta)
            if m.method == "dpsgdf"
            else None
        )
    run_plan = plan(
        first, n, noise_multiplier=float(zs[0]) if private else None, unit=key, with_mean=False
    )
    tc = train_config(first, run_plan, d, num_classes, grid=private)
    points: dict[str, Any] = {
        "learning_rate": np.asarray(lrs, np.float32),
        "feature_scale": np.asarray(scales, np.float32),
    }
    per_seed: tuple[str, ...] = ()
    if private:
        points["noise_multiplier"] = np.asarray(zs, np.float32)
        points["mean_multiplier"] = np.asarray(
            [np.nan if m is None else m for m in mults], np.float64
        )
        if any(mu is not None for mu in mults):
            xi = np.asarray(jax.vmap(lambda k: mean_noise(k, d))(seed_keys))
            shift = np.zeros((xi.shape[0], len(model_list), d), np.float32)
            for p, (m, mult) in enumerate(zip(model_list, mults)):
                if mult is not None:
                    shift[:, p] = mean_from_parts(unit_mean[None], n, m.feature_norm, mult, xi)
            points["feature_shift"] = shift
            per_seed = ("feature_shift",)
    return Group(key, tc, points, per_seed)


if not TYPE_CHECKING:  # old names, for users' code (they warn)
    __getattr__ = module_renames(globals(), {"Model": "GridModel"})
