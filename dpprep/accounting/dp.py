"""(ε, δ) accounting for the private learners, on Google's ``dp-accounting`` library.

What lives here, and what it builds on:

* :class:`DpSgdSchedule` describes how many noisy steps a learner takes and how the records of
  each step are chosen (``"full"`` batch, ``"poisson"`` subsampling, ``"shuffle"``d epochs,
  fixed-size batches ``"without_replacement"``).
* :class:`AccountingOptions`: how ε is accounted (accountant, neighbouring relation, PLD grid),
  passed as ``options=`` to every function below.
* :func:`epsilon` / :func:`calibrate_noise`: ε of a DP-SGD/DP-GD run and the smallest noise
  multiplier for a target ε (PLD accountant by default, RDP on request). Calibrations are cached
  in memory; a caller may route them through a store of its own for a ``with`` block
  (:func:`calibration_store`, e.g. the experiments' on-disk cache), which verifies what it keeps
  with :func:`check_calibration` (a stored value can cost time, never privacy). The library itself
  writes no file.
  The PLD's work is bounded, per step (:data:`MAX_PLD_POINTS`) and for the composed run
  (:data:`MAX_COMPOSED_PLD_POINTS`): beyond it the grid is coarsened or RDP answers, with a
  warning saying why, or a ValueError says what to do; a target no multiplier reaches is refused
  with the target to ask for. So every call answers or refuses with bounded work (these grid
  budgets) and a few GiB at any input.
* :func:`gaussian_event`, :func:`dpsgd_event`, :func:`composed_epsilon`,
  :func:`composed_calibrate`: compose several mechanisms (e.g. DPSGD-F = a Gaussian mean estimate
  followed by DP-SGD) and calibrate one free noise multiplier inside a composition.
* :func:`analytic_gaussian_sigma` / :func:`analytic_gaussian_epsilon`: the exact (analytic)
  Gaussian mechanism of Balle & Wang (2018) for one-shot releases.
* :func:`rdp_curve_epsilon`: convert a hand-written RDP curve to (ε, δ) with dp-accounting's
  conversion (Canonne et al. 2020, Prop. 12 / Asoodeh et al. 2020).
* :func:`sgd_iter_rdp` / :func:`sgd_iter_epsilon`: one-pass fixed-order noisy SGD with random
  stopping (privacy amplification by iteration, Feldman et al. 2018: the random-stopping mixture
  of their Thm 26, evaluated without its linearization), for which dp-accounting has no event;
  :func:`sgd_iter_linearized_rdp` / :func:`sgd_iter_linearized_epsilon`: Thm 26's closed form
  (with the exact harmonic-number sum), as Hu et al. 2024 use it.

Noise multiplier convention (dp-accounting's): ``z = s / C`` where ``s`` is the std of the Gaussian
noise added to a *sum* of per-record contributions each of L2 norm <= ``C`` (the clip norm).

Neighbouring relation: ``"add_remove"`` (default; what DP-SGD papers, Opacus, TF Privacy and the
Poisson-subsampling analyses use) or ``"replace_one"``. Under replace-one the sum moves by up to
``2C``, so the same ``z`` buys less privacy: for full batches ε(z, replace-one) = ε(z/2,
add/remove). The PLD accountant implements this itself; dp-accounting's RDP accountant does not
(it treats a ``GaussianDpEvent`` identically under both relations), so for ``accountant="rdp"``
this module halves the multipliers of full-batch Gaussian events, and refuses Poisson-subsampled
events under replace-one (dp-accounting's RDP has no such bound; use the PLD accountant).
Sampling without replacement is the reverse: dp-accounting bounds it with RDP under replace-one
only (no PLD), so it needs
``AccountingOptions(accountant="rdp", neighboring_relation="replace_one")``.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
import functools
import logging
import math
import numbers
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np
from dp_accounting import dp_event, gaussian_mechanism, mechanism_calibration
from dp_accounting.pld import (
    common,
    pld_privacy_accountant,
    privacy_loss_distribution,
    privacy_loss_mechanism,
)
from dp_accounting.privacy_accountant import (
    NeighboringRelation,
    PrivacyAccountant,
    UnsupportedEventError,
)
from dp_accounting.rdp import rdp_privacy_accountant
from scipy import special

from dpprep.renames import module_renames, renamed_fields, renamed_kwargs
from dpprep.validation import (
    check_delta,
    check_epsilon,
    check_finite_array,
    check_positive,
    check_positive_int,
    check_probability,
    check_same_length,
)

Sampling = Literal["full", "poisson", "shuffle", "without_replacement"]
AccountantName = Literal["pld", "rdp"]
NeighboringRelationName = Literal["add_remove", "replace_one"]

SAMPLINGS: tuple[str, ...] = ("full", "poisson", "shuffle", "without_replacement")
ACCOUNTANTS: tuple[str, ...] = ("pld", "rdp")
NEIGHBORING_RELATIONS: tuple[str, ...] = ("add_remove", "replace_one")

#: dp-accounting's default PLD grid. Pessimistic rounding, so ε is an upper bound; on the pinned
#: DP-SGD settings it is within 1e-5 of the ε on a 10x finer grid, at 1/10 of the cost.
PLD_DISCRETIZATION = 1e-4
#: dp-accounting's default RDP orders (1.1 ... 10.9, 11 ... 63, 128, 256, 512, 1024).
RDP_ORDERS: tuple[float, ...] = tuple(float(a) for a in rdp_privacy_accountant.DEFAULT_RDP_ORDERS)
#: Most grid points one subsampled step's PLD may have. dp-accounting builds it point by point
#: over the step's privacy-loss range, which grows like 1/z² as z -> 0; 2e5 points bounds that
#: work while every pinned setting (<= 1.4e5 points: the 1e-5 grid check; the MNIST run at
#: z = 1.06 needs 6.3e4) keeps its grid. Beyond it see :func:`_budgeted`.
MAX_PLD_POINTS = 200_000
#: The same for a full-batch Gaussian's PLD, far cheaper a point (closed form, vectorised).
MAX_GAUSSIAN_PLD_POINTS = 2_000_000
#: Most grid points the composed PLD of a run may have. dp-accounting composes T steps with one
#: FFT over the composition's support (its Chernoff bound), which grows like sqrt(T) times one
#: step's range: O(N log N) work and ~150 bytes a point for N points, so 8e6 points take ~1.2 GiB
#: (10^9 Poisson steps at z = 1 would need 3e8 points, 22 GB). Every pinned setting needs <= 3e5.
#: Beyond it the run is accounted with RDP, with a warning (:func:`_budgeted`).
MAX_COMPOSED_PLD_POINTS = 8_000_000
#: The same for each PLD a calibration evaluates (~10-15 of them), so a search stays within a few
#: composed-run budgets.
MAX_CALIBRATION_PLD_POINTS = 2_000_000
#: Coarsest grid the budget may choose before falling back to RDP (pessimism <= steps · grid).
MAX_COARSE_DISCRETIZATION = 1e-2
#: Absolute tolerance on the calibrated noise multiplier.
CALIBRATION_TOL = 1e-5

_RELATIONS = {
    "add_remove": NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": NeighboringRelation.REPLACE_ONE,
}


@renamed_fields(neighbouring="neighboring_relation")
@dataclasses.dataclass(frozen=True)
class AccountingOptions:
    """How ε is accounted (hashable, so it can key caches): the dp-accounting ``accountant``
    (``"pld"`` or ``"rdp"``), the ``neighboring_relation`` of the guarantee (``"add_remove"`` or
    ``"replace_one"``) and the PLD grid ``pld_discretization`` (ignored by RDP).

    >>> options = AccountingOptions(accountant="rdp", neighboring_relation="replace_one")
    >>> options  # doctest: +NORMALIZE_WHITESPACE
    AccountingOptions(accountant='rdp', neighboring_relation='replace_one',
                      pld_discretization=0.0001)
    """

    accountant: AccountantName = "pld"
    neighboring_relation: NeighboringRelationName = "add_remove"
    pld_discretization: float = PLD_DISCRETIZATION

    def __post_init__(self) -> None:
        _check_choice(self.accountant, "accountant", ACCOUNTANTS)
        _check_choice(self.neighboring_relation, "neighboring_relation", NEIGHBORING_RELATIONS)
        object.__setattr__(
            self, "pld_discretization", _check_discretization(self.pld_discretization)
        )


# --------------------------------------------------------------------------------------------------
# Schedules and argument checks


@dataclasses.dataclass(frozen=True)
class DpSgdSchedule:
    """How a DP-SGD / DP-GD run touches the data: ``steps`` noisy steps, each on a batch drawn by
    ``sampling`` with rate ``sampling_rate`` (q).

    * ``"full"``: every step uses every record (DP-GD); q must be 1.
    * ``"poisson"``: each record joins each batch independently with probability q.
    * ``"shuffle"``: epochs over a random permutation cut into fixed-size batches, q = batch/n.
      **Accounted as if Poisson-subsampled** with the same q and steps, the number papers and
      libraries usually report. That is an assumption, not a proof: shuffled fixed-size batches
      can leak more than Poisson sampling (Chua et al. 2024, "How private are DP-SGD
      implementations?"). Use ``"poisson"`` sampling in the learner for a proved guarantee.
    * ``"without_replacement"``: each step a fresh batch of exactly B records drawn uniformly
      without replacement from ``dataset_size`` = n; q = B/n. A replace-one guarantee (Wang,
      Balle & Kasiviswanathan 2019), accounted by dp-accounting's RDP only: use
      ``AccountingOptions(accountant="rdp", neighboring_relation="replace_one")``.

    A run's schedule comes from the plan the engine runs,
    ``dpprep.plan.ExecutionPlan.create(sampler, n, batch_size=B, epochs=E).schedule()``, so the
    steps accounted are the steps taken; build one by hand only to pin a number.
    """

    steps: int
    sampling: Sampling
    sampling_rate: float = 1.0
    dataset_size: int | None = None

    def __post_init__(self) -> None:
        check_positive_int(self.steps, "steps")
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS}, got {self.sampling!r}")
        q = check_probability(self.sampling_rate, "sampling_rate")
        if self.sampling == "full" and q != 1.0:
            raise ValueError(f"sampling_rate must be 1 for sampling='full', got {q!r}")
        object.__setattr__(self, "steps", int(self.steps))
        object.__setattr__(self, "sampling_rate", q)
        if self.sampling != "without_replacement":
            if self.dataset_size is not None:
                raise ValueError(
                    "dataset_size is only for sampling='without_replacement', got "
                    f"{self.dataset_size!r}"
                )
            return
        if self.dataset_size is None:
            raise ValueError("dataset_size is required for sampling='without_replacement'")
        n = check_positive_int(self.dataset_size, "dataset_size")
        # The event needs the integer batch size; q must be exactly B/n for an integer B.
        if round(q * n) / n != q:
            raise ValueError(
                f"sampling_rate * dataset_size must be an integer batch size, got {q!r} * {n}"
            )
        object.__setattr__(self, "dataset_size", int(n))

    @property
    def batch_size(self) -> int | None:
        """B = q·n for ``"without_replacement"`` (exact), None otherwise."""
        if self.dataset_size is None:
            return None
        return round(self.sampling_rate * self.dataset_size)


def _check_choice(value: str, name: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def _check_schedule(schedule: DpSgdSchedule) -> DpSgdSchedule:
    if not isinstance(schedule, DpSgdSchedule):
        raise TypeError(f"schedule must be a DpSgdSchedule, got {type(schedule).__name__}")
    return schedule


def _check_discretization(value: float) -> float:
    value = check_positive(value, "pld_discretization")
    if value > 0.1:
        raise ValueError(f"pld_discretization must be <= 0.1, got {value!r}")
    return value


def _check_options(options: AccountingOptions) -> AccountingOptions:
    if not isinstance(options, AccountingOptions):
        raise TypeError(f"options must be an AccountingOptions, got {type(options).__name__}")
    return options


def check_delta_for_size(delta: float, n: int, *, allow_large_delta: bool = False) -> float:
    """``delta`` as the δ of a guarantee about a data set of ``n`` records: in (0, 1), and below
    ``1/n`` unless ``allow_large_delta`` is True. A mechanism that publishes one record chosen
    uniformly at random, whole, is (0, 1/n)-DP: at δ >= 1/n the guarantee allows leaking a record
    outright, so such a δ is refused unless the caller opts in explicitly (and then says so).

    >>> check_delta_for_size(1e-5, 60_000)
    1e-05
    >>> check_delta_for_size(1e-3, 1000)
    Traceback (most recent call last):
    ...
    ValueError: delta=0.001 is >= 1/n = 1/1000: a mechanism that publishes one random ...
    >>> check_delta_for_size(1e-3, 1000, allow_large_delta=True)
    0.001
    """
    delta = check_delta(delta)
    n = check_positive_int(n, "n")
    if not isinstance(allow_large_delta, (bool, np.bool_)):
        raise TypeError(
            f"allow_large_delta must be True or False, got {type(allow_large_delta).__name__}"
        )
    if delta >= 1.0 / n and not allow_large_delta:
        raise ValueError(
            f"delta={delta!r} is >= 1/n = 1/{n}: a mechanism that publishes one random record"
            " whole is (0, 1/n)-DP, so this delta allows leaking a record outright. Ask for"
            f" delta < 1/n (well below it, e.g. 1/n^1.1 = {n**-1.1:.3g}), or opt in explicitly"
            " with allow_large_delta=True (the guarantee then says so)"
        )
    return delta


# --------------------------------------------------------------------------------------------------
# Events and accountants


def gaussian_event(noise_multiplier: float) -> dp_event.GaussianDpEvent:
    """One release of a sum with Gaussian noise of std ``noise_multiplier · C`` (C = per-record
    L2 bound), e.g. the private mean of DPSGD-F."""
    return dp_event.GaussianDpEvent(check_positive(noise_multiplier, "noise_multiplier"))


def dpsgd_event(noise_multiplier: float, schedule: DpSgdSchedule) -> dp_event.DpEvent:
    """The DpEvent of a DP-SGD/DP-GD run with multiplier ``noise_multiplier`` under ``schedule``.

    ``"shuffle"`` is mapped to the Poisson event (see :class:`DpSgdSchedule`); q = 1 to plain
    Gaussian steps.
    """
    z = check_positive(noise_multiplier, "noise_multiplier")
    schedule = _check_schedule(schedule)
    step: dp_event.DpEvent = dp_event.GaussianDpEvent(z)
    if schedule.sampling == "without_replacement":
        step = dp_event.SampledWithoutReplacementDpEvent(
            schedule.dataset_size, schedule.batch_size, step
        )
    elif schedule.sampling_rate < 1.0:
        step = dp_event.PoissonSampledDpEvent(schedule.sampling_rate, step)
    return dp_event.SelfComposedDpEvent(step, schedule.steps)


def _rdp_replace_one(event: dp_event.DpEvent) -> dp_event.DpEvent:
    """Rewrites ``event`` so that dp-accounting's RDP accountant gives its replace-one guarantee:
    a Gaussian sum moves by 2C, i.e. multiplier z -> z/2, also inside a sampled-without-
    replacement step (its RDP is of a base mechanism whose z is relative to the sensitivity)."""
    if isinstance(event, dp_event.GaussianDpEvent):
        return dp_event.GaussianDpEvent(event.noise_multiplier / 2.0)
    if isinstance(event, dp_event.SampledWithoutReplacementDpEvent):
        return dp_event.SampledWithoutReplacementDpEvent(
            event.source_dataset_size, event.sample_size, _rdp_replace_one(event.event)
        )
    if isinstance(event, dp_event.SelfComposedDpEvent):
        return dp_event.SelfComposedDpEvent(_rdp_replace_one(event.event), event.count)
    if isinstance(event, dp_event.ComposedDpEvent):
        return dp_event.ComposedDpEvent([_rdp_replace_one(e) for e in event.events])
    if isinstance(event, dp_event.RepeatAndSelectDpEvent):  # private selection (dpprep.selection)
        return dp_event.RepeatAndSelectDpEvent(
            _rdp_replace_one(event.event), event.mean, event.shape
        )
    if isinstance(event, dp_event.NoOpDpEvent):
        return event
    raise ValueError(
        "accountant='rdp' with neighboring_relation='replace_one' supports only full-batch and"
        " sampled-without-replacement Gaussian events (dp-accounting's RDP accountant has no"
        f" replace-one bound for {type(event).__name__}); use accountant='pld'"
    )


# The collector of the computation running in this context (thread); None outside one.
_LEFT_OUT: contextvars.ContextVar[list[tuple] | None] = contextvars.ContextVar(
    "rdp_orders_left_out", default=None
)


class _CollectLeftOutOrders(logging.Filter):
    """Takes dp-accounting's per-order "failed to converge" records of this context off the
    ``absl`` logger and into its collector (others' records pass)."""

    def filter(self, record: logging.LogRecord) -> bool:
        collector = _LEFT_OUT.get()
        if collector is None or "failed to converge" not in str(record.msg):
            return True
        collector.append(tuple(record.args) if isinstance(record.args, tuple) else ())
        return False


def _left_out_summary(records: list[tuple]) -> str:
    # dp-accounting's record: (iterations, q, sigma, alpha); any other shape is only counted.
    known = [r for r in records if len(r) == 4]
    orders = sorted({float(r[3]) for r in known})
    sigmas = sorted({float(r[2]) for r in known})
    detail = (
        f" (orders {orders[0]:g} to {orders[-1]:g}, noise multipliers {sigmas[0]:.4g} to "
        f"{sigmas[-1]:.4g})"
        if known
        else ""
    )
    return (
        f"dp-accounting's RDP series did not converge {len(records)} times{detail} and left "
        "those orders out: ε is the minimum over the other orders, still an upper bound"
    )


#: Where the accounting functions log what is worth knowing but changes no guarantee (INFO).
logger = logging.getLogger(__name__)


@contextlib.contextmanager
def rdp_orders_summarised() -> Iterator[None]:
    """Within the block, dp-accounting's per-order "failed to converge" warnings (one calibration
    can log dozens on the ``absl`` logger) become one INFO record on this module's :data:`logger`
    at its end; nested blocks report in the outermost. Quiet by default: dp-accounting leaves such
    an order out, so ε is the minimum over the other orders, still an upper bound (at most a
    looser one). The accounting functions of this module run inside one; show the record with
    ``logging.getLogger("dpprep").setLevel(logging.INFO)`` and a handler."""
    if _LEFT_OUT.get() is not None:
        yield
        return
    collected: list[tuple] = []
    token = _LEFT_OUT.set(collected)
    collect = _CollectLeftOutOrders()
    absl = logging.getLogger("absl")
    absl.addFilter(collect)
    try:
        yield
    finally:
        absl.removeFilter(collect)
        _LEFT_OUT.reset(token)
    if collected:
        logger.info("%s", _left_out_summary(collected))


def _make_accountant(options: AccountingOptions) -> Callable[[], PrivacyAccountant]:
    if options.accountant == "pld":
        relation, d = _RELATIONS[options.neighboring_relation], options.pld_discretization
        return lambda: pld_privacy_accountant.PLDAccountant(
            relation, value_discretization_interval=d
        )
    relation = _RELATIONS[options.neighboring_relation]
    return lambda: rdp_privacy_accountant.RdpAccountant(RDP_ORDERS, relation)


def _has_without_replacement(event: dp_event.DpEvent) -> bool:
    if isinstance(event, dp_event.SampledWithoutReplacementDpEvent):
        return True
    if isinstance(event, (dp_event.SelfComposedDpEvent, dp_event.RepeatAndSelectDpEvent)):
        return _has_without_replacement(event.event)
    if isinstance(event, dp_event.ComposedDpEvent):
        return any(_has_without_replacement(e) for e in event.events)
    return False


def _prepare(event: dp_event.DpEvent, options: AccountingOptions) -> dp_event.DpEvent:
    if _has_without_replacement(event) and options != dataclasses.replace(
        options, accountant="rdp", neighboring_relation="replace_one"
    ):
        # dp-accounting: no PLD for it at all, RDP only under REPLACE_ONE (WBK19 is replace-one).
        raise ValueError(
            "sampling='without_replacement' is a replace-one guarantee that only dp-accounting's "
            "RDP accountant bounds; pass options=AccountingOptions(accountant='rdp', "
            f"neighboring_relation='replace_one') (got accountant={options.accountant!r}, "
            f"neighboring_relation={options.neighboring_relation!r})"
        )
    if options.accountant == "rdp" and options.neighboring_relation == "replace_one":
        return _rdp_replace_one(event)
    return event


def _check_events(events: Iterable[dp_event.DpEvent], name: str) -> list[dp_event.DpEvent]:
    events = list(events)
    for e in events:
        if not isinstance(e, dp_event.DpEvent):
            raise TypeError(f"{name} must contain dp_accounting DpEvents, got {type(e).__name__}")
    return events


# --------------------------------------------------------------------------------------------------
# Bounding the PLD accountant's work


def _loss_range(z: float, q: float, neighboring_relation: str) -> float:
    """Width of one step's privacy-loss range as dp-accounting's PLD discretises it (its
    truncation at tail mass e^-50), from its own privacy-loss objects; nothing is discretised."""
    adjacencies = (
        (privacy_loss_mechanism.AdjacencyType.REPLACE,)
        if neighboring_relation == "replace_one"
        else (privacy_loss_mechanism.AdjacencyType.ADD, privacy_loss_mechanism.AdjacencyType.REMOVE)
    )
    width = 0.0
    for adjacency in adjacencies:
        loss = privacy_loss_mechanism.GaussianPrivacyLoss(
            z, sampling_prob=q, adjacency_type=adjacency, log_mass_truncation_bound=-50
        )
        tail = loss.privacy_loss_tail()
        lo, hi = tail.lower_x_truncation, tail.upper_x_truncation
        width = max(width, abs(loss.privacy_loss(lo) - loss.privacy_loss(hi)))
    return width


def _gaussian_parts(
    event: dp_event.DpEvent, count: int = 1
) -> Iterator[tuple[float, float, int, bool]]:
    """``(z, q, times composed, Poisson-subsampled?)`` of each Gaussian part of ``event`` with
    ``z > 0`` (a plain Gaussian has ``q = 1``); other events are skipped (not estimated)."""
    if isinstance(event, dp_event.SelfComposedDpEvent):
        yield from _gaussian_parts(event.event, count * event.count)
    elif isinstance(event, dp_event.ComposedDpEvent):
        for part in event.events:
            yield from _gaussian_parts(part, count)
    elif isinstance(event, dp_event.GaussianDpEvent) and event.noise_multiplier > 0:
        yield event.noise_multiplier, 1.0, count, False
    elif (
        isinstance(event, dp_event.PoissonSampledDpEvent)
        and isinstance(event.event, dp_event.GaussianDpEvent)
        and event.event.noise_multiplier > 0
        and event.sampling_probability > 0
    ):
        yield event.event.noise_multiplier, event.sampling_probability, count, True


def _step_ranges(
    event: dp_event.DpEvent, neighboring_relation: str
) -> list[tuple[float, int, int]]:
    """(loss range of one PLD dp-accounting builds, how many times it is composed, its budget of
    grid points) for the Gaussian parts of ``event``; other events are not estimated."""
    # The accountant builds T plain Gaussian steps as one Gaussian with z/sqrt(T).
    return [
        (
            (_loss_range(z, q, neighboring_relation), c, MAX_PLD_POINTS)
            if poisson
            else (
                _loss_range(z / math.sqrt(c), 1.0, neighboring_relation),
                1,
                MAX_GAUSSIAN_PLD_POINTS,
            )
        )
        for z, q, c, poisson in _gaussian_parts(event)
    ]


#: Grid points of the coarse PLD on which :func:`_composed_points` estimates a composition.
_ESTIMATE_POINTS = 2000
#: dp-accounting keeps a step's PLD of <= 1000 points sparse and, before self-composing it T
#: times, computes ``size ** T`` as an exact integer (to decide whether to go dense): T·log2(size)
#: bits, at a cost that grows faster than the bit count (prohibitive beyond 1e8 bits, e.g. 10^7
#: steps at z ~ 50). Over this many bits the run is accounted with RDP instead. Pinned settings
#: need <= 1e5.
MAX_SPARSE_POWER_BITS = 5_000_000
_SPARSE_SIZE = 1000  # dp-accounting's pld_pmf._MAX_PMF_SPARSE_SIZE


def _sparse_power_bits(
    event: dp_event.DpEvent, discretization: float, neighboring_relation: str
) -> float:
    """Bits of the largest ``size ** count`` dp-accounting computes for a sparse (<= 1000
    points, with a 10 % margin on the estimated size) Poisson step self-composed ``count``
    times in ``event`` (see :data:`MAX_SPARSE_POWER_BITS`)."""
    bits = 0.0
    for z, q, count, poisson in _gaussian_parts(event):
        if poisson and count > 1:
            size = _loss_range(z, q, neighboring_relation) / discretization + 2
            if size <= 1.1 * _SPARSE_SIZE:
                bits = max(bits, count * math.log2(size))
    return bits


def _composed_points(
    event: dp_event.DpEvent, discretization: float, neighboring_relation: str
) -> float:
    """Grid points of the PLD dp-accounting composes for the Gaussian parts of ``event`` at
    ``discretization`` (parts summed; other events are not estimated), before building it.

    A self-composed Poisson step is convolved by FFT over the support its Chernoff bound
    (``common.compute_self_convolve_bounds``, tail mass 1e-15) allows. That support, in units of
    privacy loss, does not depend on the grid: it is computed here with dp-accounting's own bound
    on a coarse copy of one step's PLD (:data:`_ESTIMATE_POINTS` points, cheap) and divided by
    the real grid, plus one step's range for the coarse grid's rounding (an over-estimate by a
    few %, never under on the settings checked).
    """
    total = 0.0
    for z, q, count, poisson in _gaussian_parts(event):
        # T Gaussian steps are one Gaussian with z/sqrt(T): nothing is self-composed.
        if not poisson:
            total += _loss_range(z / math.sqrt(count), 1.0, neighboring_relation) / discretization
            continue
        width = _loss_range(z, q, neighboring_relation)
        if count == 1:
            total += width / discretization
            continue
        coarse = width / _ESTIMATE_POINTS
        pld = privacy_loss_distribution.from_gaussian_mechanism(
            z,
            sampling_prob=q,
            value_discretization_interval=coarse,
            neighboring_relation=_RELATIONS[neighboring_relation],
        )
        support = 0.0
        # The remove and add halves are composed one after the other; the larger one decides.
        for pmf in (pld._pmf_remove, pld._pmf_add):  # noqa: SLF001 (no public accessor)
            probs = pmf.to_dense_pmf()._probs  # noqa: SLF001
            lo, hi = common.compute_self_convolve_bounds(probs, count, 1e-15)
            support = max(support, (hi - lo) * coarse)
        total += (support + width) / discretization
    return total


@rdp_orders_summarised()
def _rdp_can(event: dp_event.DpEvent, options: AccountingOptions) -> bool:
    rdp = dataclasses.replace(options, accountant="rdp")
    try:  # composing an RDP is cheap (closed forms per order)
        _make_accountant(rdp)().compose(_prepare(event, rdp))
    except (ValueError, UnsupportedEventError):
        return False
    return True


def _budgeted(
    event: dp_event.DpEvent,
    options: AccountingOptions,
    composed_budget: float = MAX_COMPOSED_PLD_POINTS,
) -> tuple[AccountingOptions, str | None]:
    """The options to account ``event`` with so that no step's PLD exceeds
    :data:`MAX_PLD_POINTS` and the composed PLD ``composed_budget`` points (default
    :data:`MAX_COMPOSED_PLD_POINTS`), and the reason when they differ from ``options``.

    Within budget: ``options`` unchanged. A step over budget: the PLD grid is coarsened to fit
    (pessimistic rounding keeps ε an upper bound, loose by at most steps · grid) if that grid is
    at most :data:`MAX_COARSE_DISCRETIZATION`. A composition over budget (many steps) is not
    coarsened (the pessimism grows with the steps): like a step beyond any grid it is accounted
    with RDP (a valid, looser upper bound) where dp-accounting's RDP supports the event; else
    ValueError saying what to do.
    """
    if options.accountant != "pld":
        return options, None
    ranges = _step_ranges(event, options.neighboring_relation)
    if not ranges:
        return options, None
    width, _, budget = max(ranges, key=lambda r: r[0] / r[2])
    points = width / options.pld_discretization
    if points <= budget:
        return _composition_budgeted(event, options, None, composed_budget)
    grid = width / budget
    steps = sum(c for _, c, _ in ranges)
    why = (
        f"one step's privacy-loss range ({width:.3g}) needs {points:.3g} PLD grid points at "
        f"pld_discretization={options.pld_discretization:g} (budget {budget:g})"
    )
    if grid <= MAX_COARSE_DISCRETIZATION:
        coarse = dataclasses.replace(options, pld_discretization=grid)
        return _composition_budgeted(
            event,
            coarse,
            f"{why}; PLD grid coarsened to {grid:.3g}: ε stays an upper bound, pessimistic by at "
            f"most {steps} steps x {grid:.3g} = {steps * grid:.3g}",
            composed_budget,
        )
    if _rdp_can(event, options):
        return (
            dataclasses.replace(options, accountant="rdp"),
            (
                f"{why}, too many even on a grid of {MAX_COARSE_DISCRETIZATION:g}; accounted with"
                " RDP instead (a valid, looser upper bound; pass"
                " AccountingOptions(accountant='rdp') to ask for it)"
            ),
        )
    raise ValueError(
        f"{why}, too many even on a grid of {MAX_COARSE_DISCRETIZATION:g}, and dp-accounting's "
        "RDP accountant cannot account this event under neighboring_relation="
        f"{options.neighboring_relation!r}: use more noise (the noise multiplier is tiny), or "
        "neighboring_relation='add_remove' with accountant='rdp'"
    )


def _composition_budget_cause(
    event: dp_event.DpEvent, options: AccountingOptions, composed_budget: float
) -> tuple[str, str] | tuple[None, None]:
    """Why composing ``event``'s PLD on ``options``' grid is over ``composed_budget`` points
    (or :data:`MAX_SPARSE_POWER_BITS`), and what helps; (None, None) within budget."""
    bits = _sparse_power_bits(event, options.pld_discretization, options.neighboring_relation)
    if bits > MAX_SPARSE_POWER_BITS:
        return (
            (
                f"dp-accounting would compute a {bits:.3g}-bit integer to compose the run's sparse"
                f" PLD (budget {MAX_SPARSE_POWER_BITS:g} bits: minutes of work beyond ~1e8; the"
                " steps are many and the noise large)"
            ),
            "use fewer steps",
        )
    points = _composed_points(event, options.pld_discretization, options.neighboring_relation)
    if points <= composed_budget:
        return None, None
    return (
        (
            f"composing the run's PLD needs about {points:.3g} grid points at"
            f" pld_discretization={options.pld_discretization:.3g} (budget {composed_budget:g};"
            f" time and memory grow with them: ~{points * 100 / 2**30:.2g} GiB)"
        ),
        "use fewer steps or more noise",
    )


def _composition_budgeted(
    event: dp_event.DpEvent, options: AccountingOptions, why: str | None, composed_budget: float
) -> tuple[AccountingOptions, str | None]:
    """``(options, why)`` if the composed PLD fits ``composed_budget``; else RDP, or ValueError
    where dp-accounting's RDP cannot account ``event`` (see :func:`_budgeted`)."""
    cause, remedy = _composition_budget_cause(event, options, composed_budget)
    if cause is None:
        return options, why
    if _rdp_can(event, options):
        return (
            dataclasses.replace(options, accountant="rdp"),
            (
                f"{cause}; accounted with RDP instead (a valid, looser upper bound; pass "
                "AccountingOptions(accountant='rdp') to ask for it)"
            ),
        )
    raise ValueError(
        f"{cause}, and dp-accounting's RDP accountant cannot account this event under "
        f"neighboring_relation={options.neighboring_relation!r}: {remedy}, or "
        "neighboring_relation='add_remove' with accountant='rdp'"
    )


@rdp_orders_summarised()
def _epsilon_of(
    event: dp_event.DpEvent,
    delta: float,
    options: AccountingOptions,
    composed_budget: float = MAX_COMPOSED_PLD_POINTS,
) -> tuple[float, str | None]:
    options, why = _budgeted(event, options, composed_budget)
    eps = _make_accountant(options)().compose(_prepare(event, options)).get_epsilon(delta)
    return float(eps), why


@rdp_orders_summarised()
def composed_epsilon(
    events: Sequence[dp_event.DpEvent],
    delta: float,
    *,
    options: AccountingOptions = AccountingOptions(),
) -> float:
    """ε at ``delta`` of the (adaptive) composition of ``events``, accounted as ``options`` say.

    Two Gaussians compose like one with ``1/z² = 1/z1² + 1/z2²``:

    >>> round(composed_epsilon([gaussian_event(3.0), gaussian_event(4.0)], 1e-5), 3)
    1.627
    >>> round(analytic_gaussian_epsilon(2.4, 1e-5), 3)  # 1/2.4² = 1/3² + 1/4²
    1.627
    """
    delta = check_delta(delta)
    options = _check_options(options)
    events = _check_events(events, "events")
    if not events:
        raise ValueError("events must contain at least one DpEvent")
    eps, why = _epsilon_of(dp_event.ComposedDpEvent(events), delta, options)
    if why:
        warnings.warn(why, stacklevel=2)
    return eps


def epsilon(
    noise_multiplier: float,
    delta: float,
    schedule: DpSgdSchedule,
    *,
    options: AccountingOptions = AccountingOptions(),
) -> float:
    """ε at ``delta`` of DP-SGD/DP-GD with multiplier ``noise_multiplier`` run by ``schedule``.

    For ``"shuffle"`` schedules this is the customary Poisson-assumption number, not a proof
    (see :class:`DpSgdSchedule`).

    >>> sched = DpSgdSchedule(steps=512, sampling="poisson", sampling_rate=0.1)
    >>> rdp = AccountingOptions(accountant="rdp")
    >>> round(epsilon(3.0, 1e-6, sched), 3)
    3.77
    >>> round(epsilon(3.0, 1e-6, sched, options=rdp), 3)
    4.051
    """
    z = check_positive(noise_multiplier, "noise_multiplier")
    delta = check_delta(delta)
    schedule = _check_schedule(schedule)
    return composed_epsilon([dpsgd_event(z, schedule)], delta, options=_check_options(options))


# --------------------------------------------------------------------------------------------------
# Calibration


class _OutOfReach(ValueError):
    """No multiplier in the bracket search's range meets the target. ``side`` is ``"low"`` when
    even the least noise tried leaves ε below the target (the target is too large), ``"high"``
    when even the most noise tried leaves it above."""

    def __init__(self, message: str, side: str):
        super().__init__(message)
        self.side = side


#: Factors a bracket search may multiply or divide its guess by (2^200 ~ 1e60 with RDP's
#: factor 2, 1.25^200 ~ 3e19 with PLD's 1.25).
_BRACKET_STEPS = 200


def _bracket(
    eps_of: Callable[[float], float], target: float, guess: float, factor: float
) -> tuple[float, float]:
    """Geometric search from ``guess`` for ``lo < hi`` with eps_of(lo) > target >= eps_of(hi)
    (ε decreases in the noise multiplier). Starting near the answer avoids tiny multipliers,
    whose PLDs are huge and slow. :class:`_OutOfReach` (a ValueError saying which target to ask
    for) when the search range holds no answer."""
    if (eps := eps_of(guess)) > target:
        lo, hi = guess, guess * factor
        for _ in range(_BRACKET_STEPS):
            if (eps := eps_of(hi)) <= target:
                return lo, hi
            lo, hi = hi, hi * factor
        raise _OutOfReach(
            f"target_epsilon={target!r} is out of reach: even noise_multiplier={lo:.3g} gives "
            f"epsilon={eps:.4g} > target; ask for a larger target_epsilon or delta",
            "high",
        )
    lo, hi = guess / factor, guess
    for _ in range(_BRACKET_STEPS):
        if (eps := eps_of(lo)) > target:
            return lo, hi
        lo, hi = lo / factor, lo
    raise _OutOfReach(
        f"target_epsilon={target!r} is out of reach: even noise_multiplier={hi:.3g} (next to no "
        f"noise) gives only epsilon={eps:.4g}; ask for a smaller target_epsilon",
        "low",
    )


@rdp_orders_summarised()
def composed_calibrate(
    make_event: Callable[[float], dp_event.DpEvent],
    target_epsilon: float,
    delta: float,
    *,
    options: AccountingOptions = AccountingOptions(),
    initial_guess: float = 1.0,
    tol: float = CALIBRATION_TOL,
    accounted_with: list[AccountingOptions] | None = None,
) -> float:
    """Smallest multiplier ``z`` (within ``tol``) with ε(``make_event(z)``) <= ``target_epsilon``.

    ``make_event`` maps the free multiplier to the whole composed event (fixed parts included);
    ε must decrease in ``z``. The returned value always satisfies the target (dp-accounting's
    ``calibrate_dp_mechanism`` guarantees a non-positive gap), and ``z - tol`` (up to rounding)
    does not: dp-accounting's search ends on a bracket narrower than ``tol`` whose other end
    misses the target, so ε(``z - 2·tol``) > ``target_epsilon`` wherever ε strictly decreases in
    ``z``. Both are on the accounting the search ran on: ``options``, or the fallback its work
    budget chose (RDP, or a coarser PLD grid; a warning says which); when ``accounted_with`` is
    a list, those options are appended to it. For the PLD accountant an RDP calibration (fast;
    RDP ε >= PLD ε, so usually just above the answer) seeds the bracket. Not cached; see
    :func:`calibrate_noise` for the cached DP-SGD case.
    """
    target_epsilon = check_epsilon(target_epsilon, "target_epsilon")
    delta = check_delta(delta)
    options = _check_options(options)
    initial_guess = check_positive(initial_guess, "initial_guess")
    tol = check_positive(tol, "tol")
    if not callable(make_event):
        raise TypeError("make_event must be callable")
    z, search = _calibrate(make_event, target_epsilon, delta, options, initial_guess, tol)
    if accounted_with is not None:
        accounted_with.append(search)
    return z


def _calibrate(
    make_event: Callable[[float], dp_event.DpEvent],
    target_epsilon: float,
    delta: float,
    options: AccountingOptions,
    initial_guess: float,
    tol: float,
) -> tuple[float, AccountingOptions]:
    """:func:`composed_calibrate` on checked arguments: the multiplier and the options the search
    evaluated ε with (an accountant of those options composing ``_prepare(make_event(z), search)``,
    which is what :func:`_epsilon_of` computes where they fit its budget)."""
    if options.accountant == "pld":
        # An event the PLD accountant cannot bound (sampling without replacement) is refused
        # before the RDP seed below, which would otherwise run a whole calibration first.
        _prepare(make_event(initial_guess), options)
        # dp-accounting's RDP has no replace-one Poisson bound. Replace-one moves the sum by 2C,
        # so twice the add/remove multiplier is a good guess there (only a guess: the bracket
        # search below checks it). Events RDP cannot handle at all start from initial_guess.
        for relation, scale in ((options.neighboring_relation, 1.0), ("add_remove", 2.0)):
            try:
                initial_guess = (
                    scale
                    * _calibrate(
                        make_event,
                        target_epsilon,
                        delta,
                        AccountingOptions(accountant="rdp", neighboring_relation=relation),
                        initial_guess,
                        1e-3,
                    )[0]
                )
                break
            except _OutOfReach as err:
                # RDP's ε is above the PLD's at every z, over a wider range of z than the PLD
                # search below tries: a target RDP cannot reach with next to no noise, the PLD
                # cannot either. Say so now rather than after a search through ever larger PLDs.
                if err.side == "low" and relation == options.neighboring_relation:
                    raise
                continue
            except (ValueError, UnsupportedEventError):
                continue

        # A large target puts the answer at a small z, where every PLD evaluation is huge (the
        # loss range grows like 1/z^2), and a long run composes a large PLD at any z: if the PLD
        # at the RDP answer is over budget (MAX_CALIBRATION_PLD_POINTS for the composition), the
        # whole calibration runs on RDP (valid, looser) rather than on coarse grids.
        seed_event = make_event(initial_guess)
        seed_options, _ = _budgeted(seed_event, options, MAX_CALIBRATION_PLD_POINTS)
        if seed_options != options and _rdp_can(seed_event, options):
            rdp = dataclasses.replace(options, accountant="rdp")
            width, _, budget = max(
                _step_ranges(seed_event, options.neighboring_relation), key=lambda r: r[0] / r[2]
            )
            cause = (
                f"one step's PLD needs {width / options.pld_discretization:.3g} grid points "
                f"(budget {budget:g})"
                if width / options.pld_discretization > budget
                else _composition_budget_cause(seed_event, options, MAX_CALIBRATION_PLD_POINTS)[0]
            )
            warnings.warn(
                "calibrated with RDP (a valid, looser upper bound), not PLD: near the answer "
                f"(z={initial_guess:.4g}) {cause}, too slow for a search; pass "
                "AccountingOptions(accountant='rdp') to ask for RDP",
                stacklevel=3,
            )
            return _calibrate(make_event, target_epsilon, delta, rdp, initial_guess, tol)

    reasons: list[str] = []

    def eps_of(z: float) -> float:
        eps, why = _epsilon_of(make_event(z), delta, options, MAX_CALIBRATION_PLD_POINTS)
        if why:
            reasons.append(why)
        return eps

    lo, hi = _bracket(
        eps_of, target_epsilon, initial_guess, 1.25 if options.accountant == "pld" else 2.0
    )
    # One grid for the whole search (monotone in z): the one the smallest multiplier needs.
    search, why = _budgeted(make_event(lo), options, MAX_CALIBRATION_PLD_POINTS)
    if why or reasons:
        warnings.warn(f"calibration: {why or reasons[-1]}", stacklevel=3)
    if search != options:  # re-bracket on that grid, so that both ends are on it
        lo, hi = _bracket(
            lambda z: _epsilon_of(make_event(z), delta, search, MAX_CALIBRATION_PLD_POINTS)[0],
            target_epsilon,
            hi,
            1.25,
        )
    z = mechanism_calibration.calibrate_dp_mechanism(
        _make_accountant(search),
        lambda z: _prepare(make_event(z), search),
        target_epsilon,
        delta,
        mechanism_calibration.ExplicitBracketInterval(lo, hi),
        tol=tol,
    )
    return float(z), search


# A calibration's answer checked without recomputing it: what lets a store elsewhere (the
# experiments' disk cache) hand back a multiplier that someone else could have edited.


def _lower_check_point(z: float) -> float | None:
    """Where a calibrated ``z`` must miss the target: ``z - 2 * CALIBRATION_TOL`` (None if <= 0)."""
    low = z - 2.0 * CALIBRATION_TOL
    return low if low > 0 else None


def _unaccepted_accounting(search: AccountingOptions, options: AccountingOptions) -> str | None:
    """Why a calibration asked for ``options`` never searches on ``search``; None if it may:
    ``options`` themselves, and for a PLD request the fallbacks of :func:`composed_calibrate`
    (RDP, or a PLD grid coarser than asked up to :data:`MAX_COARSE_DISCRETIZATION`). Each is an
    upper bound on ε under the requested neighbouring relation, so a multiplier meeting the target
    on it is private whichever one is named."""
    if search == options:
        return None
    if options.accountant != "pld":
        return f"a calibration with {options} never falls back to {search}"
    if search.accountant == "pld" and not (
        options.pld_discretization < search.pld_discretization <= MAX_COARSE_DISCRETIZATION
    ):
        return (
            f"pld_discretization={search.pld_discretization!r} is not a grid the work budget may"
            " choose"
        )
    return None


def _unneeded_fallback(
    make_event: Callable[[float], dp_event.DpEvent],
    z: float,
    search: AccountingOptions,
    options: AccountingOptions,
) -> str | None:
    """Why the fallback ``search`` is not needed at ``z`` (so that a stored value cannot swap the
    requested accounting for a looser one where the search would not): a calibration falls back
    only where ``options`` are over its work budget. None if ``search`` is ``options``, or they
    are over that budget at the lower check point. Cheap (no PLD of the run is built)."""
    if search == options:
        return None
    point = _lower_check_point(z) or z
    try:
        if _budgeted(make_event(point), options, MAX_CALIBRATION_PLD_POINTS)[0] != options:
            return None
    except (ValueError, UnsupportedEventError):  # options cannot account it there at all
        return None
    return (
        f"a calibration falls back to {search} only where {options} are over its work budget, and"
        f" at z={point!r} they are not"
    )


def _over_budget(
    make_event: Callable[[float], dp_event.DpEvent], z: float, search: AccountingOptions
) -> str | None:
    """Why evaluating ε on ``search`` at the check points of ``z`` would exceed the budget of an
    ε evaluation (:data:`MAX_COMPOSED_PLD_POINTS`); None if it would not. Cheap."""
    low = _lower_check_point(z)
    try:
        for point in (z,) if low is None else (z, low):
            if _budgeted(make_event(point), search, MAX_COMPOSED_PLD_POINTS)[0] != search:
                return f"evaluating epsilon on {search} at z={point!r} is over the work budget"
    except (ValueError, UnsupportedEventError) as err:
        return str(err)
    return None


def _check_calibration_args(
    make_event: Callable[[float], dp_event.DpEvent],
    noise_multiplier: float,
    accounted_with: AccountingOptions,
    options: AccountingOptions,
) -> tuple[float, AccountingOptions, AccountingOptions]:
    if not callable(make_event):
        raise TypeError("make_event must be callable")
    z = check_positive(noise_multiplier, "noise_multiplier")
    return z, _check_options(accounted_with), _check_options(options)


def check_calibration_accounting(
    make_event: Callable[[float], dp_event.DpEvent],
    noise_multiplier: float,
    accounted_with: AccountingOptions,
    options: AccountingOptions,
) -> str | None:
    """The part of :func:`check_calibration` that needs no ε: why it would refuse
    ``noise_multiplier`` even as the honest answer of a calibration asked for ``options`` that
    searched on ``accounted_with``, or None if it accepts any multiplier passing its two ε checks.
    It refuses an accounting a calibration never searches on (``options``, or for a PLD request
    the fallbacks of :func:`composed_calibrate`: RDP, or a PLD grid up to
    :data:`MAX_COARSE_DISCRETIZATION`), ε over an evaluation's work budget at the check points,
    and a fallback where ``options`` are within the calibration's budget at ``z - 2 *
    CALIBRATION_TOL`` (a search falling back further below its answer than that; rare). Cheap:
    no PLD of the run is built. A store that keeps only values passing this keeps only values
    :func:`check_calibration` will accept when they come back.

    >>> sched = DpSgdSchedule(100, "poisson", 0.05)
    >>> make_event = lambda z: dpsgd_event(z, sched)
    >>> pld, rdp = AccountingOptions(), AccountingOptions(accountant="rdp")
    >>> check_calibration_accounting(make_event, 4.0, pld, pld) is None
    True
    >>> # PLD is cheap here
    >>> print(check_calibration_accounting(make_event, 4.0, rdp, pld))
    a calibration falls back to ...(accountant='rdp', ...) only where ...
    at z=3.99998 they are not
    """
    z, search, options = _check_calibration_args(
        make_event, noise_multiplier, accounted_with, options
    )
    return (
        _unaccepted_accounting(search, options)
        or _over_budget(make_event, z, search)
        or _unneeded_fallback(make_event, z, search, options)
    )


@rdp_orders_summarised()
def check_calibration(
    make_event: Callable[[float], dp_event.DpEvent],
    noise_multiplier: float,
    target_epsilon: float,
    delta: float,
    accounted_with: AccountingOptions,
    options: AccountingOptions,
) -> str | None:
    """Why ``noise_multiplier`` is not what calibrating ``make_event`` to ``(target_epsilon,
    delta)`` under ``options`` returns (:func:`composed_calibrate`), or None if it is: a value
    stored elsewhere, which anyone could have edited, checked without recomputing it.

    ``accounted_with`` is the accounting the calibration searched on (what
    :func:`composed_calibrate` appends to its ``accounted_with`` list): ``options``, or a fallback
    its work budget may choose (:func:`check_calibration_accounting`); each is an upper bound on
    ε under the requested neighbouring relation. On it, evaluated exactly as the search evaluates
    it (same accountant, event and float, within an ε evaluation's work budget
    :data:`MAX_COMPOSED_PLD_POINTS`), what a calibration guarantees of its answer ``z``:

    * ε(z) <= ``target_epsilon``: never too little noise;
    * ε(z - 2·:data:`CALIBRATION_TOL`) > ``target_epsilon``: not wastefully much (skipped if that
      point is <= 0);
    * a fallback accounting only where the search would fall back (``options`` over its work
      budget at z - 2·:data:`CALIBRATION_TOL`).

    So a multiplier too small for the target is never accepted, nor one more than
    ``2 * CALIBRATION_TOL`` above the smallest on that accounting. The reason names both ε values
    where it got that far. Costs two ε evaluations, about a sixth of a calibration.

    >>> sched = DpSgdSchedule(100, "poisson", 0.05)
    >>> rdp = AccountingOptions(accountant="rdp")
    >>> make_event = lambda z: dpsgd_event(z, sched)
    >>> z = composed_calibrate(make_event, 2.0, 1e-5, options=rdp)
    >>> check_calibration(make_event, z, 2.0, 1e-5, rdp, rdp) is None
    True
    >>> print(check_calibration(make_event, 0.99 * z, 2.0, 1e-5, rdp, rdp))
    too little noise for the target: epsilon=2.034... at noise_multiplier=1.430...
    misses it at z...
    """
    z, search, options = _check_calibration_args(
        make_event, noise_multiplier, accounted_with, options
    )
    target_epsilon = check_epsilon(target_epsilon, "target_epsilon")
    delta = check_delta(delta)
    why = _unaccepted_accounting(search, options)
    if why is not None:
        return why
    low = _lower_check_point(z)
    try:
        # Within budget this is exactly the search's evaluation (same accountant, event, float);
        # over it, the budget's looser accounting, which only serves the reason (it is refused).
        eps, over = _epsilon_of(make_event(z), delta, search, MAX_COMPOSED_PLD_POINTS)
        eps_low, over_low = (
            (math.inf, None)
            if low is None
            else _epsilon_of(make_event(low), delta, search, MAX_COMPOSED_PLD_POINTS)
        )
    except (ValueError, UnsupportedEventError) as err:
        return f"cannot account it on {search} ({err})"
    problem: str | None
    note = (
        f" (epsilons on the work budget's looser accounting: {over or over_low})"
        if over or over_low
        else ""
    )
    if eps > target_epsilon:
        problem = (
            "not shown to meet the target" if note else "too little noise for the target"
        ) + note
    elif eps_low <= target_epsilon:
        problem = "more noise than the target needs" + note
    elif note:
        problem = "its accounting is over the work budget at its multiplier" + note
    else:
        problem = _unneeded_fallback(make_event, z, search, options)
    if problem is None:
        return None
    return (
        f"{problem}: epsilon={eps!r} at noise_multiplier={z!r} and epsilon={eps_low!r} at"
        f" z - 2*CALIBRATION_TOL={low!r}, on {search}, where a calibration to"
        f" target_epsilon={target_epsilon!r} meets the target at z and misses it at"
        " z - 2*CALIBRATION_TOL"
    )


def _flatten(events: Iterable[dp_event.DpEvent]) -> tuple[dp_event.DpEvent, ...]:
    out: list[dp_event.DpEvent] = []
    for e in events:
        if isinstance(e, dp_event.ComposedDpEvent):
            out.extend(_flatten(e.events))
        else:
            out.append(e)
    return tuple(out)


@rdp_orders_summarised()
def calibrate_noise(
    target_epsilon: float,
    delta: float,
    schedule: DpSgdSchedule,
    *,
    fixed_events: Sequence[dp_event.DpEvent] = (),
    options: AccountingOptions = AccountingOptions(),
    allow_large_delta: bool = False,
) -> float:
    """Smallest DP-SGD multiplier meeting ``(target_epsilon, delta)`` under ``schedule``,
    composed with ``fixed_events`` (e.g. ``(gaussian_event(sigma_F),)`` for DPSGD-F's private
    mean). Within :data:`CALIBRATION_TOL` of the optimum, never above the target ε.

    Where the schedule knows the data set's size n (``"without_replacement"``), ``delta >= 1/n``
    is refused (:func:`check_delta_for_size`) unless ``allow_large_delta=True``.

    Cached on the exact arguments (no rounding: a slightly tighter target must never get the
    multiplier calibrated for a looser one): a sweep pays one calibration per distinct setting.
    ``calibrate_noise.cache_info()`` / ``cache_clear()`` expose the in-memory cache. The library
    writes no file: a caller may install a store of its own for a ``with`` block
    (:func:`calibration_store`), which then answers each calibration this cache misses, e.g. the
    experiments' on-disk cache (``experiments.results.calibrations``). Whatever a store answers
    is verified here before it is used or cached: a positive number at which ε meets the target
    (one ε evaluation); anything else (too little noise, a non-number, an exception) is a
    warning and a calibration without the store. So a store can cost time, never privacy, and
    only verified values enter the in-memory cache.

    >>> round(calibrate_noise(1.0, 1e-6, DpSgdSchedule(512, "poisson", 0.1)), 3)
    9.662
    """
    target_epsilon = check_epsilon(target_epsilon, "target_epsilon")
    delta = check_delta(delta)
    schedule = _check_schedule(schedule)
    options = _check_options(options)
    if schedule.dataset_size is not None:
        check_delta_for_size(delta, schedule.dataset_size, allow_large_delta=allow_large_delta)
    fixed = _flatten(_check_events(fixed_events, "fixed_events"))
    try:
        hash(fixed)
    except TypeError as err:
        raise ValueError(
            "fixed_events must be hashable DpEvents (e.g. GaussianDpEvent, SelfComposedDpEvent "
            "of one); pass a ComposedDpEvent's parts instead of nesting it"
        ) from err
    key = (target_epsilon, delta, schedule, fixed, options)
    fresh = _FRESH_CALIBRATIONS.get()
    if not fresh:
        cached = _CALIBRATIONS.get(key)
        if cached is not None:
            return cached
    else:
        _CALIBRATIONS.count_miss()
    # On a miss only: a cached multiplier passed this check when it was calibrated (an ε
    # evaluation of its own, ~40 ms for a DPSGD-F mean, that every call paid before).
    if fixed:
        spent = composed_epsilon(fixed, delta, options=options)
        if spent >= target_epsilon:
            raise ValueError(
                f"fixed_events alone already spend epsilon={spent:.4g} >= "
                f"target_epsilon={target_epsilon!r}"
            )
    z = _calibrate_noise_uncached(
        target_epsilon, delta, schedule, fixed, options, None if fresh else _CALIBRATION_STORE.get()
    )
    _CALIBRATIONS.put(key, z)
    return z


class CalibrationStore(Protocol):
    """Where :func:`calibrate_noise` gets the calibrations its in-memory cache misses, while
    installed with :func:`calibration_store` (e.g. a cache on disk, shared across processes).
    Its answers are verified before they are used (see :func:`calibrate_noise`)."""

    def calibrate(
        self,
        make_event: Callable[[float], dp_event.DpEvent],
        target_epsilon: float,
        delta: float,
        schedule: DpSgdSchedule,
        fixed: tuple[dp_event.DpEvent, ...],
        options: AccountingOptions,
    ) -> float:
        """What :func:`composed_calibrate` of ``make_event`` (``fixed`` then DP-SGD run by
        ``schedule``) to ``(target_epsilon, delta)`` under ``options`` returns: that, or a value
        :func:`check_calibration` accepts, never anything less checked (the arguments are the
        checked ones of :func:`calibrate_noise`; ``schedule``, ``fixed`` and ``options`` are
        hashable and have exact reprs, to key the store on)."""
        ...


# The store of the current context: a context variable, so that a store installed in one thread
# (or asyncio task) never answers another's calibrations.
_CALIBRATION_STORE: contextvars.ContextVar[CalibrationStore | None] = contextvars.ContextVar(
    "dpprep_calibration_store", default=None
)
# While set (:func:`_fresh_calibrations`), calibrate_noise neither reads its in-memory cache nor
# asks a store: what a caller does once it has found an answer it cannot trust.
_FRESH_CALIBRATIONS: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "dpprep_fresh_calibrations", default=False
)


@contextlib.contextmanager
def calibration_store(store: CalibrationStore | None) -> Iterator[CalibrationStore | None]:
    """Inside the ``with`` block, :func:`calibrate_noise` gets what its in-memory cache misses from
    ``store`` (a :class:`CalibrationStore`) rather than computing it; ``None`` turns an enclosing
    store off for the block. The previous store is back after the block, also on error, and
    blocks nest. Scoped by :mod:`contextvars`: a thread started inside the block does not see
    ``store`` (a new thread starts from an empty context; install it there too, or run the
    thread in ``contextvars.copy_context()``). Every answer of ``store`` is verified before it is
    used or cached (ε at it must meet the target); a wrong or unreadable answer, or an exception,
    is a warning and a calibration without the store. So a value in the in-memory cache, served
    from there whichever store is installed, is a verified one, also after the block.

    >>> class Counting:
    ...     calls = 0
    ...     def calibrate(
    ...         self, make_event, target_epsilon, delta, schedule, fixed, options
    ...     ):
    ...         self.calls += 1
    ...         return composed_calibrate(
    ...             make_event, target_epsilon, delta, options=options
    ...         )
    >>> store = Counting()
    >>> calibrate_noise.cache_clear()  # as in a fresh process
    >>> with calibration_store(store):
    ...     z = calibrate_noise(3.0, 1e-6, DpSgdSchedule(64, "poisson", 0.02))
    >>> store.calls
    1
    """
    if store is not None and not callable(getattr(store, "calibrate", None)):
        raise TypeError(
            f"store must be a CalibrationStore (with a calibrate method) or None, got {store!r}"
        )
    token = _CALIBRATION_STORE.set(store)
    try:
        yield store
    finally:
        _CALIBRATION_STORE.reset(token)


@contextlib.contextmanager
def _fresh_calibrations() -> Iterator[None]:
    """Inside the block, :func:`calibrate_noise` computes every calibration afresh, neither
    reading its in-memory cache nor asking a store, and caches the fresh value (replacing what
    was there): for a caller that found an answer it cannot trust (:class:`dpprep.plan.DPPlan`)."""
    token = _FRESH_CALIBRATIONS.set(True)
    try:
        yield
    finally:
        _FRESH_CALIBRATIONS.reset(token)


CacheInfo = collections.namedtuple("CacheInfo", ["hits", "misses", "maxsize", "currsize"])


class _VerifiedCache:
    """:func:`calibrate_noise`'s in-memory cache: least recently used first out, thread-safe. It
    holds only what :func:`_calibrate_noise_uncached` returns: a fresh calibration, or a store's
    answer verified against the target."""

    def __init__(self, maxsize: int) -> None:
        self._maxsize = maxsize
        self._values: collections.OrderedDict[tuple, float] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._hits = self._misses = 0

    def get(self, key: tuple) -> float | None:
        with self._lock:
            value = self._values.get(key)
            if value is None:
                self._misses += 1
                return None
            self._values.move_to_end(key)
            self._hits += 1
            return value

    def count_miss(self) -> None:
        with self._lock:
            self._misses += 1

    def put(self, key: tuple, value: float) -> None:
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self._maxsize:
                self._values.popitem(last=False)

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, self._maxsize, len(self._values))

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._hits = self._misses = 0


