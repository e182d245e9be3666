"""Algorithm 1 of Hu, Sanyal, Schölkopf (2024): propose-test-release (PTR) for non-private PCA
rank reduction followed by DP-GD (§5.2 of the paper), as a private learner.

1. ``γ = J_lb(S) + Lap(1/ε)`` — a noisy lower bound on the Hamming distance from ``S`` to the
   nearest dataset whose k-th eigen-gap is below β;
2. if ``γ ≤ log(2/δ)/ε``: return ⊥ (:data:`BOTTOM`, an explicit result, not an exception);
3. else: non-private PCA rank reduction ``x ↦ A_kA_kᵀx`` (:func:`dpprep.preprocess.pca_reduce`) and
   projected, averaged DP-GD with **twice** the Table-1 noise, ``σ = 2L√T/(εn)`` on the mean
   gradient (the engine adds ``n·σ = 2L√T/ε`` to the gradient sum).

The exact distance is intractable; :func:`distance_statistic` is the implementable lower bound
from the proof of Proposition 8 (App. E, Eqs. 56–59),
``J_lb(S) = max(0, (δ_k(S) − β)/g_n)``, ``g_n = 4(3n+2)/(n(n−1))`` (twice the covariance
perturbation of Eq. 41: by Weyl each eigenvalue moves by at most ``‖Σ̃ − Σ‖_F``, so the gap moves
by at most ``g_n`` under one replacement). Hence ``J_lb`` has Hamming sensitivity ≤ 1, is 0 when
``δ_k(S) ≤ β`` and is ≤ the exact distance — all the privacy and utility proofs use.
The covariance is the centred ``1/(n−1)`` one, as in ``pca_reduce``.

Guarantee (:func:`guarantee`): Theorem 7 from :mod:`dpprep.preprocess.privacy.theorem7` — the
paper's
closed form ``(ε̂ + ε, δ)`` and a rigorous numeric level (the closed form's 1.05 needs α ≥ 11);
:func:`calibrate_epsilon` finds the PTR ε for a target overall ε. Theorem 7 needs ``n ≥ 101`` (its
constant 12.2).

:func:`algorithm1_sweep` runs Algorithm 1 over PTR ε × keys × step sizes with one
eigendecomposition and the DP-GD of every passed test as one :func:`dpprep.sweeps.sweep_points`
call (per chunk); :func:`algorithm1` is its single-point case.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import TYPE_CHECKING, Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import brentq

from dpprep import models
from dpprep.preprocess.privacy.theorem7 import Theorem7, theorem7
from dpprep.algorithms import Hyper, TrainConfig
from dpprep.plan import DPPlan
from dpprep.optimizers import L2BallProjection
from dpprep.preprocess.pca import PCAResult, centred_covariance, pca_reduce
from dpprep.preprocess.unit_ball import check_unit_ball
from dpprep.renames import module_renames, renamed_fields, renamed_kwargs
from dpprep.sweeps import sweep_points
from dpprep.validation import (
    check_delta,
    check_epsilon,
    check_key,
    check_positive,
    check_positive_int,
)

if not TYPE_CHECKING:  # old names, for users' code (they warn)
    __getattr__ = module_renames(globals(), {"dp_gd_noise_std": "dp_gd_stddev"})

__all__ = [
    "BOTTOM",
    "Bottom",
    "N_MIN",
    "PTRTest",
    "PTRResult",
    "PTRSweep",
    "gap_change_bound",
    "eigen_gap",
    "distance_statistic",
    "statistic_from_gap",
    "ptr_test",
    "laplace_test",
    "dp_gd_stddev",
    "algorithm1",
    "algorithm1_sweep",
    "train_config",
    "guarantee",
    "calibrate_epsilon",
]

N_MIN = 101  # Theorem 7's condition (the constant 12.2 = 4(3n+2)/(n−1) at n = 101)


class Bottom:
    """The ⊥ output of Algorithm 1 (the test failed; nothing about the data is released)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "⊥"

    def __bool__(self) -> bool:
        return False


BOTTOM = Bottom()


def gap_change_bound(n: int) -> float:
    """``g_n = 4(3n+2)/(n(n−1))``: most the k-th eigen-gap of the centred covariance moves under one
    replacement in the unit ball (``≤ 12.2/n`` for ``n ≥ 101``)."""
    n = check_positive_int(n, "n", minimum=2)
    return 4.0 * (3 * n + 2) / (n * (n - 1))


