"""One public plan of a run, read by both the engine and the accountant.

:class:`ExecutionPlan` fixes everything about a run that decides its privacy: the sampler, the
dataset size, the (expected) batch size, the number of noisy releases, the padded batch shape,
the normaliser and the neighbouring relation. :func:`dpprep.algorithms.train` scans exactly
``plan.steps`` steps of ``plan``, and :meth:`ExecutionPlan.dp_event` charges exactly
``plan.steps`` steps of the same sampler, so the steps a run makes and the steps the accountant
charges cannot differ (in the spirit of jax_privacy's execution plan).

>>> plan = ExecutionPlan.create("shuffle", 60_000, batch_size=1024, epochs=40)
>>> plan.steps, plan.dp_event(1.0).count      # 40 epochs of ⌈60000/1024⌉ = 59 batches
(2360, 2360)

The plan is the one place a run's noise is calibrated (:meth:`ExecutionPlan.calibrate`) and its ε
read (:meth:`ExecutionPlan.epsilon`): by dp-accounting on its event, composed with fixed events
(e.g. a private statistic released before training), or by another accounting of the same run
given as an ``accountant`` (:class:`PlanAccountant`, e.g. a bound for training on pre-processed
data); the Poisson overflow slack is charged the same way in every case.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Callable, Protocol

from dp_accounting import dp_event
from dp_accounting.dp_event import DpEvent
from scipy import optimize

from dpprep import sampling
from dpprep.accounting import dp
from dpprep.validation import check_delta, check_epsilon, check_positive, check_positive_int, check_probability

SHUFFLE_BOUNDS = ("as_poisson", "no_amplification")
_SLACK_PASSES = 50  # fixed-point passes of ExecutionPlan.epsilon (each a valid guarantee)
_BRACKET_DOUBLINGS = 60  # DP-SGD by iteration: a bracket up to z = 2^61


# The scan over steps counts in int32 (JAX's default integer): a longer run would overflow it
# deep inside a compiled loop (TrainConfig(epochs=1e12) planned 4e12 steps, then crashed in JAX).
MAX_STEPS = 2**31 - 1


class PlanAccountant(Protocol):
    """An accounting of a plan's runs other than dp-accounting on its event (e.g. a theorem for
    training on pre-processed data). ``epsilon`` is decreasing in the multiplier; both answer for
    the *ideal* run (the plan charges the Poisson overflow slack around them)."""

    def epsilon(self, plan: "ExecutionPlan", noise_multiplier: float, delta: float) -> float:
        """ε at ``delta`` of ``plan``'s run at multiplier ``z`` (noise std ``z·C`` on each sum)."""
        ...

    def calibrate(self, plan: "ExecutionPlan", target_epsilon: float, delta: float) -> float:
        """The smallest ``z`` whose run is ``(target_epsilon, delta)``-DP by this accounting."""
        ...