_CALIBRATIONS = _VerifiedCache(maxsize=1024)


def _store_answer_problem(
    answer: object,
    make_event: Callable[[float], dp_event.DpEvent],
    target_epsilon: float,
    delta: float,
    options: AccountingOptions,
) -> str | None:
    """Why a store's ``answer`` cannot be used as the calibration of ``make_event`` to
    ``(target_epsilon, delta)``, or None: it must be a finite number > 0 at which ε, evaluated as
    :func:`composed_epsilon` evaluates it (the ε a plan states), meets the target."""
    if isinstance(answer, (bool, np.bool_)) or not isinstance(answer, numbers.Real):
        return f"answered {answer!r} (a {type(answer).__name__}), not a number"
    z = float(answer)
    if not (math.isfinite(z) and z > 0):
        return f"answered noise_multiplier={z!r}, not a finite number > 0"
    try:
        eps, _ = _epsilon_of(make_event(z), delta, options)
    except (ValueError, UnsupportedEventError, ArithmeticError) as err:  # e.g. z² underflows
        return f"answered noise_multiplier={z!r}, at which epsilon cannot be evaluated ({err!r})"
    if not eps <= target_epsilon:
        return (
            f"answered noise_multiplier={z!r}, at which epsilon={eps!r} > target_epsilon="
            f"{target_epsilon!r}: too little noise, a wrong answer"
        )
    return None