def _check_inputs(x, k: int, beta: float) -> tuple[np.ndarray, int, float]:
    arr = check_unit_ball(x, "x")
    n, d = arr.shape
    if n < N_MIN:
        raise ValueError(f"n must be >= {N_MIN} (Theorem 7's condition), got n={n} rows in x")
    k = check_positive_int(k, "k")
    if k >= d:
        raise ValueError(f"k must be smaller than the dimension d={d}, got k={k}")
    beta = check_positive(beta, "beta")
    return arr, k, beta


def eigen_gap(x, k: int) -> float:
    """``δ_k(S) = λ_k − λ_{k+1}`` of the centred ``1/(n−1)`` covariance (eigenvalues descending)."""
    arr = np.asarray(x, dtype=np.float64)
    cov, _ = centred_covariance(arr)
    ev = np.linalg.eigvalsh(cov)[::-1]
    return float(ev[k - 1] - ev[k])


def distance_statistic(x, k: int, beta: float) -> float:
    """``J_lb(S) = max(0, (δ_k(S) − β)/g_n)``: Hamming sensitivity ≤ 1, zero when ``δ_k(S) ≤ β``."""
    arr, k, beta = _check_inputs(x, k, beta)
    return statistic_from_gap(eigen_gap(arr, k), arr.shape[0], beta)


def statistic_from_gap(gap: float, n: int, beta: float) -> float:
    """``J_lb`` from an eigen-gap already computed on the centred ``1/(n−1)`` covariance (e.g.
    ``pca_reduce(...).gap_k``), so that the test and the projection share one eigendecomposition."""
    n = check_positive_int(n, "n", minimum=N_MIN)
    beta = check_positive(beta, "beta")
    return max(0.0, (float(gap) - beta) / gap_change_bound(n))


@dataclasses.dataclass(frozen=True)
class PTRTest:
    """Steps 1–2: ``passed`` iff ``noisy_statistic > threshold``. Only ``passed`` is released
    (``statistic`` and ``noisy_statistic`` are for analysis)."""

    statistic: float
    noisy_statistic: float
    threshold: float
    passed: bool


def ptr_test(x, k: int, beta: float, epsilon: float, delta: float, key) -> PTRTest:
    """Steps 1–2 of Algorithm 1: ``J_lb(S) + Lap(1/ε)`` against ``log(2/δ)/ε`` (⊥ at or below)."""
    return laplace_test(distance_statistic(x, k, beta), epsilon, delta, key)


def laplace_test(statistic: float, epsilon: float, delta: float, key) -> PTRTest:
    """The test of step 2 on an already computed ``J_lb`` (so that many keys or ε share one
    eigendecomposition): ``passed`` iff ``statistic + Lap(1/ε) > log(2/δ)/ε``."""
    stat = check_positive(statistic, "statistic", allow_zero=True)
    eps = check_epsilon(epsilon)
    delta = check_delta(delta)
    key = check_key(key)
    noisy = stat + float(jax.random.laplace(key, dtype=np.float32)) / eps
    threshold = math.log(2.0 / delta) / eps
    return PTRTest(stat, noisy, threshold, noisy > threshold)


def dp_gd_stddev(mechanism_epsilon: float, steps: int, *, lipschitz: float = 1.0) -> float:
    """Engine ``stddev`` (on the gradient *sum*) of full-batch DP-GD at Table 1's parameter
    ``ε_b``: ``σ = L√T/(ε_b n)`` on the mean, i.e. ``L√T/ε_b`` on the sum (RDP ``2αε_b²``).
    Algorithm 1's doubled noise is ``ε_b = ε/2``."""
    eps = check_epsilon(mechanism_epsilon, "mechanism_epsilon")
    steps = check_positive_int(steps, "steps")
    lip = check_positive(lipschitz, "lipschitz")
    return lip * math.sqrt(steps) / eps


def guarantee(
    epsilon: float, delta: float, beta: float, *, lipschitz: float = 1.0, smoothness: float = 1.0
) -> Theorem7:
    """Theorem 7 for Algorithm 1 at PTR parameter ``epsilon`` (``total_epsilon``: the paper's closed
    form; ``numeric_total_epsilon``: the rigorous numeric level, valid at every Rényi order)."""
    return theorem7(epsilon, delta, beta, lipschitz=lipschitz, smoothness=smoothness)