def epsilon_with_overflow_slack(ideal: Callable[[float], float], delta: float, overflow: float, what: str) -> float:
    """ε at ``delta`` of a run whose padded Poisson batches overflow with probability ``overflow``:
    the ideal run is ``(ε, ideal⁻¹(ε))``-DP and the implemented one pays the slack
    ``(1 + e^ε)·overflow`` (:func:`dpprep.sampling.overflow_delta`), so the answer is the fixed point
    ``ε = ideal(delta − slack(ε))``. Starting above it at ``ideal(delta/2)``, every iterate is a
    valid ``(ε, delta)`` guarantee; iterating to a relative change of 1e-10 (one or two passes at
    the default ``max_overflow_prob``). ``what`` names the run in the error when no ε leaves any δ."""
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
                f"{what} is only epsilon={eps:.4g}-DP, where the padded Poisson batch's overflow slack "
                f"(1 + e^epsilon)*p = {slack:.3g} (p = {overflow:.3g}) leaves nothing of delta={delta}: "
                f"no guarantee of the run as implemented follows; use more noise or a smaller "
                f"max_overflow_prob")
        tighter = ideal(delta - slack)
        if not tighter < eps:
            break
        converged, eps = eps - tighter <= 1e-10 * eps, tighter
        if converged:
            break
    return eps


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
      normaliser: what the noisy gradient sum is divided by.
      epochs: permutations drawn up front (shuffle only).
      neighbouring: "add_remove" or "replace_one": the relation of the guarantee.
      random_stop: DP-SGD by iteration (fixed_order with ``T ~ Unif{1..n−κ+1}``).
      kappa: ``κ`` of that stopping time.
      max_overflow_prob: bound on the probability that any Poisson draw overflows ``pad``.
      shuffle_bound: how shuffled epochs are accounted: ``"as_poisson"`` (the customary number:
        Poisson subsampling at ``q = B/n`` over the steps taken, an assumption, not a proof —
        shuffled batches can leak more, Chua et al. 2024; a warning says so) or
        ``"no_amplification"`` (proven: each record is in one batch per epoch, so the run is
        ``epochs`` Gaussian releases of multiplier ``z``).
    """

    sampler: str
    n: int
    batch_size: int
    steps: int
    pad: int
    normaliser: float
    epochs: int
    neighbouring: str
    random_stop: bool = False
    kappa: int = 1
    max_overflow_prob: float = 1e-10
    shuffle_bound: str = "as_poisson"

    @classmethod
    def create(cls, sampler: str, n: int, *, batch_size: int | None = None, steps: int | None = None,
               epochs: float | None = None, kappa: int = 1, max_overflow_prob: float = 1e-10,
               neighbouring: str | None = None, shuffle_bound: str = "as_poisson") -> ExecutionPlan:
        """Lays out a run of ``sampler`` on ``n`` records (ValueError naming a bad argument).
        ``neighbouring=None`` takes the sampler's own relation."""
        if shuffle_bound not in SHUFFLE_BOUNDS:
            raise ValueError(f"shuffle_bound must be one of {SHUFFLE_BOUNDS}, got {shuffle_bound!r}")
        if shuffle_bound != "as_poisson" and sampler != "shuffle":
            raise ValueError(f"shuffle_bound is for sampling='shuffle', got sampling={sampler!r}")
        n = check_positive_int(n, "n")
        impl = sampling.get(sampler)
        check_probability(max_overflow_prob, "max_overflow_prob")
        relation = impl.neighbouring if neighbouring is None else neighbouring
        if relation not in dp.NEIGHBOURINGS:
            raise ValueError(f"neighbouring must be one of {dp.NEIGHBOURINGS}, got {neighbouring!r}")
        layout = impl.layout(n, batch_size, steps, epochs, kappa=kappa,
                             max_overflow_prob=max_overflow_prob)
        if layout.steps > MAX_STEPS:
            asked = f"steps={steps!r}" if steps is not None else f"epochs={epochs!r} (on n={n}, batch size {layout.batch_size})"
            raise ValueError(f"{asked} is {layout.steps:.4g} steps; a run takes at most 2**31 - 1 = {MAX_STEPS} "
                             "(its step counter is a JAX int32)")
        return cls(sampler, n, layout.batch_size, layout.steps, layout.pad, layout.normaliser,
                   layout.epochs, relation, layout.random_stop, int(kappa), float(max_overflow_prob),
                   shuffle_bound)

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
            raise ValueError(f"sampling={self.sampler!r} has no dp-accounting event: "
                             f"{self.impl.no_event_reason}")
        return schedule

    def dp_event(self, noise_multiplier: float) -> dp_event.DpEvent:
        """The dp-accounting event of the whole run at multiplier ``z`` (noise std ``z·C`` on each
        step's sum)."""
        return dp.dpsgd_event(noise_multiplier, self.schedule())

    def _options(self, options: dp.AccountingOptions | None) -> dp.AccountingOptions:
        if options is None:
            return dp.AccountingOptions(neighbouring=self.neighbouring)  # type: ignore[arg-type]  # validated in __post_init__
        if not isinstance(options, dp.AccountingOptions):
            raise ValueError(f"options must be an AccountingOptions or None, got {type(options).__name__}")
        if options.neighbouring != self.neighbouring:
            raise ValueError(f"this plan is a {self.neighbouring} guarantee; got options.neighbouring="
                             f"{options.neighbouring!r} (set it when creating the plan)")
        return options

    def _check_accountant(self, accountant: PlanAccountant, fixed_events: tuple[DpEvent, ...],
                          options: dp.AccountingOptions | None) -> None:
        if not (callable(getattr(accountant, "epsilon", None)) and callable(getattr(accountant, "calibrate", None))):
            raise ValueError(f"accountant must have epsilon(plan, z, delta) and calibrate(plan, epsilon, delta) "
                             f"(a PlanAccountant), got {type(accountant).__name__}")
        if fixed_events or options is not None:
            raise ValueError("an accountant accounts the run on its own: fixed_events and options do not "
                             "compose with it here")

    def epsilon(self, noise_multiplier: float, delta: float, *,
                fixed_events: tuple[DpEvent, ...] = (),
                options: dp.AccountingOptions | None = None,
                accountant: PlanAccountant | None = None) -> float:
        """ε at ``delta`` of the run *as implemented* at multiplier ``z``, composed with
        ``fixed_events`` (e.g. DPSGD-F's private mean). For Poisson sampling the implemented run is
        ``(ε, δ_ideal(ε) + slack(ε))``-DP with the padded batch's overflow slack
        ``slack(ε) = (1 + e^ε)·p`` (:func:`dpprep.sampling.overflow_delta`), so the answer is a
        fixed point ``ε = f(ε) := ε_ideal(delta − slack(ε))``. Starting above it at
        ``f(ε_ideal(delta/2))``, every iterate ``e`` satisfies ``f(e) ≤ e`` (f increases), i.e. is
        a valid ``(e, delta)`` guarantee; iterating to a relative change of 1e-10 (one or two
        passes at the default ``max_overflow_prob``) gives ``epsilon(calibrate(ε, δ), δ) ≤ ε``. ``options``: how to account
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
        return epsilon_with_overflow_slack(ideal, delta, self.overflow_probability(),
                                           f"at noise_multiplier={noise_multiplier!r} the ideal run")

    def calibrate(self, target_epsilon: float, delta: float, *,
                  fixed_events: tuple[DpEvent, ...] = (),
                  options: dp.AccountingOptions | None = None,
                  accountant: PlanAccountant | None = None) -> float:
        """Smallest multiplier ``z`` with the run as implemented ``(target_epsilon, delta)``-DP,
        composed with ``fixed_events``; the Poisson overflow slack at ``target_epsilon`` is taken
        out of ``delta`` exactly. Cached (:func:`dpprep.accounting.dp.calibrate_noise`);
        ``options`` as in :meth:`epsilon`.

        DP-SGD by iteration (``fixed_order`` with a random stop) has no dp-accounting event: it is
        accounted by amplification by iteration (Feldman et al. 2018, Thm 26;
        :func:`dpprep.accounting.dp.sgd_iter_epsilon` with noise std ``z·C`` and Lipschitz
        constant ``C``, valid for the contractive projected SGD its sampler documents), and
        calibrated here by bisection on that bound. ``accountant``: calibrate by it instead
        (:class:`PlanAccountant`; the overflow slack is taken out of ``delta`` first)."""
        target_epsilon = check_epsilon(target_epsilon, "target_epsilon")
        delta = check_delta(delta)
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
                f"smaller target_epsilon or a max_overflow_prob below delta/(1 + e^epsilon)")
        if accountant is not None:
            return float(accountant.calibrate(self, target_epsilon, delta - slack))
        return dp.calibrate_noise(target_epsilon, delta - slack, self.schedule(),
                                  fixed_events=fixed_events, options=self._options(options))

    def _warn_if_assumed(self) -> None:
        """Shuffled epochs accounted as if Poisson: say so (the warnings registry shows it once
        per plan and call site)."""
        if self.sampler == "shuffle" and self.shuffle_bound == "as_poisson":
            warnings.warn(
                f"shuffled DP-SGD (n={self.n}, B={self.batch_size}, {self.epochs} epochs) is accounted as if "
                "Poisson-subsampled: the customary number, not a proven guarantee (shuffled batches can leak "
                "more, Chua et al. 2024). The proven bound, without amplification, is "
                "ExecutionPlan.create('shuffle', ..., shuffle_bound='no_amplification'); or sample with "
                "sampling='poisson'", UserWarning, stacklevel=3)

    def _check_iteration(self, fixed_events: tuple[DpEvent, ...],
                         options: dp.AccountingOptions) -> None:
        if fixed_events:
            raise ValueError("DP-SGD by iteration is accounted by amplification by iteration (an RDP "
                             "curve), which does not compose with fixed_events here")
        if options != self._options(None):
            raise ValueError("DP-SGD by iteration has one accounting (amplification by iteration); "
                             "options other than the defaults do not apply")
        if self.kappa != 1:
            raise ValueError(f"DP-SGD by iteration is accounted for kappa = 1 only, got kappa={self.kappa}")

    def _iteration_epsilon(self, noise_multiplier: float, delta: float,
                           fixed_events: tuple[DpEvent, ...], options: dp.AccountingOptions) -> float:
        self._check_iteration(fixed_events, options)
        z = check_positive(noise_multiplier, "noise_multiplier")
        return dp.sgd_iter_epsilon(z, delta, lipschitz=1.0, n=self.n)[0]

    def _iteration_calibrate(self, target_epsilon: float, delta: float,
                             fixed_events: tuple[DpEvent, ...], options: dp.AccountingOptions) -> float:
        self._check_iteration(fixed_events, options)

        def excess(z: float) -> float:
            return dp.sgd_iter_epsilon(z, delta, lipschitz=1.0, n=self.n)[0] - target_epsilon

        lo, hi = 0.3, 2.0
        for _ in range(_BRACKET_DOUBLINGS):
            if excess(hi) <= 0:
                break
            lo, hi = hi, hi * 2
        else:
            raise ValueError(f"target_epsilon={target_epsilon!r} needs a noise multiplier above {hi:.3g} for "
                             f"DP-SGD by iteration on n={self.n}; ask for a larger target_epsilon")
        while True:  # the smallest multiplier may lie below the first bracket
            try:
                if excess(lo) > 0:
                    break
            except ValueError:
                # Below lo the bound has no valid order: hi meets the target, the smallest
                # multiplier with a bound lies in (lo, hi].
                return hi
            lo, hi = lo / 2, lo
        return float(optimize.brentq(excess, lo, hi, xtol=1e-10))