def _calibrate_noise_uncached(
    target_epsilon: float,
    delta: float,
    schedule: DpSgdSchedule,
    fixed: tuple[dp_event.DpEvent, ...],
    options: AccountingOptions,
    store: CalibrationStore | None,
) -> float:
    """The calibration of :func:`calibrate_noise`'s checked arguments: ``store``'s answer where it
    is verified, else :func:`composed_calibrate`'s (with a warning saying what was wrong)."""

    def make_event(z: float) -> dp_event.DpEvent:
        return dp_event.ComposedDpEvent([*fixed, dpsgd_event(z, schedule)])

    if store is None:
        return composed_calibrate(make_event, target_epsilon, delta, options=options)
    raised, problem = False, None
    try:
        answer = store.calibrate(make_event, target_epsilon, delta, schedule, fixed, options)
    except Exception as err:  # noqa: BLE001 (a store's failure only costs a calibration)
        raised, problem = True, f"raised {type(err).__name__}: {err}"
    else:
        problem = _store_answer_problem(answer, make_event, target_epsilon, delta, options)
        if problem is None:
            return float(answer)  # checked: a finite real number > 0
    why = (
        f"calibration store {store!r} {problem} (target_epsilon={target_epsilon!r},"
        f" delta={delta!r}, {schedule}); calibrated without it"
    )
    try:
        z = composed_calibrate(make_event, target_epsilon, delta, options=options)
    except (ValueError, UnsupportedEventError):
        if not raised:  # the store answered where the calibration refuses: say so, then refuse
            warnings.warn(why, stacklevel=4)
        raise
    warnings.warn(why, stacklevel=4)
    return z


