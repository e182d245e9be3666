"""The plan of a run: what it touches (:class:`ExecutionPlan`) and what it guarantees
(:class:`DPPlan`).

:class:`ExecutionPlan` fixes a run's data access: the sampler, the dataset size, the (expected)
batch size, the number of noisy releases, the padded batch shape, the normaliser and the
neighbouring relation. :func:`dpprep.algorithms.train` scans exactly ``plan.steps`` steps of it,
and :meth:`ExecutionPlan.dp_event` charges exactly ``plan.steps`` steps of the same sampler, so the
steps a run makes and the steps the accountant charges cannot differ (in the spirit of
jax_privacy's execution plan):

>>> plan = ExecutionPlan.create("shuffle", 60_000, batch_size=1024, epochs=40)
>>> plan.steps, plan.dp_event(1.0).count      # 40 epochs of ⌈60000/1024⌉ = 59 batches
(2360, 2360)

:class:`DPPlan` is the one owner of a run's guarantee: the execution plan, the clip bound, the
noise (given, or calibrated once, at construction, for a target ``(ε, δ)``), the accounting and
the ε spent. It hands out everything that must agree with it (the clipped-gradient function, the
privatizer before an optimizer, the batches, the ``dp_event``), and every driver takes it, so
nothing restates ``C`` or the noise. The accounting is dp-accounting on the plan's event, composed
with fixed events (e.g. a private statistic released before training), or another accounting of
the same run given as an ``accountant`` (:class:`PlanAccountant`: a bound for training on
pre-processed data, or a private selection accounting the whole procedure); the Poisson overflow
slack is charged the same way in every case.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from typing import Any, Callable, NoReturn, Protocol

import jax
import jax.numpy as jnp
import numpy as np
import optax
from dp_accounting import dp_event
from dp_accounting.dp_event import DpEvent
from jax.typing import ArrayLike
from scipy import optimize

from dpprep import clipping, noise, sampling, streams
from dpprep.clipping import Batch
from dpprep.models import Array, Model, Params
from dpprep.accounting import dp
from dpprep.renames import renamed_fields, renamed_kwargs, warn_renamed
from dpprep.validation import (
    check_delta,
    check_epsilon,
    check_positive,
    check_positive_int,
    check_probability,
)

SHUFFLE_BOUNDS = ("as_poisson", "no_amplification")
_SLACK_PASSES = 50  # fixed-point passes of ExecutionPlan.epsilon (each a valid guarantee)
_BRACKET_DOUBLINGS = 60  # DP-SGD by iteration: a bracket up to z = 2^61


# The scan over steps counts in int32 (JAX's default integer): a longer run would overflow it
# deep inside a compiled loop (TrainConfig(epochs=1e12) planned 4e12 steps, then crashed in JAX).
MAX_STEPS = 2**31 - 1


class PlanAccountant(Protocol):
    """An accounting of a plan's runs other than dp-accounting on its event (e.g. a theorem for
    training on pre-processed data). ``epsilon`` is decreasing in the multiplier; both answer for
    the *ideal* run (the plan charges the Poisson overflow slack around them), unless the
    accountant has ``accounts_whole_procedure = True`` (e.g. a private selection: it accounts a
    procedure of many runs, their slack included). An accountant that assumes a Lipschitz bound
    says so in a ``lipschitz`` attribute, which a :class:`DPPlan` requires to be its clip bound."""

    def epsilon(self, plan: "ExecutionPlan", noise_multiplier: float, delta: float) -> float:
        """ε at ``delta`` of ``plan``'s run at multiplier ``z`` (noise std ``z·C`` on each sum)."""
        ...

    def calibrate(self, plan: "ExecutionPlan", target_epsilon: float, delta: float) -> float:
        """The smallest ``z`` whose run is ``(target_epsilon, delta)``-DP by this accounting."""
        ...


def epsilon_with_overflow_slack(
    ideal: Callable[[float], float], delta: float, overflow: float, what: str
) -> float:
    """ε at ``delta`` of a run whose padded Poisson batches overflow with probability ``overflow``:
    the ideal run is ``(ε, ideal⁻¹(ε))``-DP and the implemented one pays the slack
    ``(1 + e^ε)·overflow`` (:func:`dpprep.sampling.overflow_delta`), so the answer is the fixed
    point
    ``ε = ideal(delta − slack(ε))``. Starting above it at ``ideal(delta/2)``, every iterate is a
    valid ``(ε, delta)`` guarantee; iterating to a relative change of 1e-10 (one or two passes at
    the default ``max_overflow_prob``). ``what`` names the run in the error when no ε leaves any δ.
    """
    if overflow == 0.0:
        return ideal(delta)
    eps = ideal(delta / 2)
    for _ in range(_SLACK_PASSES):
        if eps == 0.0:  # huge noise: the ideal run is (0, δ)-DP, slack (1 + e^0)·p
            slack = 2.0 * overflow
        else:
            slack = sampling.overflow_delta(eps, overflow) if math.isfinite(eps) else math.inf
        if not slack < delta / 2:
            raise ValueError(
                f"{what} is only epsilon={eps:.4g}-DP, where the padded Poisson batch's overflow"
                f" slack (1 + e^epsilon)*p = {slack:.3g} (p = {overflow:.3g}) leaves nothing of"
                f" delta={delta}: no guarantee of the run as implemented follows; use more noise or"
                " a smaller max_overflow_prob"
            )
        tighter = ideal(delta - slack)
        if not tighter < eps:
            break
        converged, eps = eps - tighter <= 1e-10 * eps, tighter
        if converged:
            break
    return eps