def calibrate_epsilon(
    target_epsilon: float,
    delta: float,
    beta: float,
    *,
    lipschitz: float = 1.0,
    smoothness: float = 1.0,
    level: Literal["numeric", "paper"] = "numeric",
) -> float:
    """Largest PTR ``ε`` whose Theorem-7 level is ≤ ``target_epsilon`` at ``delta``
    (``level="numeric"``: the rigorous value; ``"paper"``: the closed form ``ε̂ + ε``, which also
    needs Theorem 7's δ condition — ValueError if it fails at the returned ε)."""
    target = check_epsilon(target_epsilon, "target_epsilon")
    if level not in ("numeric", "paper"):
        raise ValueError(f"level must be 'numeric' or 'paper', got {level!r}")
    field = "numeric_total_epsilon" if level == "numeric" else "total_epsilon"

    def excess(u: float) -> float:
        return math.log(
            getattr(
                guarantee(math.exp(u), delta, beta, lipschitz=lipschitz, smoothness=smoothness),
                field,
            )
            / target
        )

    # Both levels grow at least like ε (the test's own share) and at most polynomially in ε.
    lo, hi = math.log(target) - 40.0, math.log(target)
    root = brentq(excess, lo, hi, xtol=1e-12)
    eps = math.exp(root)
    while excess(math.log(eps)) > 0:  # land on the feasible side
        eps *= 1.0 - 1e-12
    if (
        level == "paper"
        and not guarantee(
            eps, delta, beta, lipschitz=lipschitz, smoothness=smoothness
        ).delta_condition_holds
    ):
        raise ValueError(f"Theorem 7's delta condition fails at the calibrated epsilon={eps:.4g}")
    return eps


@renamed_fields(noise_std="stddev")
@dataclasses.dataclass(frozen=True, eq=False)
class PTRResult:
    """Output of :func:`algorithm1`: ``output`` is :data:`BOTTOM` or the DP-GD parameters (the only
    private release); ``test``, ``pca`` (None on ⊥) and ``stddev`` are for analysis."""

    output: models.Params  # or BOTTOM
    test: PTRTest
    pca: PCAResult | None
    stddev: float
    guarantee: Theorem7

    @property
    def is_bottom(self) -> bool:
        return self.output is BOTTOM


@functools.cache
def _logistic(num_features: int) -> models.Model:
    # One model object per width: configs hash their model by identity, so the configs of one width
    # (any step size or noise) share the engine's compilations.
    return models.logistic_regression(num_features, fit_intercept=False)


@renamed_kwargs(noise_std="stddev")
def train_config(
    num_features: int,
    n: int,
    steps: int,
    learning_rate: float,
    stddev: float,
    delta: float,
    *,
    radius: float = 1.0,
    lipschitz: float = 1.0,
) -> TrainConfig:
    """Projected, averaged, full-batch DP-GD for logistic regression without intercept (w_0 = 0) on
    ``n`` rows, a replace-one guarantee (Hu et al.'s setting). The per-example gradients are
    clipped to ``L`` (``lipschitz``), so that the bound the guarantee rests on holds by
    construction (on data in the unit ball the logistic loss's gradients are within it and the
    clipping never binds), and the noise std on the sum ``stddev`` is the plan's ``z·L``."""
    lipschitz = check_positive(lipschitz, "lipschitz")
    plan = DPPlan.create(
        "full",
        n,
        steps=steps,
        l2_clip_norm=lipschitz,
        noise_multiplier=check_positive(stddev, "stddev") / lipschitz,
        delta=delta,
        neighboring_relation="replace_one",
    )
    return TrainConfig(
        model=_logistic(check_positive_int(num_features, "num_features")),
        hyper=Hyper(learning_rate=learning_rate),
        plan=plan,
        iterates="average",
        extensions=(L2BallProjection(radius),),
    )