calibrate_noise.cache_info = _CALIBRATIONS.info  # type: ignore[attr-defined]
calibrate_noise.cache_clear = _CALIBRATIONS.clear  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------------------
# Analytic Gaussian mechanism (one-shot releases)


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest noise std making a Gaussian release of an L2-``sensitivity`` query (ε, δ)-DP:
    the exact characterisation δ(ε) = Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) of Balle & Wang
    (2018), solved by dp-accounting. ``sensitivity`` is w.r.t. the caller's neighbouring
    relation (C for a sum of norm-C records under add/remove, 2C under replace-one).

    >>> round(analytic_gaussian_sigma(1.0, 1e-5), 4)
    3.7306
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    sensitivity = check_positive(sensitivity, "sensitivity")
    return float(sensitivity * _unit_gaussian_sigma(float(epsilon), float(delta)))


@functools.lru_cache(maxsize=1024)
def _unit_gaussian_sigma(epsilon: float, delta: float) -> float:
    # A root search of ~3 ms that DPSGD-F's fit asked for four times per call: cached on the exact
    # (checked) arguments, as the multipliers of calibrate_noise are.
    return float(gaussian_mechanism.get_sigma_gaussian(epsilon, delta))


def analytic_gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """Exact ε at ``delta`` of one Gaussian release with noise std ``sigma`` (inverse of
    :func:`analytic_gaussian_sigma`; 0 if the release is (0, δ)-DP).

    >>> round(analytic_gaussian_epsilon(3.7306, 1e-5), 4)
    1.0
    """
    sigma = check_positive(sigma, "sigma")
    delta = check_delta(delta)
    sensitivity = check_positive(sensitivity, "sensitivity")
    return float(gaussian_mechanism.get_epsilon_gaussian(sigma / sensitivity, delta))