@renamed_fields(normaliser="normalize_by", neighbouring="neighboring_relation")
@dataclasses.dataclass(frozen=True)
class ExecutionPlan:
    """Static description of a run's data access (hashable; build it with :meth:`create`).

    Attributes:
      sampler: registered sampler name (:data:`dpprep.sampling.SAMPLERS`).
      n: dataset size.
      batch_size: expected (poisson) or fixed batch size; ``n`` for full, 1 for fixed_order.
      steps: noisy releases the run makes and the accountant charges (with ``random_stop``, the
        scan length, an upper bound on the releases).
      pad: rows of the fixed-shape batch.
      normalize_by: what the noisy gradient sum is divided by.
      epochs: permutations drawn up front (shuffle only).
      neighboring_relation: "add_remove" or "replace_one": the relation of the guarantee.
      random_stop: DP-SGD by iteration (fixed_order with ``T ~ Unif{1..n−κ+1}``).
      kappa: ``κ`` of that stopping time.
      max_overflow_prob: bound on the probability that any Poisson draw overflows ``pad``.
      shuffle_bound: how shuffled epochs are accounted: ``"as_poisson"`` (the customary number:
        Poisson subsampling at ``q = B/n`` over the steps taken, an assumption, not a proof —
        shuffled batches can leak more, Chua et al. 2024; a warning says so) or
        ``"no_amplification"`` (proven: each record is in one batch per epoch, so the run is
        ``epochs`` Gaussian releases of multiplier ``z``). That proof holds for neighbours that
        keep the partition: replace-one (a record replaced in place), or add/remove in its
        *zero-out* form (a record's gradient replaced by zero in place); adding or removing a
        record outright shifts every later batch of its epoch, which the bound does not cover.
    """

    sampler: str
    n: int
    batch_size: int
    steps: int
    pad: int
    normalize_by: float
    epochs: int
    neighboring_relation: str
    random_stop: bool = False
    kappa: int = 1
    max_overflow_prob: float = 1e-10
    shuffle_bound: str = "as_poisson"

    @classmethod
    @renamed_kwargs(neighbouring="neighboring_relation")
    def create(
        cls,
        sampler: str,
        n: int,
        *,
        batch_size: int | None = None,
        steps: int | None = None,
        epochs: float | None = None,
        kappa: int = 1,
        max_overflow_prob: float = 1e-10,
        neighboring_relation: str | None = None,
        shuffle_bound: str = "as_poisson",
    ) -> ExecutionPlan:
        """Lays out a run of ``sampler`` on ``n`` records (ValueError naming a bad argument).
        ``neighboring_relation=None`` takes the sampler's own relation."""
        if shuffle_bound not in SHUFFLE_BOUNDS:
            raise ValueError(
                f"shuffle_bound must be one of {SHUFFLE_BOUNDS}, got {shuffle_bound!r}"
            )
        if shuffle_bound != "as_poisson" and sampler != "shuffle":
            raise ValueError(f"shuffle_bound is for sampling='shuffle', got sampling={sampler!r}")
        n = check_positive_int(n, "n")
        impl = sampling.get(sampler)
        check_probability(max_overflow_prob, "max_overflow_prob")
        sampler_relation = sampling.neighboring_relation_of(impl)
        relation = sampler_relation if neighboring_relation is None else neighboring_relation
        if relation not in dp.NEIGHBORING_RELATIONS:
            raise ValueError(
                f"neighboring_relation must be one of {dp.NEIGHBORING_RELATIONS}, got "
                f"{neighboring_relation!r}"
            )
        if impl.name == "fixed_order" and relation != sampler_relation:
            raise ValueError(
                "fixed_order visits record t at step t: adding or removing a record shifts every"
                " later step, which its bounds (one release per record; amplification by iteration)"
                " do not cover; they are replace-one guarantees"
                " (neighboring_relation='replace_one')"
            )
        layout = impl.layout(
            n, batch_size, steps, epochs, kappa=kappa, max_overflow_prob=max_overflow_prob
        )
        if layout.steps > MAX_STEPS:
            asked = (
                f"steps={steps!r}"
                if steps is not None
                else f"epochs={epochs!r} (on n={n}, batch size {layout.batch_size})"
            )
            raise ValueError(
                f"{asked} is {layout.steps:.4g} steps; a run takes at most 2**31 - 1 = {MAX_STEPS} "
                "(its step counter is a JAX int32)"
            )
        return cls(
            sampler,
            n,
            layout.batch_size,
            layout.steps,
            layout.pad,
            layout.normalize_by,
            layout.epochs,
            relation,
            layout.random_stop,
            int(kappa),
            float(max_overflow_prob),
            shuffle_bound,
        )

    @property
    def sampling_rate(self) -> float:
        """``B/n`` (1 for full batches; records per step over records for the others)."""
        return min(1.0, self.batch_size / self.n)

    @property
    def impl(self) -> sampling.Sampler:
        return sampling.get(self.sampler)

    def overflow_probability(self) -> float:
        """Probability that some Poisson draw of the run exceeds ``pad`` (0 for other samplers)."""
        if self.sampler != "poisson" or self.pad >= self.n:
            return 0.0
        return sampling.overflow_probability(self.n, self.batch_size / self.n, self.pad, self.steps)

    def schedule(self) -> dp.DpSgdSchedule:
        """What the accountant charges for this run (ValueError saying what to use instead when
        dp-accounting has no event for the sampler)."""
        if self.sampler == "shuffle" and self.shuffle_bound == "no_amplification":
            # Each record is in exactly one batch per epoch: ``epochs`` releases of a sum it moves
            # by at most C, with no amplification claimed.
            return dp.DpSgdSchedule(self.epochs, "full")
        schedule = self.impl.schedule(self)
        if schedule is None:
            raise ValueError(
                f"sampling={self.sampler!r} has no dp-accounting event: {self.impl.no_event_reason}"
            )
        return schedule

    def dp_event(self, noise_multiplier: float) -> dp_event.DpEvent:
        """The dp-accounting event of the whole run at multiplier ``z`` (noise std ``z·C`` on each
        step's sum)."""
        return dp.dpsgd_event(noise_multiplier, self.schedule())

    def _options(self, options: dp.AccountingOptions | None) -> dp.AccountingOptions:
        if options is None:
            # validated in __post_init__
            return dp.AccountingOptions(neighboring_relation=self.neighboring_relation)  # type: ignore[arg-type]
        if not isinstance(options, dp.AccountingOptions):
            raise TypeError(
                f"options must be an AccountingOptions or None, got {type(options).__name__}"
            )
        if options.neighboring_relation != self.neighboring_relation:
            raise ValueError(
                f"this plan is a {self.neighboring_relation} guarantee; got "
                f"options.neighboring_relation={options.neighboring_relation!r} (set it when "
                "creating the plan)"
            )
        return options

    def _check_accountant(
        self,
        accountant: PlanAccountant,
        fixed_events: tuple[DpEvent, ...],
        options: dp.AccountingOptions | None,
    ) -> None:
        if not (
            callable(getattr(accountant, "epsilon", None))
            and callable(getattr(accountant, "calibrate", None))
        ):
            raise TypeError(
                "accountant must have epsilon(plan, z, delta) and calibrate(plan, epsilon, delta) "
                f"(a PlanAccountant), got {type(accountant).__name__}"
            )
        if fixed_events or options is not None:
            raise ValueError(
                "an accountant accounts the run on its own: fixed_events and options do not "
                "compose with it here"
            )

    def epsilon(
        self,
        noise_multiplier: float,
        delta: float,
        *,
        fixed_events: tuple[DpEvent, ...] = (),
        options: dp.AccountingOptions | None = None,
        accountant: PlanAccountant | None = None,
    ) -> float:
        """ε at ``delta`` of the run *as implemented* at multiplier ``z``, composed with
        ``fixed_events`` (e.g. DPSGD-F's private mean). For Poisson sampling the implemented run is
        ``(ε, δ_ideal(ε) + slack(ε))``-DP with the padded batch's overflow slack
        ``slack(ε) = (1 + e^ε)·p`` (:func:`dpprep.sampling.overflow_delta`), so the answer is a
        fixed point ``ε = f(ε) := ε_ideal(delta − slack(ε))``. Starting above it at
        ``f(ε_ideal(delta/2))``, every iterate ``e`` satisfies ``f(e) ≤ e`` (f increases), i.e. is
        a valid ``(e, delta)`` guarantee; iterating to a relative change of 1e-10 (one or two
        passes at the default ``max_overflow_prob``) gives ``epsilon(calibrate(ε, δ), δ) ≤ ε``.
        ``options``: how to account
        (:class:`dpprep.accounting.dp.AccountingOptions`; None = defaults under the plan's
        relation, a different relation is refused). ``accountant``: account the run with it
        instead of dp-accounting (:class:`PlanAccountant`)."""
        delta = check_delta(delta)
        ideal: Callable[[float], float]
        if accountant is not None:
            self._check_accountant(accountant, fixed_events, options)
            ideal = lambda d: accountant.epsilon(self, noise_multiplier, d)  # noqa: E731
        else:
            options = self._options(options)
            self._warn_if_assumed()
            if self.random_stop:
                return self._iteration_epsilon(noise_multiplier, delta, fixed_events, options)
            events = [*fixed_events, self.dp_event(noise_multiplier)]
            ideal = lambda d: dp.composed_epsilon(events, d, options=options)  # noqa: E731
        return epsilon_with_overflow_slack(
            ideal,
            delta,
            self.overflow_probability(),
            f"at noise_multiplier={noise_multiplier!r} the ideal run",
        )

    def calibrate(
        self,
        target_epsilon: float,
        delta: float,
        *,
        fixed_events: tuple[DpEvent, ...] = (),
        options: dp.AccountingOptions | None = None,
        accountant: PlanAccountant | None = None,
        allow_large_delta: bool = False,
    ) -> float:
        """Smallest multiplier ``z`` with the run as implemented ``(target_epsilon, delta)``-DP,
        composed with ``fixed_events``; the Poisson overflow slack at ``target_epsilon`` is taken
        out of ``delta`` exactly. Cached (:func:`dpprep.accounting.dp.calibrate_noise`);
        ``options`` as in :meth:`epsilon`. ``delta >= 1/n`` is refused unless
        ``allow_large_delta=True`` (:func:`dpprep.accounting.dp.check_delta_for_size`).

        DP-SGD by iteration (``fixed_order`` with a random stop) has no dp-accounting event: it is
        accounted by amplification by iteration (Feldman et al. 2018, Thm 26;
        :func:`dpprep.accounting.dp.sgd_iter_epsilon` with noise std ``z·C`` and Lipschitz
        constant ``C``, valid for the contractive projected SGD its sampler documents), and
        calibrated here by bisection on that bound. ``accountant``: calibrate by it instead
        (:class:`PlanAccountant`; the overflow slack is taken out of ``delta`` first)."""
        target_epsilon = check_epsilon(target_epsilon, "target_epsilon")
        delta = dp.check_delta_for_size(delta, self.n, allow_large_delta=allow_large_delta)
        if accountant is not None:
            self._check_accountant(accountant, fixed_events, options)
        else:
            options = self._options(options)
            self._warn_if_assumed()
            if self.random_stop:
                return self._iteration_calibrate(target_epsilon, delta, fixed_events, options)
        p = self.overflow_probability()
        slack = sampling.overflow_delta(target_epsilon, p)
        if not slack < delta:
            raise ValueError(
                f"at target_epsilon={target_epsilon!r} the padded Poisson batch's overflow slack "
                f"(1 + e^epsilon)*p = {slack:.3g} (p = {p:.3g}) exceeds delta={delta}; ask for a "
                "smaller target_epsilon or a max_overflow_prob below delta/(1 + e^epsilon)"
            )
        if accountant is not None:
            return float(accountant.calibrate(self, target_epsilon, delta - slack))
        return dp.calibrate_noise(
            target_epsilon,
            delta - slack,
            self.schedule(),
            fixed_events=fixed_events,
            options=self._options(options),
            allow_large_delta=allow_large_delta,
        )

    def _warn_if_assumed(self) -> None:
        """Shuffled epochs accounted as if Poisson: say so (the warnings registry shows it once
        per plan and call site)."""
        if self.sampler == "shuffle" and self.shuffle_bound == "as_poisson":
            warnings.warn(
                f"shuffled DP-SGD (n={self.n}, B={self.batch_size}, {self.epochs} epochs) is"
                " accounted as if Poisson-subsampled: the customary number, not a proven guarantee"
                " (shuffled batches can leak more, Chua et al. 2024). The proven bound, without"
                " amplification, is DPPlan.create('shuffle', ...,"
                " shuffle_bound='no_amplification'); or sample with sampling='poisson'",
                UserWarning,
                stacklevel=3,
            )

    def _check_iteration(
        self, fixed_events: tuple[DpEvent, ...], options: dp.AccountingOptions
    ) -> None:
        if fixed_events:
            raise ValueError(
                "DP-SGD by iteration is accounted by amplification by iteration (an RDP "
                "curve), which does not compose with fixed_events here"
            )
        if options != self._options(None):
            raise ValueError(
                "DP-SGD by iteration has one accounting (amplification by iteration); "
                "options other than the defaults do not apply"
            )
        if self.kappa != 1:
            raise ValueError(
                f"DP-SGD by iteration is accounted for kappa = 1 only, got kappa={self.kappa}"
            )

    def _iteration_epsilon(
        self,
        noise_multiplier: float,
        delta: float,
        fixed_events: tuple[DpEvent, ...],
        options: dp.AccountingOptions,
    ) -> float:
        """The random-stopping mixture bound of :func:`dpprep.accounting.dp.sgd_iter_epsilon`
        (noise std ``z·C``, Lipschitz constant ``C``: both scale out, so σ = z and L = 1)."""
        self._check_iteration(fixed_events, options)
        z = check_positive(noise_multiplier, "noise_multiplier")
        return dp.sgd_iter_epsilon(z, delta, lipschitz=1.0, n=self.n)[0]

    def _iteration_calibrate(
        self,
        target_epsilon: float,
        delta: float,
        fixed_events: tuple[DpEvent, ...],
        options: dp.AccountingOptions,
    ) -> float:
        """Smallest ``z`` (to 1e-10) whose :meth:`_iteration_epsilon` is at most
        ``target_epsilon``: bisection on that bound, which decreases in ``z`` (each order's RDP
        does), and the answer is moved up until it meets the target (never below)."""
        self._check_iteration(fixed_events, options)

        def excess(z: float) -> float:
            return dp.sgd_iter_epsilon(z, delta, lipschitz=1.0, n=self.n)[0] - target_epsilon

        lo, hi = 0.3, 2.0
        for _ in range(_BRACKET_DOUBLINGS):
            if excess(hi) <= 0:
                break
            lo, hi = hi, hi * 2
        else:
            raise ValueError(
                f"target_epsilon={target_epsilon!r} needs a noise multiplier above {hi:.3g} for "
                f"DP-SGD by iteration on n={self.n}; ask for a larger target_epsilon"
            )
        for _ in range(_BRACKET_DOUBLINGS):  # the smallest multiplier may lie below the bracket
            if excess(lo) > 0:
                break
            lo, hi = lo / 2, lo
        else:
            return hi  # so large a target is met at a multiplier of 0.3·2^-59 already
        z = float(optimize.brentq(excess, lo, hi, xtol=1e-10))
        while excess(z) > 0:  # brentq's answer is within 1e-10 of the root, on either side
            z = min(hi, z + 1e-10)
        return z


