"""CorrDP-SGD (Algorithm 1; Eq. 5 for networks) on the shared training engine.

Algorithm 1 adds ``b ~ N(0, diag(σ_1², …))`` to the **averaged** minibatch gradient, unclipped,
and outputs the last iterate. On the engine (:mod:`dpprep.algorithms`) that is the
:class:`CoordinateNoise` extension, whose privatizer adds ``N(0, (stddev·scale)²)`` to the
gradient *sum* with its fields ``stddev = σ·N`` and ``noise_scales = sqrt(f)`` in a non-private
plan (:meth:`CorrDPSGD.plan`: the paper's ε is nominal; ``l2_clip_norm = inf`` unless clipped per
example), and divides by the engine's normaliser ``N`` (``n`` for full batches, ``B`` for fixed-size
batches, the expected size for Poisson), so coordinate ``i`` of the mean gets std
``σ·sqrt(f_i)``. ``σ² = C·K_δ/ε²`` (:mod:`dpprep.corrdp.noise`).

* Batches (:class:`CorrDPSGD` ``sampling``): ``"full"``, ``"without_replacement"`` (B distinct
  records per step, the default for minibatches: the paper only says "randomly sample", and fixed
  sizes match its batches of 1024 and 1000) or ``"poisson"``.
* Clipping (``clip_mode``): None (Algorithm 1), ``"per_example"`` (each example's gradient to
  ``l2_clip_norm`` before averaging: DP-correct, ``L = l2_clip_norm``) or ``"batch"`` (the paper's
  ``clip_grad_norm_`` of the averaged gradient, :func:`clip_batch_mean` in
  :class:`CoordinateNoise`'s privatizer; not a per-example bound). Clipping happens before the
  noise.
* Optimizer: GD by default, or any unit-rate optax transformation (``optax.adam(1.0)`` for the
  networks; the noise enters before Adam's moments: the paper gives only a constant step size, and
  plain SGD at its step and T does not reach its 69 % Sepsis baseline). Optional projection
  (``radius``: :class:`dpprep.optimizers.L2BallProjection`).
* **One compiled call per panel**: :func:`sweep_points` maps every ``(ε, method, C)`` point to its
  own ``stddev`` and ``noise_scales`` and runs ``seeds × points`` through
  :func:`dpprep.sweeps.sweep_points`.
* :func:`quadratic_sketch`: for full-batch GD on a squared loss without per-example clipping, the
  ``(m+1)``-row dataset ``sqrt((m+1)/n)·R`` (``R`` from the QR of ``[X y]``) has the same mean loss
  and gradient as ``(X, y)`` for every θ, so the engine runs the identical algorithm at a cost
  independent of ``n`` (the noise is data-independent and uses the same key streams).

**ε is nominal** in paper mode (``σ² ∝ 1/ε²``, no accountant, as in the paper's §5).
:func:`standard_dp_epsilon` gives, as a diagnostic, the (ε, δ)-DP that dp-accounting certifies
for the Standard full-batch run with ``L``-bounded per-example gradients (replace-one,
sensitivity ``2L/n`` of the mean).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar, Collection, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from dpprep import sampling, streams, sweeps
from dpprep import noise as noise_lib
from dpprep.accounting import dp
from dpprep.algorithms import Hyper, TrainConfig
from dpprep.plan import DPPlan
from dpprep.corrdp import noise
from dpprep.extensions import Extension, Field
from dpprep.features import AffineFeatures
from dpprep.models import Array, Inputs, Model, Params
from dpprep.optimizers import L2BallProjection
from dpprep.renames import module_renames, renamed_fields, warn_renamed
from dpprep.validation import check_delta, check_epsilon, check_positive, check_positive_int

#: The registered samplers (:data:`dpprep.sampling.SAMPLERS`) CorrDP-SGD runs: the ones its
#: protocol uses (full batches, minibatches without replacement: our reading of the paper's
#: "randomly sample") and Poisson for DP-SGD.
SAMPLINGS = ("full", "without_replacement", "poisson")
CLIP_MODES = (None, "per_example", "batch")


def clip_batch_mean(max_norm: float, normalize_by: float) -> optax.GradientTransformation:
    """Rescale a gradient *sum* so that its mean (``sum / normalize_by``) has global L2 norm at most
    ``max_norm`` (``torch.nn.utils.clip_grad_norm_`` on the mean, as in the paper's Sepsis
    protocol). Not a per-example bound: it is no substitute for per-example clipping."""

    def update_fn(updates, state, params=None):
        del params
        factor = jnp.minimum(
            1.0, max_norm / jnp.maximum(optax.tree.norm(updates) / normalize_by, 1e-30)
        )
        return jax.tree_util.tree_map(lambda g: g * factor, updates), state

    return optax.GradientTransformation(optax.init_empty_state, update_fn)


@dataclasses.dataclass(frozen=True)
class CoordinateNoise(Extension):
    """Engine extension: CorrDP's privatizer, Gaussian noise with a scale per coordinate.

    Fields (traced, sweepable; both carry privacy): ``noise_scales`` — None (isotropic) or a
    pytree like the params of per-leaf / per-coordinate factors: coordinate ``i`` gets std
    ``scale_i`` times the core's; ``stddev`` — an absolute std added to the core's ``z·C``
    (0 by default), for the paper's nominal-ε runs. ``batch_clip_norm``: the paper's
    ``clip_grad_norm_`` of the batch mean before the noise (:func:`clip_batch_mean`; ``inf``: none).

    In a private plan (:class:`dpprep.plan.DPPlan`) the run is accounted at ``z·min(scale)``
    (:meth:`noise_factor`: the least noisy coordinate; a zero scale is refused) and an absolute
    ``stddev`` is refused (it has no unit: the guarantee is in units of the clip bound). The
    paper's runs, whose ε is nominal, run in a non-private plan.
    """

    #: Vouched: its privatizer adds the plan's noise z·C times the scales, at least z·C·noise_factor
    #: on every coordinate, once per step (plus its own nominal std).
    vouches: ClassVar[tuple[str, ...]] = ("privatizer",)
    #: Verified by dpprep's tests (tests/test_plan_pieces.py: the std per coordinate in a private
    #: plan; tests/test_noise.py: the nominal std and scales), so no report calls it unverified.
    verified_by_dpprep: ClassVar[bool] = True

    batch_clip_norm: float = math.inf
    fields: ClassVar[Mapping[str, Field]] = {
        "noise_scales": Field(pytree=True, privacy=True),
        "stddev": Field(default=0.0, privacy=True),
    }
    renamed_fields: ClassVar[Mapping[str, str]] = {"noise_std": "stddev"}

    def __post_init__(self) -> None:
        if not self.batch_clip_norm > 0:
            raise ValueError(
                f"batch_clip_norm must be > 0 (inf: none), got {self.batch_clip_norm!r}"
            )

    def check(
        self,
        values: Mapping[str, Any],
        params: Params,
        *,
        swept: Collection[str],
        num_features: int | None,
    ) -> set[int]:
        del num_features
        lengths = set()
        std = np.asarray(values["stddev"], np.float64)
        if "stddev" in swept:
            if std.ndim != 1 or std.shape[0] == 0:
                raise ValueError(
                    f"stddev values must be a non-empty 1-D sequence, got shape {std.shape}"
                )
            lengths.add(std.shape[0])
        elif std.shape != ():
            raise ValueError(
                f"stddev must be a scalar, got shape {std.shape}; to vary it, make it an axis of"
                " the sweep"
            )
        if not np.all(np.isfinite(std) & (std >= 0)):
            raise ValueError(f"stddev must be finite and >= 0, got {std.tolist()!r}")
        scales = values["noise_scales"]
        if "noise_scales" not in swept:
            noise_lib.check_scales(params, scales)
            return lengths
        leading = {
            np.shape(leaf)[0] if np.ndim(leaf) else 0 for leaf in jax.tree_util.tree_leaves(scales)
        }
        if len(leading) != 1 or 0 in leading:
            raise ValueError("every noise_scales leaf needs the same non-empty leading (grid) axis")
        for i in range(next(iter(leading))):  # each grid value must match the params on its own
            noise_lib.check_scales(
                params, jax.tree_util.tree_map(lambda v: np.asarray(v)[i], scales)
            )
        return lengths | leading

    def noise_factor(self, values: Mapping[str, Any]) -> float:
        if np.any(np.asarray(values["stddev"], np.float64) != 0):
            raise ValueError(
                "stddev (an absolute std) has no unit in a private plan, whose guarantee is in"
                " units of the clip bound: give the noise as the plan's noise_multiplier (and"
                " noise_scales), or run the nominal mechanism in a non-private plan"
                " (DPPlan.non_private)"
            )
        scales = values["noise_scales"]
        if scales is None:
            return 1.0
        return float(
            min(np.min(np.asarray(leaf, np.float64)) for leaf in jax.tree_util.tree_leaves(scales))
        )

    def privatizer(self, values: Mapping[str, Any], **options: Any) -> optax.GradientTransformation:
        noisy = noise_lib.privatizer(
            options["key"],
            options["l2_clip_norm"],
            options["noise_multiplier"],
            values["noise_scales"],
            options["normalize_by"],
            stddev=values["stddev"],
        )
        if math.isinf(self.batch_clip_norm):
            return noisy
        return optax.chain(clip_batch_mean(self.batch_clip_norm, options["normalize_by"]), noisy)


@renamed_fields(clip_norm="l2_clip_norm")
@dataclasses.dataclass(frozen=True)
class CorrDPSGD:
    """Static description of a CorrDP-SGD run (everything but the noise level).

    Attributes:
      model: the :class:`~dpprep.models.Model` (GLMs take the intercept as a data column).
      steps: ``T``.
      learning_rate: the constant step ``α``.
      delta: ``δ`` of ``K_δ``.
      sampling: "full", "without_replacement" (default for minibatches; the paper leaves the
        sampler open) or "poisson".
      batch_size: ``n_q`` (minibatch samplers).
      optimizer: unit-rate optax transformation (None: GD).
      clip_mode: None, "per_example" or "batch" (module docstring).
      l2_clip_norm: the bound of ``clip_mode``.
      radius: projection onto the L2 ball of this radius (``inf``: ``Θ = R^m``).
      matmul_precision: passed to the engine.
    """

    model: Model
    steps: int
    learning_rate: float
    delta: float
    sampling: str = "full"
    batch_size: int | None = None
    optimizer: optax.GradientTransformation | None = None
    clip_mode: str | None = None
    l2_clip_norm: float = math.inf
    radius: float = math.inf
    matmul_precision: str | None = None

    def __post_init__(self) -> None:
        check_positive_int(self.steps, "steps")
        check_positive(self.learning_rate, "learning_rate")
        check_delta(self.delta)
        sampling.get(self.sampling)  # one vocabulary: an unknown name is refused by the registry
        if self.sampling not in SAMPLINGS:
            raise ValueError(
                f"CorrDP-SGD runs sampling in {SAMPLINGS}, got the registered {self.sampling!r}"
            )
        if self.sampling == "full" and self.batch_size is not None:
            raise ValueError("batch_size is only for minibatch sampling")
        if self.clip_mode not in CLIP_MODES:
            raise ValueError(f"clip_mode must be one of {CLIP_MODES}, got {self.clip_mode!r}")
        if self.clip_mode is not None and not (
            math.isfinite(self.l2_clip_norm) and self.l2_clip_norm > 0
        ):
            raise ValueError(
                f"clip_mode={self.clip_mode!r} needs a finite l2_clip_norm > 0, got "
                f"{self.l2_clip_norm!r}"
            )
        if self.clip_mode is None and math.isfinite(self.l2_clip_norm):
            raise ValueError(
                "l2_clip_norm is set but clip_mode is None; say which clipping is meant"
            )
        if not self.radius > 0:
            raise ValueError(f"radius must be > 0 (inf: no projection), got {self.radius!r}")

    def plan(self, n: int) -> DPPlan:
        """The run's plan on ``n`` records: **non-private** (the paper's ε is nominal, no
        accountant; every driver says "no DP guarantee"), clipped per example at ``l2_clip_norm``
        with ``clip_mode="per_example"``; the noise is :class:`CoordinateNoise`'s, set per point."""
        clip = self.l2_clip_norm if self.clip_mode == "per_example" else math.inf
        return DPPlan.non_private(
            self.sampling,
            check_positive_int(n, "n"),
            batch_size=self.batch_size,
            steps=self.steps,
            l2_clip_norm=clip,
            neighboring_relation="replace_one",
        )

    def train_config(self, n: int) -> TrainConfig:
        """The engine config on ``n`` records (:meth:`plan`; each point sets its own noise)."""
        extensions: tuple[Extension, ...] = (
            CoordinateNoise(self.l2_clip_norm if self.clip_mode == "batch" else math.inf),
            AffineFeatures(),
        )
        if math.isfinite(self.radius):
            extensions += (L2BallProjection(self.radius),)
        return TrainConfig(
            self.model,
            Hyper(self.learning_rate),
            self.plan(n),
            optimizer=self.optimizer,
            iterates="last",
            matmul_precision=self.matmul_precision,
            clip_method=self.clip_method,
            extensions=extensions,
        )

    @property
    def clip_method(self) -> str:
        """Without per-example clipping a network needs no per-example gradients ("none"); GLMs
        keep the engine's fast path."""
        return (
            "none" if self.clip_mode != "per_example" and not self.model.has_fast_path else "auto"
        )

    def normalize_by(self, n: int) -> float:
        """What the engine divides the noisy gradient sum by on ``n`` records."""
        return self.plan(n).normalize_by

    def normaliser(self, n: int) -> float:
        """Renamed :meth:`normalize_by` (warns)."""
        warn_renamed("normaliser", "normalize_by", "CorrDPSGD.")
        return self.normalize_by(n)