# --------------------------------------------------------------------------------------------------
# Hand-written RDP curves


@renamed_kwargs(neighbouring="neighboring_relation")
@rdp_orders_summarised()
def rdp_curve(
    events: Sequence[dp_event.DpEvent],
    *,
    neighboring_relation: NeighboringRelationName = "add_remove",
) -> np.ndarray:
    """The RDP of the composition of ``events`` at each of :data:`RDP_ORDERS` (dp-accounting's RDP
    accountant under ``neighboring_relation``; ``inf`` where an order is out of an event's reach):
    the curve to combine by hand where dp-accounting has no event for the combination (e.g. a
    mixture over data-independent choices).

    >>> curve = rdp_curve([gaussian_event(2.0)])
    >>> float(curve[RDP_ORDERS.index(2.0)])   # α / (2 z²)
    0.25
    """
    options = _check_options(
        AccountingOptions(accountant="rdp", neighboring_relation=neighboring_relation)
    )
    events = _check_events(events, "events")
    if not events:
        raise ValueError("events must contain at least one DpEvent")
    accountant = _make_accountant(options)()
    accountant.compose(_prepare(dp_event.ComposedDpEvent(list(events)), options))
    return np.asarray(accountant.rdp, dtype=np.float64)


def rdp_curve_epsilon(
    orders: Sequence[float] | np.ndarray, rdp_values: Sequence[float] | np.ndarray, delta: float
) -> tuple[float, float]:
    """(ε, optimal order) at ``delta`` of a mechanism that is (α, ``rdp_values[i]``)-RDP for
    each α = ``orders[i]`` (> 1), using dp-accounting's conversion
    ε = min_α [r(α) + log((α−1)/α) − (log δ + log α)/(α−1)] (Canonne et al. 2020, Prop. 12).

    >>> eps, order = rdp_curve_epsilon([2.0, 4.0, 8.0], [0.25, 0.5, 1.0], 1e-5)
    >>> round(eps, 4), order
    (2.2141, 8.0)
    """
    delta = check_delta(delta)
    a = check_finite_array(np.asarray(orders, dtype=float), "orders", ndim=1)
    r = check_finite_array(np.asarray(rdp_values, dtype=float), "rdp_values", ndim=1)
    check_same_length(a, r, "orders", "rdp_values")
    if a.size == 0:
        raise ValueError("orders must not be empty")
    if np.any(a <= 1):
        raise ValueError(f"orders must all be > 1, got min {a.min()!r}")
    if np.any(r < 0):
        raise ValueError(f"rdp_values must all be >= 0, got min {r.min()!r}")
    eps, order = rdp_privacy_accountant.compute_epsilon(a, r, delta)
    return float(eps), float(order)