# --------------------------------------------------------------------------------------------------
# The owner of a guarantee


def _number(value: object, name: str) -> float:
    """``value`` as a float; TypeError for a non-number (a string, None, an array)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        and not hasattr(value, "__float__")
    ):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if hasattr(value, "shape") and value.shape != ():
        raise TypeError(f"{name} must be a scalar, got an array of shape {value.shape}")
    return float(value)  # checked above: a number or something with __float__


def _check_accountant_clip(accountant: object, clip: float) -> None:
    """An accountant that assumes a Lipschitz bound (e.g. Hu et al.'s Theorem 2 for pre-processed
    data) covers the plan only when that bound is the plan's clip bound."""
    lipschitz = getattr(accountant, "lipschitz", None)
    if lipschitz is not None and float(lipschitz) != clip:
        raise ValueError(
            "the accountant assumes per-example gradients bounded by"
            f" lipschitz={lipschitz!r} and noise std z·{lipschitz!r}, but this plan clips"
            f" to l2_clip_norm={clip!r} and adds z·{clip!r}: the guarantee holds only when"
            " they are the same number; state it once (lipschitz = l2_clip_norm)"
        )


def _check_options_type(options: object) -> None:
    """A plan's ``options``: None or an AccountingOptions (TypeError, before anything computes)."""
    if options is not None and not isinstance(options, dp.AccountingOptions):
        raise TypeError(
            "options must be a dpprep.accounting.dp.AccountingOptions or None, got"
            f" {type(options).__name__} (e.g. options=AccountingOptions(accountant='rdp'))"
        )


def check_clip_norm(value: object, name: str = "l2_clip_norm") -> float:
    """A clip bound of a private run: a finite number > 0 (TypeError for a non-number)."""
    c = _number(value, name)
    if not (math.isfinite(c) and c > 0):
        raise ValueError(
            f"{name} must be a finite number > 0 (the bound each example's gradient is clipped "
            f"to), got {value!r}"
        )
    return c


def check_noise_multiplier(value: object, name: str = "noise_multiplier") -> float:
    """A noise multiplier of a private run: a finite number > 0 (TypeError for a non-number)."""
    z = _number(value, name)
    if not (math.isfinite(z) and z > 0):
        raise ValueError(
            f"{name} must be a finite number > 0 (a run without noise has no DP guarantee: "
            f"make it explicit with DPPlan.non_private(...)), got {value!r}"
        )
    return z


# DP-SGD by iteration: the rules of its proof, stated once for the plan's pieces and the drivers.
ITERATION_PROOF = (
    "DP-SGD by iteration (fixed_order without steps) is accounted by amplification by iteration"
    " (Feldman et al. 2018), whose proof covers plain SGD with contractive steps η ≤ 2/β only (β:"
    " the loss's smoothness), releasing the iterate at the random stop"
)