@dataclasses.dataclass(frozen=True)
class Point:
    """One noise setting of a sweep: ``σ² = c·K_δ/ε²`` times ``factors`` (a pytree matching the
    params, from :func:`dpprep.corrdp.noise.param_factors`). ``epsilon=None`` (or ``c = 0``): no
    noise (the non-private reference, Partial). ``feature_scale``: optional ``(d,)`` 0/1 column
    mask (Partial; :class:`dpprep.features.AffineFeatures`); then every point of the sweep needs
    one.
    """

    method: str
    epsilon: float | None
    c: float
    factors: Params | None = None
    feature_scale: ArrayLike | None = None

    def __post_init__(self) -> None:
        if self.epsilon is not None:
            check_epsilon(self.epsilon)
        if not (isinstance(self.c, (int, float)) and math.isfinite(self.c) and self.c >= 0):
            raise ValueError(f"c must be a finite number >= 0, got {self.c!r}")
        if (self.epsilon is None) != (self.c == 0):
            raise ValueError(
                f"Point({self.method!r}, epsilon={self.epsilon!r}, c={self.c!r}): a point is either"
                " noisy (an epsilon and c > 0: sigma² = c·K_δ/ε²) or the non-private reference"
                " (epsilon=None, c=0); an epsilon with c = 0 would be trained without noise and"
                " labelled with it"
            )

    def sigma(self, delta: float) -> float:
        """Std ``σ`` of a sensitive coordinate of the averaged gradient (0 without noise)."""
        if self.epsilon is None or self.c == 0:
            return 0.0
        return math.sqrt(noise.base_variance(self.epsilon, delta, self.c))