# --------------------------------------------------------------------------------------------------
# One pass, fixed order, random stopping: amplification by iteration (Feldman et al. 2018)


@renamed_kwargs(noise_std="stddev")
def sgd_iter_max_order(stddev: float, lipschitz: float) -> float:
    """Largest α with ``stddev >= lipschitz · sqrt(2 α (α − 1))``, the range of Feldman et al.'s
    Thm 26 (:func:`sgd_iter_linearized_rdp`); Hu et al.'s Theorem 14 (``table1.DPSGDIteration``)
    needs the strict inequality, α below it."""
    sigma = check_positive(stddev, "stddev")
    lip = check_positive(lipschitz, "lipschitz")
    return 0.5 * (1.0 + math.sqrt(1.0 + 2.0 * (sigma / lip) ** 2))


def sgd_iter_linearized_rdp(alpha: float, *, stddev: float, lipschitz: float, n: int) -> float:
    """Feldman et al. 2018's Thm 26 (quoted as Hu et al. 2024's Lemma H / Thm 14) for the run of
    :func:`sgd_iter_rdp`: ``4 α L² H_n / (n σ²)``, the mixture bound linearized by
    ``e^x − 1 <= 2x`` (valid for ``x <= 1``, hence ``σ >= L sqrt(2 α (α − 1))``). Kept for Hu et
    al.'s Table 1 reproduction; :func:`sgd_iter_rdp` is never larger.

    ``H_n = Σ_{j≤n} 1/j`` is the random-stopping sum ``(2/n) Σ_j 2αL²/(σ² j)`` evaluated exactly.
    Feldman et al. state ``log n`` (and Hu et al.'s proof bounds the sum by ``log(n+1)``), but
    ``H_n > log(n+1)``, so those are not upper bounds of the sum; we use the safe value.
    Raises ValueError for α outside (1, :func:`sgd_iter_max_order`].

    >>> round(sgd_iter_linearized_rdp(2.0, stddev=3.0, lipschitz=1.0, n=1000), 6)
    0.006654
    """
    alpha = check_positive(alpha, "alpha")
    sigma = check_positive(stddev, "stddev")
    lip = check_positive(lipschitz, "lipschitz")
    n = check_positive_int(n, "n", minimum=2)
    if alpha <= 1.0:
        raise ValueError(f"alpha must be > 1, got {alpha!r}")
    # Compare in squared form with a hair of slack so that alpha = sgd_iter_max_order(...) passes.
    if lip**2 * 2.0 * alpha * (alpha - 1.0) > sigma**2 * (1.0 + 1e-12):
        raise ValueError(
            f"alpha={alpha!r} is outside the range of Feldman et al. Thm 26: need "
            "stddev >= lipschitz*sqrt(2*alpha*(alpha-1)), i.e. alpha <= "
            f"{sgd_iter_max_order(sigma, lip):.6g}"
        )
    return 4.0 * alpha * lip**2 * harmonic_number(n) / (n * sigma**2)