def check_smoothness(value: object) -> float:
    """``β`` of DP-SGD by iteration: a finite number > 0 (TypeError for a non-number). A step
    ``η ≤ 2/β`` bounds the step only for such a ``β``; a linear (0-smooth) loss is ``β``-smooth for
    every ``β > 0``, so its run states a ``β ≤ 2/η`` for its step size ``η`` (e.g. ``1/η``)."""
    beta = _number(value, "smoothness")
    if not (math.isfinite(beta) and beta > 0):
        raise ValueError(
            f"smoothness must be a finite number > 0, got {value!r}: {ITERATION_PROOF}, and"
            " η ≤ 2/β bounds the step only for a finite β > 0 (a linear, 0-smooth loss is β-smooth"
            " for every β > 0: state a β ≤ 2/η for your step size η, e.g. β = 1/η)"
        )
    return beta


def check_iteration_learning_rate(learning_rate: ArrayLike, smoothness: float | None) -> None:
    """Every step size in ``learning_rate`` (a number or a grid of them, finite and ≥ 0) is at
    most ``2/β``, the contractive steps of amplification by iteration (Feldman et al. 2018);
    nothing to check without a stated ``β`` (a non-private plan)."""
    if smoothness is None:
        return
    if np.any(np.asarray(learning_rate, np.float64) > 2.0 / smoothness):
        raise ValueError(
            f"DP-SGD by iteration needs learning_rate <= 2/β = {2.0 / smoothness:.6g} (β ="
            f" smoothness={smoothness!r}: amplification by iteration needs contractive steps),"
            f" got {learning_rate!r}"
        )


def _constant_learning_rate(value: object) -> float:
    """A step size given to a plan: a finite number ≥ 0 (a schedule is a TypeError)."""
    if callable(value):
        raise TypeError(
            "learning_rate must be a number: a schedule is not checked against the plan (build it"
            " into tx, or for DP-SGD by iteration give a constant η ≤ 2/β)"
        )
    eta = _number(value, "learning_rate")
    if not (math.isfinite(eta) and eta >= 0):
        raise ValueError(f"learning_rate must be finite and >= 0, got {value!r}")
    return eta


def refuse_iteration_optimizer(what: str, instead: str) -> NoReturn:
    """ValueError: ``what`` (an optimizer given to a DP-SGD-by-iteration run) is not plain SGD at a
    checked step, which is all its proof covers; ``instead`` says what to pass."""
    raise ValueError(
        f"{ITERATION_PROOF}: {what} is refused (momentum, Adam or any optimizer with state voids"
        f" it, and an optax transformation's step size cannot be checked against 2/β); {instead}"
    )


# Handed by the plan's own methods to the constructors of the pieces it makes (PlanBatch,
# PlanGradFn, PrivateTransformation), which refuse to be built without it: a piece assembled by
# hand, or changed with dataclasses.replace, could hold another bound, another chain or another
# mask than the plan it names.
_MINT = object()


@jax.tree_util.register_pytree_node_class
class PlanBatch:
    """Step ``t``'s batch of a plan's run, as :meth:`DPPlan.batch` draws it: ``data`` (the plan's
    ``pad`` rows on every leaf; padded slots hold zeros, never a record) and ``mask`` (1 for a
    real example, 0 for padding). The two travel as one object to the plan's clipped-gradient
    function (:class:`PlanGradFn`), which takes nothing else, so no hand-made mask can count
    padded slots or weigh a record twice. Unpack it to read it (``data, mask = batch``); only
    :meth:`DPPlan.batch` makes one. It is a pytree (it crosses ``jit``); mapping a function over
    it maps the mask too, which the clipping still checks (0/1, or clamped to [0, 1] when
    traced)."""

    __slots__ = ("data", "mask")
    data: Batch
    mask: Array

    def __init__(self, data: Batch, mask: Array, *, _token: object = None) -> None:
        if _token is not _MINT:
            raise TypeError(
                "a PlanBatch is made by plan.batch(key, t, data) only: the plan draws the rows and"
                " their mask together, so that no slot is counted that the plan did not draw"
            )
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "mask", mask)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a PlanBatch is immutable (plan.batch draws a new one)")

    def __iter__(self) -> Any:
        return iter((self.data, self.mask))

    def __repr__(self) -> str:
        return f"PlanBatch(data={self.data!r}, mask={self.mask!r})"

    def tree_flatten(self) -> tuple[tuple[Batch, Array], None]:
        return (self.data, self.mask), None

    @classmethod
    def tree_unflatten(cls, aux: None, children: Any) -> PlanBatch:
        del aux
        return cls(*children, _token=_MINT)


@dataclasses.dataclass(frozen=True, eq=False)
class PlanGradFn:
    """A clipped-gradient function bound to a :class:`DPPlan` (from :meth:`DPPlan.clipped_grad`,
    the only maker: one built by hand, or changed with :func:`dataclasses.replace`, is refused):
    it clips to the plan's ``C`` and takes the plan's batches only — the :class:`PlanBatch` of
    :meth:`DPPlan.batch`, rows and mask as one object (``plan.pad`` examples on every leaf) — so
    that a batch laid out another way (e.g. transposed), a padded batch without its mask or with
    a mask of the user's making is refused, not clipped along the wrong axis or counted whole.
    ``prng_argnum`` / ``stochastic``: where :func:`dpprep.step.dp_step` puts the step's key."""

    plan: DPPlan
    fn: Callable[..., clipping.ClippedGrad]
    prng_argnum: int | None = None
    stochastic: bool = False
    _token: dataclasses.InitVar[object] = None

    def __post_init__(self, _token: object) -> None:
        if _token is not _MINT:
            raise TypeError(
                "a PlanGradFn is made by plan.clipped_grad(loss) only (not by hand, nor with"
                " dataclasses.replace): its clipped sum must be the plan's, at the plan's bound"
            )

    def __call__(
        self,
        params: Params,
        batch: PlanBatch,
        *args: Any,
        mask: ArrayLike | None = None,
        key: Array | None = None,
    ) -> clipping.ClippedGrad:
        if mask is not None:
            raise TypeError(
                "a plan's clipped gradient takes no mask: the mask travels with the batch (pass"
                " plan.batch(key, t, data) whole), so that no slot counts that the plan did not"
                " draw"
            )
        if not isinstance(batch, PlanBatch):
            raise TypeError(
                "a plan's clipped gradient takes the plan's batches: the PlanBatch that"
                f" plan.batch(key, t, data) returns (rows and mask as one object), got"
                f" {type(batch).__name__}"
            )
        size = clipping.batch_size_of(batch.data)
        if size != self.plan.pad:
            raise ValueError(
                f"the batch has {size} examples on its leading axis, the plan's batches have"
                f" {self.plan.pad} (plan.batch(key, t, data) draws them; every leaf's first axis is"
                " the example axis)"
            )
        if self.stochastic:
            return self.fn(params, batch.data, *args, mask=batch.mask, key=key)
        return self.fn(params, batch.data, *args, mask=batch.mask)


@dataclasses.dataclass(frozen=True, eq=False)
class PrivateTransformation:
    """An optax ``GradientTransformation`` whose first link is a plan's privatizer (from
    :meth:`DPPlan.optimizer`): the noise and the normaliser of the plan, then the optimizer, for
    the run with key ``key`` (its noise, batches and model randomness come from that key's
    streams). :func:`dpprep.step.dp_step` takes only these, so no privatizer can be missing,
    misplaced (after Adam's moments) or told another clip bound. Its state's first element counts
    the noisy releases, which is also the step whose batch :func:`~dpprep.step.dp_step` draws:
    past the plan's steps every update is NaN (the plan charges no more), and
    :meth:`DPPlan.spent` reads the ε of the steps taken. ``init`` may be called once: a second
    state would restart the count, replay the same noise and release more than the plan charges.
    Only :meth:`DPPlan.optimizer` makes one (built by hand, or changed with
    :func:`dataclasses.replace`, it is refused)."""

    plan: DPPlan
    key: Array
    chained: optax.GradientTransformation
    _initialised: list[bool] = dataclasses.field(default_factory=list, repr=False)
    _token: dataclasses.InitVar[object] = None

    def __post_init__(self, _token: object) -> None:
        if _token is not _MINT:
            raise TypeError(
                "a PrivateTransformation is made by plan.optimizer(tx, key=...) only (not by hand,"
                " nor with dataclasses.replace): its chain must start with the plan's privatizer"
            )

    def init(self, params: Params) -> optax.OptState:
        if self._initialised:
            raise ValueError(
                "this plan optimizer was initialised already: a second state would restart its"
                " count of releases and replay its noise; make a new plan (and optimizer) for a"
                " new run"
            )
        self._initialised.append(True)
        return self.chained.init(params)

    def update(
        self, updates: Params, state: optax.OptState, params: Params | None = None
    ) -> tuple[Params, optax.OptState]:
        return self.chained.update(updates, state, params)