@renamed_fields(noise_std="stddev")
@dataclasses.dataclass(frozen=True, eq=False)
class PTRSweep:
    """Output of :func:`algorithm1_sweep` over ``E`` PTR ε × ``S`` keys × ``P`` step sizes.

    Attributes:
      tests: ``tests[i][s]``, the :class:`PTRTest` of ε ``i`` with key ``s``.
      passed: ``(E, S)`` bool, ``tests[i][s].passed`` (False: that run's output is ⊥).
      stddev: ``(E,)`` DP-GD's engine noise std per ε (twice Table 1's, :func:`dp_gd_stddev`).
      trained: whether DP-GD ran (it does when some test passed).
      params: the DP-GD parameters with leading axes ``(E, S, P)``, NaN where ⊥; None when not
        requested or when every test failed.
      evaluation: ``{metric: (E, S, P)}`` on ``eval_data`` (:func:`dpprep.sweeps.evaluate`), NaN
        where ⊥; empty without ``eval_data``.
      pca: the rank reduction (computed once, shared by the test and the projection; for analysis,
        it is released only through the runs that passed).
      guarantees: Theorem 7 per ε.
    """

    tests: tuple[tuple[PTRTest, ...], ...]
    passed: np.ndarray
    stddev: np.ndarray
    trained: bool
    params: models.Params
    evaluation: dict[str, np.ndarray]
    pca: PCAResult
    guarantees: tuple[Theorem7, ...]


def _by_epsilon(values, passed: np.ndarray) -> np.ndarray:
    """``(S, E·P, ...)`` sweep output (ε-major points) → ``(E, S, P, ...)``, NaN where ⊥."""
    num_eps, num_keys = passed.shape
    values = np.asarray(values)
    out = values.reshape(num_keys, num_eps, -1, *values.shape[2:]).swapaxes(0, 1)
    out = out.astype(np.result_type(out.dtype, np.float32))  # a copy
    out[~passed] = np.nan
    return out


def algorithm1_sweep(
    x,
    y,
    *,
    k: int,
    beta: float,
    epsilons,
    delta: float,
    keys,
    steps: int,
    learning_rates,
    radius: float = 1.0,
    lipschitz: float = 1.0,
    smoothness: float | None = None,
    pca: PCAResult | None = None,
    eval_data: tuple[Any, Any] | None = None,
    chunk_size: int | None = None,
    return_params: bool = True,
) -> PTRSweep:
    """Algorithm 1 of Hu, Sanyal, Schölkopf (2024) for logistic regression on ``{‖θ‖ ≤ radius}``
    (labels ``y`` in {0, 1}), run for every PTR ``ε`` in ``epsilons`` × key in ``keys`` × step size
    in ``learning_rates``; each (ε, key, step size) is one independent run of the algorithm.

    Each key is split as in :func:`algorithm1` (``jax.random.split(key)``: the test's key, then
    DP-GD's). Steps 1–2 use ``J_lb`` from ``pca.gap_k`` (:func:`statistic_from_gap`: one
    eigendecomposition shared by every test and the projection) and :func:`laplace_test`. Step 3
    trains projected, averaged, full-batch DP-GD (:func:`train_config`, ``w_0 = 0``) on the rank
    reduced data with noise ``dp_gd_stddev(ε/2, steps)`` as one
    :func:`dpprep.sweeps.sweep_points` over the ``E·P`` (ε-major) points ``(stddev,
    learning_rate)`` × keys. It runs when some test passed, always over every point (one set of
    points, so one compiled shape whichever tests pass); the runs whose test failed are discarded
    and reported as ⊥ (NaN in ``params`` and ``evaluation``). When every test fails nothing trains.

    Args:
      x, y: data in the unit ball (``n ≥ 101``) and labels.
      k, beta: the rank and the proposed eigen-gap lower bound β.
      epsilons: the PTR ε of each run (not the overall level: :func:`calibrate_epsilon`).
      delta: the δ of the test's threshold ``log(2/δ)/ε``.
      keys: stacked PRNG keys, one per repetition (``jax.random.split(key, S)``).
      steps, learning_rates: DP-GD's ``T`` and the step sizes swept.
      radius, lipschitz: the ball ``‖θ‖ ≤ radius`` and the loss's Lipschitz constant L.
      smoothness: for the reported guarantee; default the logistic loss's ``μ = 1 + radius/4``.
      pca: ``pca_reduce(x, k, mode="rank")`` when already computed (it is computed otherwise).
      eval_data: ``(x, y)`` on which every trained model is evaluated inside the sweep.
      chunk_size: points per compiled call (:func:`dpprep.sweeps.sweep_points`).
      return_params: False drops the parameters (``params`` is None).

    Returns:
      a :class:`PTRSweep`. Raises ValueError for ``k ≥ d``, ``beta ≤ 0``, rows outside the unit
      ball, ``n < 101``, a bad ε, δ or key, or a ``pca`` that is not x's rank-k reduction.
    """
    arr, k, beta = _check_inputs(x, k, beta)
    n, d = arr.shape
    keys = check_key(keys, "keys", stacked=True)
    steps = check_positive_int(steps, "steps")
    radius = check_positive(radius, "radius")
    lipschitz = check_positive(lipschitz, "lipschitz")
    delta = check_delta(delta)
    mu = 1.0 + radius / 4.0 if smoothness is None else check_positive(smoothness, "smoothness")
    eps_list = [
        check_epsilon(float(e)) for e in np.atleast_1d(np.asarray(epsilons, dtype=np.float64))
    ]
    lrs = np.atleast_1d(np.asarray(learning_rates, dtype=np.float64))
    if not eps_list or lrs.ndim != 1 or lrs.size == 0:
        raise ValueError("epsilons and learning_rates must be non-empty 1-D sequences")
    if pca is None:
        pca = pca_reduce(arr, k, mode="rank")
    elif not (
        isinstance(pca, PCAResult)
        and pca.mode == "rank"
        and pca.k == k
        and np.shape(pca.data) == arr.shape
    ):
        raise ValueError(f"pca must be pca_reduce(x, {k}, mode='rank') of this x")
    bounds = tuple(guarantee(e, delta, beta, lipschitz=lipschitz, smoothness=mu) for e in eps_list)
    halves = [jax.random.split(key) for key in keys]
    k_train = jnp.stack([h[1] for h in halves])
    stat = statistic_from_gap(pca.gap_k, n, beta)
    tests = tuple(tuple(laplace_test(stat, e, delta, h[0]) for h in halves) for e in eps_list)
    passed = np.array([[t.passed for t in row] for row in tests], dtype=bool)
    noise = np.array([dp_gd_stddev(e / 2.0, steps, lipschitz=lipschitz) for e in eps_list])
    trained = bool(passed.any())
    params, evaluation = None, {}
    if trained:
        config = train_config(
            d, n, steps, float(lrs[0]), float(noise[0]), delta, radius=radius, lipschitz=lipschitz
        )
        points = {
            "noise_multiplier": np.repeat(noise / lipschitz, lrs.size),
            "learning_rate": np.tile(lrs, len(eps_list)),
        }
        res = sweep_points(
            config,
            config.model.init(k_train[0]),
            (pca.data, y),
            k_train,
            points,
            eval_data=eval_data,
            chunk_size=chunk_size,
            return_params=return_params,
        )
        if return_params:
            params = jax.tree_util.tree_map(lambda v: _by_epsilon(v, passed), res.params)
        evaluation = {name: _by_epsilon(v, passed) for name, v in (res.evaluation or {}).items()}
    return PTRSweep(tests, passed, noise, trained, params, evaluation, pca, bounds)