def harmonic_number(n: int) -> float:
    """``H_n = Σ_{j=1}^n 1/j`` (digamma(n+1) + γ; exact to rounding, unlike ``log n`` < H_n)."""
    n = check_positive_int(n, "n")
    return float(special.digamma(n + 1.0) + np.euler_gamma)


def sgd_iter_linearized_epsilon(
    stddev: float,
    delta: float,
    *,
    lipschitz: float,
    n: int,
    orders: Sequence[float] | None = None,
) -> tuple[float, float]:
    """(ε, optimal order) at ``delta`` of :func:`sgd_iter_linearized_rdp`, optimised over
    ``orders`` (default: :data:`RDP_ORDERS` inside the valid range, plus its upper end). Every
    given order must be valid; raises ValueError if none is (noise too small relative to
    ``lipschitz``)."""
    delta = check_delta(delta)
    max_order = sgd_iter_max_order(stddev, lipschitz)
    if orders is None:
        if max_order <= 1.01:  # dp-accounting's conversion needs alpha > 1.01 to be finite
            raise ValueError(
                f"stddev/lipschitz={stddev / lipschitz:.4g} is too small for "
                f"amplification by iteration (largest valid order {max_order:.4g})"
            )
        orders = [a for a in RDP_ORDERS if a < max_order] + [max_order]
    rdp_values = [
        sgd_iter_linearized_rdp(a, stddev=stddev, lipschitz=lipschitz, n=n) for a in orders
    ]
    return rdp_curve_epsilon(orders, rdp_values, delta)