def _privatizer_state(opt_state: optax.OptState) -> noise.PrivatizerState:
    first = opt_state[0] if isinstance(opt_state, tuple) and opt_state else None
    if not isinstance(first, noise.PrivatizerState):
        raise ValueError(
            "opt_state is not the state of a plan's optimizer (plan.optimizer(...).init(params))"
        )
    return first


@dataclasses.dataclass(frozen=True)
class DPPlan:
    """Every number a run's guarantee rests on, stated once (build it with :meth:`create`, or
    :meth:`non_private` for a run that claims nothing).

    A private plan fixes the run's data access (:attr:`execution`: sampler, ``n``, batch size,
    steps, normaliser, neighbouring relation), the clip bound ``C``, the noise multiplier ``z``
    (given, or calibrated at construction for a target ``(ε, δ)``), the accounting (private
    statistics released before training, another accountant of the same run) and ``δ``; its
    :attr:`epsilon` is computed once, at construction, for exactly that run. It hands out
    everything that must agree with it — the clipped-gradient function (:meth:`clipped_grad`),
    the privatizer chained before an optimizer (:meth:`optimizer`), the batch selection
    (:meth:`batch`), the ``dp_event`` — and :func:`dpprep.algorithms.train`, the sweeps and
    private selection take it in :class:`~dpprep.algorithms.TrainConfig`, so ``C`` and the noise
    are stated nowhere else (in the spirit of jax_privacy's ``DPExecutionPlan`` and Opacus'
    ``make_private_with_epsilon``):

    >>> plan = DPPlan.create("poisson", 60_000, batch_size=256, epochs=2,
    ...                      l2_clip_norm=1.0, target_epsilon=2.0, delta=1e-5)
    >>> plan.steps, round(plan.noise_multiplier, 3), plan.epsilon <= 2.0
    (469, 0.683, True)
    >>> plan = DPPlan.non_private("shuffle", 1000, batch_size=100, epochs=1)
    >>> print(plan.describe())
    no DP guarantee (non-private run requested): shuffle, n=1000, batch 100, 10 steps,
    no clipping

    Attributes:
      execution: the run's :class:`ExecutionPlan` (what the engine scans and the accountant
                 charges).
      l2_clip_norm: ``C`` (``inf``: no clipping, non-private plans only).
      noise_multiplier: ``z``, noise std ``z·C`` on each step's clipped sum (0: non-private).
      delta: ``δ`` of the guarantee (None: non-private).
      epsilon: the ε the planned run spends at ``delta`` (``inf``: non-private).
      target_epsilon: the ε asked for when ``z`` was calibrated (None when ``z`` was given).
      fixed_events: private statistics released once before training, composed into the account.
      accountant: another accounting of the same run (:class:`PlanAccountant`, e.g. Hu et al.'s
        Theorem 2 for pre-processed data, or a private selection over the whole procedure).
      options: dp-accounting's options (:class:`dpprep.accounting.dp.AccountingOptions`).
      smoothness: ``β`` of the loss (regularizer included), for DP-SGD by iteration only: finite
        and > 0, and every piece holds its steps to ``η ≤ 2/β`` (the proof's contractive steps,
        Feldman et al. 2018). ``β`` is the user's statement about the loss: a ``β`` below the
        loss's true smoothness (e.g. ``dataclasses.replace(plan, smoothness=1e-6)``) lets larger
        steps through and voids the guarantee, which no check here can see.
      allow_large_delta: the user's explicit opt-in to ``delta >= 1/n`` (refused otherwise: a
        mechanism that publishes one random record whole is ``(0, 1/n)``-DP); the guarantee
        (:meth:`describe`) then says so.
    """

    execution: ExecutionPlan
    l2_clip_norm: float
    noise_multiplier: float
    delta: float | None
    epsilon: float
    target_epsilon: float | None = None
    fixed_events: tuple[DpEvent, ...] = ()
    accountant: PlanAccountant | None = None
    options: dp.AccountingOptions | None = None
    smoothness: float | None = None
    allow_large_delta: bool = False

    def __post_init__(self) -> None:
        """A plan is consistent or it is not made: a plan built by hand, or changed with
        :func:`dataclasses.replace`, must state the ε of its own run (recomputed here, cached)."""
        if not isinstance(self.execution, ExecutionPlan):
            raise TypeError(
                f"execution must be an ExecutionPlan, got {type(self.execution).__name__}"
            )
        self._check_random_stop()
        if self.noise_multiplier == 0:
            if (
                self.delta is not None
                or self.epsilon != math.inf
                or self.fixed_events
                or self.accountant is not None
                or self.target_epsilon is not None
            ):
                raise ValueError(
                    "a plan without noise is non-private: delta None, epsilon inf, nothing"
                    " accounted (DPPlan.non_private)"
                )
            return
        check_clip_norm(self.l2_clip_norm)
        check_noise_multiplier(self.noise_multiplier)
        if self.delta is None:
            raise ValueError("a private plan needs its delta")
        # also here, not only in create: dataclasses.replace(plan, l2_clip_norm=...) keeps ε
        _check_accountant_clip(self.accountant, self.l2_clip_norm)
        _check_options_type(self.options)
        dp.check_delta_for_size(
            self.delta, self.execution.n, allow_large_delta=self.allow_large_delta
        )
        spent = _account(self._spec(), self.noise_multiplier, self.steps, ())
        if self.epsilon != spent:
            raise ValueError(
                f"this plan states epsilon={self.epsilon!r} but its run"
                f" (z={self.noise_multiplier!r}, {self.steps} steps) spends {spent!r}: make plans"
                " with DPPlan.create, which computes it"
            )

    def _check_random_stop(self) -> None:
        """DP-SGD by iteration: the layout its account assumes (one record per step, ``n − κ + 1``
        steps; a hand-made or cut layout is refused) and a stated ``β``, finite and > 0
        (:func:`check_smoothness`), which only such a plan takes."""
        ex = self.execution
        if not ex.random_stop:
            if self.smoothness is not None:
                raise ValueError(
                    "smoothness is only used by DP-SGD by iteration (fixed_order without steps)"
                )
            return
        laid_out = ExecutionPlan.create(
            "fixed_order",
            ex.n,
            kappa=ex.kappa,
            max_overflow_prob=ex.max_overflow_prob,
            neighboring_relation=ex.neighboring_relation,
        )
        if ex != laid_out:
            changed = ", ".join(
                f"{f.name}={getattr(ex, f.name)!r} (its layout has {getattr(laid_out, f.name)!r})"
                for f in dataclasses.fields(ex)
                if getattr(ex, f.name) != getattr(laid_out, f.name)
            )
            raise ValueError(
                "DP-SGD by iteration scans n − κ + 1 steps of fixed_order, one record each, and"
                f" stops at a random T, as its account assumes; got {changed} (a random-stop run"
                " cannot be cut or laid out by hand: make it with DPPlan.create('fixed_order', n,"
                " ...))"
            )
        if self.smoothness is not None or self.noise_multiplier != 0:
            if self.smoothness is None:
                raise ValueError(
                    f"{ITERATION_PROOF}: give smoothness=β (the loss's smoothness, regularizer"
                    " included)"
                )
            check_smoothness(self.smoothness)

    def _spec(self) -> tuple[Any, ...]:
        """What the account of the plan's run depends on besides the multiplier (a cache key)."""
        return (
            self.execution,
            self.l2_clip_norm,
            self.delta,
            self.fixed_events,
            self.accountant,
            self.options,
        )

    @classmethod
    @renamed_kwargs(neighbouring="neighboring_relation")
    def create(
        cls,
        sampling: str,
        n: int,
        *,
        l2_clip_norm: float,
        delta: float,
        noise_multiplier: float | None = None,
        target_epsilon: float | None = None,
        batch_size: int | None = None,
        steps: int | None = None,
        epochs: float | None = None,
        fixed_events: tuple[DpEvent, ...] = (),
        accountant: PlanAccountant | None = None,
        options: dp.AccountingOptions | None = None,
        neighboring_relation: str | None = None,
        kappa: int = 1,
        max_overflow_prob: float = 1e-10,
        shuffle_bound: str = "as_poisson",
        smoothness: float | None = None,
        allow_large_delta: bool = False,
    ) -> DPPlan:
        """A private plan: give exactly one of ``noise_multiplier`` and ``target_epsilon`` (then
        ``z`` is the smallest multiplier with the run ``(target_epsilon, delta)``-DP *as it
        executes*, calibrated here, once, and verified: see below). Everything is checked before
        anything is computed (TypeError for a value of the wrong type, ValueError naming a bad
        one). ``smoothness``: required for DP-SGD by iteration (``sampling="fixed_order"`` without
        ``steps``), whose amplification-by-iteration proof covers plain SGD with ``η ≤ 2/β`` only,
        ``β`` finite and > 0 (the drivers and :meth:`optimizer` then refuse anything else).
        ``delta`` must be below ``1/n`` (a mechanism that publishes one random record whole is
        ``(0, 1/n)``-DP) unless ``allow_large_delta=True``, which the guarantee then states.

        A calibrated ``z`` is never taken on trust, whichever answered it (the accountant, a
        calibration store, the in-memory cache): the ε of the run as the engine executes it
        (float32 noise std ``fl32(fl32(z)·fl32(C))`` over the largest contribution clipping allows,
        ``max(C, fl32(C))``) is recomputed and must meet the target; ``z`` is raised by float32
        ulps where rounding takes it past the target, and an answer further off is recomputed
        afresh with a warning (ValueError if the fresh one misses too)."""
        _check_options_type(options)
        execution = ExecutionPlan.create(
            sampling,
            n,
            batch_size=batch_size,
            steps=steps,
            epochs=epochs,
            kappa=kappa,
            max_overflow_prob=max_overflow_prob,
            neighboring_relation=neighboring_relation,
            shuffle_bound=shuffle_bound,
        )
        clip = check_clip_norm(l2_clip_norm)
        delta = dp.check_delta_for_size(
            _number(delta, "delta"), execution.n, allow_large_delta=allow_large_delta
        )
        if (noise_multiplier is None) == (target_epsilon is None):
            raise ValueError("give exactly one of noise_multiplier and target_epsilon")
        fixed_events = tuple(fixed_events)
        for event in fixed_events:
            if not isinstance(event, DpEvent):
                raise TypeError(
                    f"fixed_events must hold dp_accounting DpEvents, got {type(event).__name__}"
                )
        if accountant is not None:
            if not (
                callable(getattr(accountant, "epsilon", None))
                and callable(getattr(accountant, "calibrate", None))
            ):
                raise TypeError(
                    "accountant must have epsilon(plan, z, delta) and calibrate(plan, epsilon,"
                    f" delta) (a PlanAccountant), got {type(accountant).__name__}"
                )
            if fixed_events or options is not None:
                raise ValueError(
                    "an accountant accounts the run on its own: fixed_events and options do not"
                    " compose with it (a private selection takes its statistics in its own"
                    " fixed_events)"
                )
            _check_accountant_clip(accountant, clip)
        if execution.random_stop:
            if smoothness is None:
                raise ValueError(
                    f"{ITERATION_PROOF}: its plan states the β of a β-smooth convex loss, give"
                    " smoothness=β"
                )
            smoothness = check_smoothness(smoothness)
        elif smoothness is not None:
            raise ValueError(
                "smoothness is only used by DP-SGD by iteration (fixed_order without steps)"
            )
        spec = (execution, clip, delta, fixed_events, accountant, options)
        if target_epsilon is not None:
            target = check_epsilon(_number(target_epsilon, "target_epsilon"), "target_epsilon")
            z = _calibrate(spec, target)
        else:
            target, z = None, check_noise_multiplier(noise_multiplier)
        return cls(
            execution,
            clip,
            z,
            delta,
            _account(spec, z, execution.steps, ()),
            target,
            fixed_events,
            accountant,
            options,
            smoothness,
            bool(allow_large_delta),
        )

    @classmethod
    @renamed_kwargs(neighbouring="neighboring_relation")
    def non_private(
        cls,
        sampling: str,
        n: int,
        *,
        batch_size: int | None = None,
        steps: int | None = None,
        epochs: float | None = None,
        l2_clip_norm: float = math.inf,
        kappa: int = 1,
        max_overflow_prob: float = 1e-10,
        neighboring_relation: str | None = None,
    ) -> DPPlan:
        """A run that claims **no** DP guarantee: no noise from the plan (``z = 0``); clipping only
        if ``l2_clip_norm`` is given. Its :attr:`epsilon` is ``inf`` and every driver says "no DP
        guarantee". Extensions may still add noise of their own (e.g. a nominal-ε mechanism)."""
        execution = ExecutionPlan.create(
            sampling,
            n,
            batch_size=batch_size,
            steps=steps,
            epochs=epochs,
            kappa=kappa,
            max_overflow_prob=max_overflow_prob,
            neighboring_relation=neighboring_relation,
        )
        clip = _number(l2_clip_norm, "l2_clip_norm")
        if not clip > 0:
            raise ValueError(f"l2_clip_norm must be > 0 (inf: no clipping), got {l2_clip_norm!r}")
        return cls(execution, clip, 0.0, None, math.inf)

    # -- what the plan states ----------------------------------------------------------------------

    @property
    def private(self) -> bool:
        """Whether the plan claims a DP guarantee (``z > 0``)."""
        return self.noise_multiplier > 0

    @property
    def n(self) -> int:
        return self.execution.n

    @property
    def sampler(self) -> str:
        return self.execution.sampler

    @property
    def batch_size(self) -> int:
        return self.execution.batch_size

    @property
    def steps(self) -> int:
        return self.execution.steps

    @property
    def pad(self) -> int:
        return self.execution.pad

    @property
    def normalize_by(self) -> float:
        return self.execution.normalize_by

    @property
    def neighboring_relation(self) -> str:
        return self.execution.neighboring_relation

    @property
    def normaliser(self) -> float:
        """Renamed :attr:`normalize_by` (warns)."""
        warn_renamed("normaliser", "normalize_by", "DPPlan.")
        return self.normalize_by

    @property
    def neighbouring(self) -> str:
        """Renamed :attr:`neighboring_relation` (warns)."""
        warn_renamed("neighbouring", "neighboring_relation", "DPPlan.")
        return self.neighboring_relation

    def describe(self) -> str:
        """One line: the guarantee (or "no DP guarantee") and the numbers it rests on."""
        ex = self.execution
        layout = f"{ex.sampler}, n={ex.n}, batch {ex.batch_size}, {ex.steps} steps"
        clip = f"C={self.l2_clip_norm:g}" if math.isfinite(self.l2_clip_norm) else "no clipping"
        if not self.private:
            return f"no DP guarantee (non-private run requested): {layout}, {clip}"
        how = [f"z={self.noise_multiplier:.6g}"]
        if ex.sampler == "shuffle":
            how.append(
                "shuffled epochs accounted as if Poisson (an assumption)"
                if ex.shuffle_bound == "as_poisson"
                else "no amplification (neighbours: replace-one or zero-out)"
            )
        if self.fixed_events:
            how.append(f"{len(self.fixed_events)} private statistic(s)")
        if self.accountant is not None:
            how.append(f"accounted by {type(self.accountant).__name__}")
        if self.delta is not None and self.delta >= 1.0 / ex.n:
            how.append("δ ≥ 1/n allowed by the user")
        return (
            f"({self.epsilon:.6g}, {self.delta:g})-DP ({ex.neighboring_relation}): "
            f"{layout}, {clip}, " + ", ".join(how)
        )

    def __str__(self) -> str:
        return self.describe()

    # -- accounting --------------------------------------------------------------------------------

    def epsilon_at(
        self,
        noise_multiplier: float,
        steps: int | None = None,
        fixed_events: tuple[DpEvent, ...] = (),
    ) -> float:
        """ε at :attr:`delta` of this plan's run at multiplier ``noise_multiplier`` (and, when
        given, after ``steps`` ≤ :attr:`steps` steps, or composed with more ``fixed_events``, e.g.
        a sweep point's private statistics); ``inf`` for a non-private plan. Cached."""
        if self.delta is None:
            return math.inf
        return _account(
            self._spec(),
            check_noise_multiplier(noise_multiplier),
            self.steps if steps is None else steps,
            tuple(fixed_events),
        )

    def dp_event(self) -> DpEvent:
        """dp-accounting's event of the planned run (private statistics first, then the steps)."""
        if not self.private:
            raise ValueError("a non-private plan has no dp_event: it claims no guarantee")
        run = self.execution.dp_event(self.noise_multiplier)
        return dp_event.ComposedDpEvent([*self.fixed_events, run]) if self.fixed_events else run

    def with_steps(self, steps: int) -> DPPlan:
        """The same plan cut to ``steps`` (≤ :attr:`steps`) steps, its ε recomputed."""
        steps = check_positive_int(steps, "steps")
        if steps > self.steps:
            raise ValueError(f"steps={steps} is more than the {self.steps} this plan charges")
        if steps == self.steps:
            return self
        execution = dataclasses.replace(self.execution, steps=steps)
        return dataclasses.replace(
            self,
            execution=execution,
            epsilon=self.epsilon_at(self.noise_multiplier, steps) if self.private else math.inf,
        )

    # -- what the plan hands out ------------------------------------------------------------------

    def clipped_grad(
        self,
        loss_fn: Callable[..., Any] | Model,
        *,
        has_aux: bool = False,
        keep_batch_dim: bool = True,
        prng_argnum: int | None = None,
        microbatch_size: int | None = None,
    ) -> PlanGradFn:
        """:func:`dpprep.clipping.clipped_grad` of ``loss_fn`` (a loss ``(params, batch, *args)``
        or a :class:`~dpprep.models.Model`, whose GLM fast path is then used; a stochastic model
        gets each example its own key) at this plan's ``C``, for this plan's batches (the
        :class:`PlanBatch` of :meth:`batch`, given whole: it takes no separate mask),
        ``microbatch_size`` per-example gradients at a time (None: all; padding-only microbatches
        are skipped). Microbatching changes memory and work, not the clipped sum or the account."""
        fn = clipping.clipped_grad(
            loss_fn,
            l2_clip_norm=self.l2_clip_norm,
            has_aux=has_aux,
            keep_batch_dim=keep_batch_dim,
            prng_argnum=prng_argnum,
            microbatch_size=microbatch_size,
        )
        stochastic = isinstance(loss_fn, Model) and loss_fn.stochastic
        return PlanGradFn(self, fn, prng_argnum, stochastic, _token=_MINT)

    def privatizer(self, key: Array) -> optax.GradientTransformation:
        """The plan's privatizer on a clipped sum: noise std ``z·C`` (none for a non-private plan),
        divided by the plan's normaliser, from the ``"noise"`` stream of the run key ``key`` (the
        stream :func:`dpprep.algorithms.train` uses). Past the plan's steps it returns NaN.

        DP-SGD by iteration (a random-stop plan) releases the iterate at the random stop
        ``T ~ Unif{1..n−κ+1}`` (Feldman et al. 2018): the privatizer draws ``T`` from the run key's
        ``"stop"`` stream, as :func:`~dpprep.algorithms.train` does, and every update after the
        ``T``-th is zero, so a loop of all :attr:`steps` through plain SGD
        (:meth:`optimizer`) ends at ``θ_T``, the iterate ``train`` releases with that key."""
        key = noise.check_key_arg(key)
        noise_key = streams.stream(key, streams.NOISE)
        inner = noise.privatizer(
            noise_key, self.l2_clip_norm, self.noise_multiplier, None, self.normalize_by
        )
        steps = self.steps
        ex = self.execution

        def update_fn(updates, state, params=None):
            out, new_state = inner.update(updates, state, params)
            if ex.random_stop:
                stop = sampling.stopping_time(streams.stream(key, streams.STOP), ex.n, ex.kappa)
                out = jax.tree_util.tree_map(
                    lambda u: jnp.where(state.count < stop, u, jnp.zeros_like(u)), out
                )
            within = state.count < steps
            out = jax.tree_util.tree_map(lambda u: jnp.where(within, u, jnp.nan), out)
            return out, new_state

        return optax.GradientTransformation(inner.init, update_fn)

    def optimizer(
        self,
        tx: optax.GradientTransformation | None = None,
        *,
        key: Array,
        learning_rate: float | None = None,
    ) -> PrivateTransformation:
        """``optax.chain(privatizer(key), tx)``: the plan's privatizer first, then ``tx`` (default
        ``optax.sgd(learning_rate)``, or ``optax.sgd(1.0)``), as one :class:`PrivateTransformation`
        of the run with key ``key`` for :func:`dpprep.step.dp_step`.

        DP-SGD by iteration (a random-stop plan) takes no ``tx``: amplification by iteration
        (Feldman et al. 2018) covers plain SGD with contractive steps ``η ≤ 2/β`` only, and an optax
        transformation's step size and state cannot be checked. Give ``learning_rate=η`` (a
        constant, checked ``≤ 2/β`` here); the plan builds ``optax.sgd(η)`` itself, after its
        privatizer (which zeroes every update after the random stop). The check rests on the
        plan's ``β`` (:attr:`smoothness`): a ``β`` below the loss's true smoothness is a claim
        about the loss that no code can check, and voids the guarantee."""
        eta = None if learning_rate is None else _constant_learning_rate(learning_rate)
        if self.execution.random_stop:
            if tx is not None:
                refuse_iteration_optimizer(
                    f"plan.optimizer(tx={type(tx).__name__}, ...)",
                    "pass no tx and plan.optimizer(learning_rate=η, key=...) with η ≤ 2/β"
                    + (f" = {2.0 / self.smoothness:.6g}" if self.smoothness is not None else "")
                    + ": the plan builds plain SGD itself",
                )
            if eta is None:
                raise ValueError(
                    f"{ITERATION_PROOF}: give the step size, plan.optimizer(learning_rate=η,"
                    " key=...), checked η ≤ 2/β"
                )
            check_iteration_learning_rate(eta, self.smoothness)
            tx = optax.sgd(eta)
        elif eta is not None:
            if tx is not None:
                raise ValueError(
                    "give tx (an optax optimizer with its own step size) or learning_rate (plain"
                    " SGD), not both"
                )
            tx = optax.sgd(eta)
        tx = optax.sgd(1.0) if tx is None else tx
        if not (callable(getattr(tx, "init", None)) and callable(getattr(tx, "update", None))):
            raise TypeError(f"tx must be an optax GradientTransformation, got {type(tx).__name__}")
        if isinstance(tx, PrivateTransformation):
            raise ValueError(
                "tx already holds a privatizer (it is a plan's optimizer): the noise would be added"
                " twice"
            )
        return PrivateTransformation(
            self, noise.check_key_arg(key), optax.chain(self.privatizer(key), tx), _token=_MINT
        )

    def batch(self, key: Array, t: int | Array, data: Batch) -> PlanBatch:
        """Step ``t``'s batch of ``data`` (a pytree whose every leaf has the plan's ``n`` rows)
        in the run with key ``key``: a :class:`PlanBatch` of ``pad`` rows drawn from the key's
        ``"batch"`` stream exactly as :func:`dpprep.algorithms.train` draws them, and their 0/1
        mask (padded slots 0, their rows zeros: padding holds no record). Give it whole to
        :meth:`clipped_grad`'s function; ``rows, mask = batch`` reads it. Data of another size,
        or a step outside the plan, is refused."""
        ex = self.execution
        rows = {
            np.shape(leaf)[0] if np.ndim(leaf) else None for leaf in jax.tree_util.tree_leaves(data)
        }
        if rows != {ex.n}:
            raise ValueError(
                f"the data's leaves have {sorted(rows, key=str)} rows; the plan was made for"
                f" n={ex.n} (every leaf's first axis is the example axis)"
            )
        if not isinstance(t, jax.core.Tracer) and not 0 <= int(t) < ex.steps:
            raise ValueError(f"step t={t} is outside the plan's steps 0..{ex.steps - 1}")
        k_batch = streams.stream(noise.check_key_arg(key), streams.BATCH)
        idx, mask, _, _ = ex.impl.select(
            k_batch, ex, jnp.asarray(t, jnp.int32), ex.impl.prepare(k_batch, ex)
        )
        mask = jnp.ones((ex.pad,), jnp.float32) if mask is None else mask
        return PlanBatch(sampling.gather(data, idx, mask), mask, _token=_MINT)

    def spent(self, opt_state: optax.OptState) -> float:
        """ε of the releases a plan optimizer's state has made so far (0 before the first).

        DP-SGD by iteration is accounted as one procedure: from its first step on, the plan's
        :attr:`epsilon`, whatever the random stop ``T`` turns out to be. What that ε covers is the
        procedure's output only, the params after all :attr:`steps` (``θ_T``); the params of an
        own loop before its end are intermediate iterates, which its proof hides and no ε here
        covers."""
        count = int(_privatizer_state(opt_state).count)
        if count == 0:
            return 0.0
        if not self.private:
            return math.inf
        if self.execution.random_stop:
            return self.epsilon
        return self.epsilon_at(self.noise_multiplier, min(count, self.steps))