def algorithm1(
    x,
    y,
    *,
    k: int,
    beta: float,
    epsilon: float,
    delta: float,
    key,
    steps: int,
    learning_rate: float,
    radius: float = 1.0,
    lipschitz: float = 1.0,
    smoothness: float | None = None,
) -> PTRResult:
    """Algorithm 1 for logistic regression on ``{‖θ‖ ≤ radius}`` (labels ``y`` in {0, 1}): the
    single-point case of :func:`algorithm1_sweep` (one ε, one key, one step size).

    ``key`` is split into the test's key and DP-GD's key (``jax.random.split(key)``). ``smoothness``
    (for the reported guarantee) defaults to the logistic loss's ``μ = 1 + radius/4`` (smoothness in
    the data, Def. 6: the sigmoid's slope is at most 1/4).
    Raises ValueError for ``k ≥ d``, ``beta ≤ 0``, rows outside the unit ball or ``n < 101``.
    """
    key = check_key(key)
    run = algorithm1_sweep(
        x,
        y,
        k=k,
        beta=beta,
        epsilons=[check_epsilon(epsilon)],
        delta=delta,
        keys=key[None],
        steps=steps,
        learning_rates=[learning_rate],
        radius=radius,
        lipschitz=lipschitz,
        smoothness=smoothness,
    )
    test = run.tests[0][0]
    if not test.passed:
        return PTRResult(BOTTOM, test, None, float(run.stddev[0]), run.guarantees[0])
    params = jax.tree_util.tree_map(lambda v: jnp.asarray(v[0, 0, 0]), run.params)
    return PTRResult(params, test, run.pca, float(run.stddev[0]), run.guarantees[0])