#: Terms of the random-stopping sum summed one by one; the tail beyond is bounded in closed form.
_SGD_ITER_HEAD = 1024
#: Taylor order of the tail bound: each tail term expm1(x), x <= _SGD_ITER_TAYLOR_X, is bounded by
#: its first _SGD_ITER_TAYLOR terms plus the Lagrange remainder (relative slack < 1e-13).
_SGD_ITER_TAYLOR = 8
_SGD_ITER_TAYLOR_X = 0.1


def _log_expm1(x: np.ndarray) -> np.ndarray:
    """``log(e^x − 1)`` for ``x > 0``, without overflow (``x + log(1 − e^{−x})``)."""
    return x + np.log(-np.expm1(-x))


def _sgd_iter_log_sum(c: np.ndarray, n: int) -> np.ndarray:
    """An upper bound on ``log Σ_{j=1}^{n} expm1(c / j)`` for each ``c > 0`` in ``c``, equal to
    it up to rounding and a relative slack below 1e-13.

    The first ``m = min(n, 1024)`` terms are summed (log-sum-exp). Each later term has
    ``x = c/j <= x_t = c/(m+1)``; where ``x_t <= 0.1`` it is bounded by Taylor's theorem,
    ``expm1(x) <= Σ_{k<=8} x^k/k! + e^{x_t} x^9/9!``, whose sums over ``j`` are Hurwitz zeta
    differences (digamma for ``k = 1``); otherwise (``c > 102``) by ``(n − m)·expm1(x_t)``, below
    ``2n·e^{−102}`` (< 1e-37 for n <= 1e7) times the first term ``expm1(c)``."""
    m = min(n, _SGD_ITER_HEAD)
    log_sum = special.logsumexp(_log_expm1(c[:, None] / np.arange(1.0, m + 1.0)), axis=1)
    if n == m:
        return log_sum
    x_t = c / (m + 1)
    k = np.arange(1, _SGD_ITER_TAYLOR + 2)
    # z[k−1] = Σ_{j=m+1}^{n} j^{−k}
    z = np.concatenate(
        [
            [special.digamma(n + 1.0) - special.digamma(m + 1.0)],
            special.zeta(k[1:], m + 1.0) - special.zeta(k[1:], n + 1.0),
        ]
    )
    taylor_ok = x_t <= _SGD_ITER_TAYLOR_X
    # Where the Taylor bound does not apply c is clamped (no overflow) and its value discarded.
    c_t = np.where(taylor_ok, c, _SGD_ITER_TAYLOR_X * (m + 1))
    terms = c_t[:, None] ** k / special.factorial(k) * np.maximum(z, 0.0)  # Σ_j x^k / k!
    terms[:, -1] *= np.exp(c_t / (m + 1))  # the Lagrange remainder's e^{x_t}
    taylor = np.log(terms.sum(axis=1))
    crude = math.log(n - m) + _log_expm1(x_t)
    return np.logaddexp(log_sum, np.where(taylor_ok, taylor, crude))


def _sgd_iter_rdp_curve(orders: np.ndarray, sigma: float, lip: float, n: int) -> np.ndarray:
    """:func:`sgd_iter_rdp` at each order (> 1) of ``orders``."""
    ratio = lip / sigma
    c = (orders - 1.0) * 2.0 * orders * (ratio * ratio)  # (α − 1) ε_1; inf, not an error, if huge
    if not np.all(np.isfinite(c)):
        raise ValueError(
            f"stddev/lipschitz={sigma / lip:.3g} is too small for a finite RDP bound at orders "
            f"up to {orders.max()!r}"
        )
    return np.logaddexp(0.0, _sgd_iter_log_sum(c, n) - math.log(n)) / (orders - 1.0)


@renamed_kwargs(noise_std="stddev")
def sgd_iter_rdp(alpha: float, *, stddev: float, lipschitz: float, n: int) -> float:
    """RDP at order ``alpha`` of one pass of noisy projected SGD over ``n`` records in a fixed
    order, stopped at a uniformly random step ``T ~ Unif{1..n}`` (Hu et al. 2024's A_SGD-iter;
    the random-stopping mixture of Feldman et al. 2018, Thm 26, without its linearization):

        ε(α) = log(1 + (1/n) Σ_{j=1}^{n} (exp((α−1) ε_j) − 1)) / (α − 1),
        ε_j = 2 α L² / (σ² j).

    Derivation (replace-one, the records differ at position ``t``). The output at stop ``T`` is
    that of ``T`` contractive noisy steps (step ≤ 2/β on a convex, L-Lipschitz, β-smooth loss):
    for ``T < t`` it does not depend on the record; for ``T >= t`` the two runs' maps differ once,
    by ``s_t <= 2ηL``, and Feldman et al.'s Thm 22 (shift ``s_t/(T−t+1)`` spread over the
    ``j = T − t + 1`` noisy steps, noise ``ησ``) gives ``D_α <= j·α(2ηL/j)²/(2η²σ²) = ε_j``, at
    every α > 1 (their Thm 23). ``exp((α−1) D_α(P‖Q)) = ∫ P^α Q^{1−α}`` is jointly convex, so the
    mixture over ``T`` has ``exp((α−1) D_α) <= (t−1)/n + (1/n) Σ_{j=1}^{n−t+1} exp((α−1) ε_j)``,
    largest at ``t = 1``: the formula above. Thm 26's ``4αL²H_n/(nσ²)``
    (:func:`sgd_iter_linearized_rdp`) bounds it further by ``e^x − 1 <= 2x`` for
    ``x = (α−1)ε_1 <= 1``, which is what needs ``σ >= L·sqrt(2α(α−1))``; this bound needs no
    condition on α. The sum is evaluated to rounding (an upper bound: ``_sgd_iter_log_sum``).

    ``stddev`` (σ) is the std of the noise added to each gradient, ``lipschitz`` (L) the
    per-record gradient bound. Needs a convex, L-Lipschitz, β-smooth loss, step ≤ 2/β, a convex
    parameter set and replace-one neighbours.

    >>> round(sgd_iter_rdp(2.0, stddev=3.0, lipschitz=1.0, n=1000), 6)
    0.003503
    """
    alpha = check_positive(alpha, "alpha")
    sigma = check_positive(stddev, "stddev")
    lip = check_positive(lipschitz, "lipschitz")
    n = check_positive_int(n, "n")
    if alpha <= 1.0:
        raise ValueError(f"alpha must be > 1, got {alpha!r}")
    return float(_sgd_iter_rdp_curve(np.array([alpha]), sigma, lip, n)[0])


@renamed_kwargs(noise_std="stddev")
def sgd_iter_epsilon(
    stddev: float,
    delta: float,
    *,
    lipschitz: float,
    n: int,
    orders: Sequence[float] | None = None,
) -> tuple[float, float]:
    """(ε, optimal order) at ``delta`` of :func:`sgd_iter_rdp`, optimised over ``orders``
    (default: :data:`RDP_ORDERS`) with :func:`rdp_curve_epsilon`. What the plan charges DP-SGD
    by iteration (:meth:`dpprep.plan.ExecutionPlan.epsilon`)."""
    delta = check_delta(delta)
    sigma = check_positive(stddev, "stddev")
    lip = check_positive(lipschitz, "lipschitz")
    n = check_positive_int(n, "n")
    a = check_finite_array(
        np.asarray(RDP_ORDERS if orders is None else orders, float), "orders", ndim=1
    )
    if a.size == 0 or np.any(a <= 1):
        raise ValueError(f"orders must be a non-empty list of numbers > 1, got {orders!r}")
    return rdp_curve_epsilon(a, _sgd_iter_rdp_curve(a, sigma, lip, n), delta)


if not TYPE_CHECKING:  # old names, for users' code (they warn)
    __getattr__ = module_renames(
        globals(),
        {"Neighbouring": "NeighboringRelationName", "NEIGHBOURINGS": "NEIGHBORING_RELATIONS"},
    )

__all__ = [
    "ACCOUNTANTS",
    "AccountingOptions",
    "CALIBRATION_TOL",
    "CalibrationStore",
    "NEIGHBORING_RELATIONS",
    "NeighboringRelationName",
    "MAX_CALIBRATION_PLD_POINTS",
    "MAX_COMPOSED_PLD_POINTS",
    "MAX_GAUSSIAN_PLD_POINTS",
    "MAX_PLD_POINTS",
    "MAX_SPARSE_POWER_BITS",
    "PLD_DISCRETIZATION",
    "RDP_ORDERS",
    "SAMPLINGS",
    "DpSgdSchedule",
    "analytic_gaussian_epsilon",
    "analytic_gaussian_sigma",
    "calibrate_noise",
    "calibration_store",
    "check_calibration",
    "check_calibration_accounting",
    "check_delta_for_size",
    "composed_calibrate",
    "composed_epsilon",
    "dpsgd_event",
    "epsilon",
    "gaussian_event",
    "harmonic_number",
    "rdp_curve",
    "rdp_curve_epsilon",
    "sgd_iter_epsilon",
    "sgd_iter_linearized_epsilon",
    "sgd_iter_linearized_rdp",
    "sgd_iter_max_order",
    "sgd_iter_rdp",
]