def point_values(
    cfg: CorrDPSGD, params0: Params, n: int, points: Sequence[Point]
) -> dict[str, Any]:
    """The engine's swept ``Hyper`` values of ``points``: ``stddev = σ·N`` (``N`` the
    normaliser on ``n`` records), ``noise_scales = sqrt(factors)`` and, if given, ``feature_scale``.
    """
    if not points:
        raise ValueError("points must be a non-empty sequence of Point")
    normalize_by = cfg.normalize_by(n)
    ones = jax.tree_util.tree_map(lambda p: np.ones((), np.float32), params0)
    scales = []
    for point in points:
        if not isinstance(point, Point):
            raise TypeError(f"points must be Point objects, got {type(point).__name__}")
        factors = (
            ones if point.factors is None else noise.check_param_factors(params0, point.factors)
        )
        scales.append(
            jax.tree_util.tree_map(
                lambda f, p: np.broadcast_to(np.sqrt(np.asarray(f, np.float32)), np.shape(p)),
                factors,
                params0,
            )
        )
    values: dict[str, Any] = {
        "stddev": np.array([p.sigma(cfg.delta) * normalize_by for p in points], np.float32),
        "noise_scales": jax.tree_util.tree_map(lambda *leaves: np.stack(leaves), *scales),
    }
    masks = [p.feature_scale for p in points]
    if any(m is not None for m in masks):
        if any(m is None for m in masks):
            raise ValueError("feature_scale must be given for every point of a sweep or for none")
        values["feature_scale"] = np.stack([np.asarray(m, np.float32) for m in masks])
    return values