def _whole_procedure(accountant: Any) -> bool:
    """An accountant of a whole procedure (e.g. a private selection) charges the overflow slack
    itself; any other is an account of the ideal run, around which the plan charges it."""
    return bool(getattr(accountant, "accounts_whole_procedure", False))


def _run_multiplier(z: float, clip: float) -> float:
    """The multiplier the run has. The engine computes in float32: it adds noise of std
    ``fl32(fl32(z)·fl32(C))`` (:func:`dpprep.noise.leaf_stddevs`) to a sum of contributions
    clipped to ``fl32(C)``, which may lie above ``C``; so the run's multiplier is that std over
    ``max(C, fl32(C))``. It is accounted where it is below ``z`` (never above what runs: the ε
    stated is never below the run's). A std that is not a normal float32 number has no noise to
    account, and is refused."""
    z32, c32 = np.float32(z), np.float32(clip)
    std = z32 * c32  # a float32 product, as the engine computes it
    if not (np.isfinite(std) and std >= np.finfo(np.float32).tiny):
        raise ValueError(
            f"noise_multiplier={z!r} with l2_clip_norm={clip!r} gives a noise std z·C that float32"
            " cannot hold (the run would add no noise, or overflow): no guarantee follows"
        )
    # (The float64 quotient's rounding, <= 1.1e-16 relative, is below the accountants' own.)
    run = float(std) / max(clip, float(c32))
    return min(z, run)