def sweep_points(
    cfg: CorrDPSGD,
    params0: Params,
    data: tuple[Inputs, ArrayLike],
    keys: Array,
    points: Sequence[Point],
    *,
    eval_data: tuple[Inputs, ArrayLike] | None = None,
    chunk_size: int | None = None,
    return_params: bool = True,
    params0_per_seed: bool = False,
) -> sweeps.SweepResult:
    """Every ``seed × point`` as one compiled call (:func:`dpprep.sweeps.sweep_points`), leading
    axes ``(len(keys), len(points))``. ``params0_per_seed``: ``params0`` leaves carry a leading
    seed axis (e.g. :func:`init_per_seed`). (On :func:`quadratic_sketch` rows the normaliser is the
    row count, which is what the noise on the mean needs.)"""
    one = (
        jax.tree_util.tree_map(lambda p: np.asarray(p)[0], params0) if params0_per_seed else params0
    )
    n = int(np.shape(data[0])[0])
    values = point_values(cfg, one, n, points)
    return sweeps.sweep_points(
        cfg.train_config(n),
        params0,
        data,
        keys,
        values,
        eval_data=eval_data,
        chunk_size=chunk_size,
        return_params=return_params,
        params0_per_seed=params0_per_seed,
    )


def init_per_seed(model: Model, keys: Array) -> Params:
    """Each seed's initial parameters from its own ``"init"`` stream (leading seed axis), so the
    seed decides the initialisation as well as the noise and the batches (the paper does not say
    what its repetitions vary)."""
    return jax.vmap(lambda k: model.init(streams.stream(k, INIT_STREAM)))(keys)