@functools.lru_cache(maxsize=4096)
def _account(spec: tuple[Any, ...], z: float, steps: int, more: tuple[DpEvent, ...]) -> float:
    """ε at the plan's δ of the run ``spec`` (:meth:`DPPlan._spec`) at multiplier ``z`` (as the
    run has it, :func:`_run_multiplier`), after ``steps`` steps, composed with ``more`` events."""
    execution, clip, delta, fixed_events, accountant, options = spec
    z = _run_multiplier(z, clip)
    if steps != execution.steps:
        execution = dataclasses.replace(execution, steps=steps)
    if accountant is not None and more:
        raise ValueError(
            "a point's private statistics do not compose with the plan's accountant here: give them"
            " to the accountant (e.g. the selection's fixed_events)"
        )
    if accountant is not None and _whole_procedure(accountant):
        return float(accountant.epsilon(execution, z, delta))
    return execution.epsilon(
        z, delta, fixed_events=(*fixed_events, *more), options=options, accountant=accountant
    )


#: Most float32 steps a calibrated multiplier is raised by for its run to meet the target (float32
#: rounding of z, C and z·C moves the run's multiplier by about 2 ulps; a root finder's tolerance
#: by less than one); an answer further off is wrong and recalibrated (:func:`_calibrate`).
_MAX_FLOAT32_RAISES = 16