INIT_STREAM = "init"


def corrdp_sgd(
    cfg: CorrDPSGD,
    params0: Params,
    data: tuple[Inputs, ArrayLike],
    key: Array,
    *,
    epsilon: float | None,
    c: float,
    factors: Params | None = None,
) -> Params:
    """One run of Algorithm 1 (a one-seed, one-point :func:`sweep_points`); returns ``θ_{T+1}``."""
    out = sweep_points(
        cfg, params0, data, jax.numpy.stack([key]), [Point("run", epsilon, c, factors)]
    )
    return jax.tree_util.tree_map(lambda a: a[0, 0], out.params)


def quadratic_sketch(x: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """``(m+1)`` rows with the same mean squared loss and gradient as ``(x, y)`` for every θ.

    With ``[X y] = QR`` (float64), ``Σ_k (y_k − θᵀx_k)² = ||R (θ; −1)||²``, so the rows of
    ``sqrt((m+1)/n)·R`` give ``(1/(m+1))·Σ_rows = (1/n)·Σ_k``: the same objective, gradient and
    Hessian. Valid for full-batch runs of a squared loss without per-example clipping (a global
    clip of the mean gradient is unaffected); the noise, added to the mean, is unchanged."""
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"x must be (n, m) and y (n,), got {x.shape} and {y.shape}")
    n, m = x.shape
    if n <= m + 1:
        raise ValueError(f"the sketch needs n > m + 1 rows, got n={n}, m={m}")
    r = np.linalg.qr(np.column_stack([x, y]), mode="r")
    r = r * math.sqrt((m + 1) / n)  # type: ignore[operator]  # mode="r" returns the array
    return r[:, :m].astype(np.float32), r[:, m].astype(np.float32)


def standard_dp_epsilon(
    sigma: float, *, n: int, steps: int, lipschitz: float, delta: float, accountant: str = "pld"
) -> float:
    """Diagnostic: the (ε, δ)-DP of the Standard full-batch run (noise std ``sigma`` per
    coordinate of the mean gradient, per-example gradient norms ≤ ``lipschitz``), from
    dp-accounting under replace-one neighbours (the mean moves by ≤ ``2L/n``). Not the paper's ε,
    which is nominal."""
    sigma = check_positive(sigma, "sigma")
    n = check_positive_int(n, "n")
    z = sigma * n / check_positive(lipschitz, "lipschitz")  # std on the sum over the clip norm
    options = dp.AccountingOptions(accountant=accountant, neighboring_relation="replace_one")  # type: ignore[arg-type]  # AccountingOptions validates it
    return dp.epsilon(
        z,
        check_delta(delta),
        dp.DpSgdSchedule(check_positive_int(steps, "steps"), "full"),
        options=options,
    )


if not TYPE_CHECKING:  # old names, for users' code (they warn)
    __getattr__ = module_renames(globals(), {"sweep": "sweep_points"})