def _executed_meeting(spec: tuple[Any, ...], z: float, target: float) -> tuple[float, float]:
    """``(z', ε)``: the first of ``z`` and the float32 numbers above it (up to
    :data:`_MAX_FLOAT32_RAISES` of them) whose run, as executed, meets ``target``, and its ε; or
    ``(z, ε(z))`` with ``ε(z) > target`` when none does."""
    steps = spec[0].steps
    candidate, first = z, _account(spec, z, steps, ())
    eps = first
    for _ in range(_MAX_FLOAT32_RAISES):
        if eps <= target:
            return candidate, eps
        # The next float32 above the float32 the engine takes for z (the first raise: never below z)
        candidate = float(np.nextafter(np.float32(candidate), np.float32(np.inf)))
        eps = _account(spec, candidate, steps, ())
    if eps <= target:
        return candidate, eps
    return z, first


def _calibrate(spec: tuple[Any, ...], target: float) -> float:
    """The smallest multiplier with the run ``spec`` ``(target, δ)``-DP as it executes: calibrated
    by the accountant (through :func:`dpprep.accounting.dp.calibrate_noise`, its cache and any
    calibration store), then verified: the ε of the run as executed (:func:`_run_multiplier`)
    must meet the target. Where float32 rounding takes it past the target, ``z`` is raised by
    float32 ulps until it meets it; an answer no such raise mends is wrong: it is recalibrated
    without any store or cache, with a warning, and ValueError if the fresh answer misses too.
    ``DPPlan.create`` checked δ against ``n`` before (its opt-in included)."""
    execution, clip, delta, fixed_events, accountant, options = spec

    def calibrate() -> float:
        if accountant is not None and _whole_procedure(accountant):
            z = accountant.calibrate(execution, target, delta)
        else:
            z = execution.calibrate(
                target,
                delta,
                fixed_events=fixed_events,
                options=options,
                accountant=accountant,
                allow_large_delta=True,
            )
        return check_noise_multiplier(z, "the calibrated noise_multiplier")

    z = calibrate()
    try:
        met, eps = _executed_meeting(spec, z, target)
    except ValueError as err:  # e.g. a multiplier float32 cannot hold: not a usable answer
        met, eps = z, math.nan
        problem = str(err)
    else:
        problem = f"epsilon={eps!r} > target_epsilon={target!r}"
    if eps <= target:
        return met
    warnings.warn(
        f"the calibration to target_epsilon={target!r} answered noise_multiplier={z!r}, whose run"
        f" as executed misses the target ({problem}): a wrong answer of the accountant, a"
        " calibration store or a cache; calibrating afresh without store or cache",
        UserWarning,
        stacklevel=4,
    )
    with dp.calibration_store(None), dp._fresh_calibrations():
        fresh = calibrate()
    met, eps = _executed_meeting(spec, fresh, target)
    if not eps <= target:
        raise ValueError(
            f"calibrating to target_epsilon={target!r} afresh answered noise_multiplier={fresh!r},"
            f" whose run as executed spends epsilon={eps!r} > target_epsilon: no plan meeting the"
            " target was found (the accountant's calibrate and epsilon disagree)"
        )
    return met
