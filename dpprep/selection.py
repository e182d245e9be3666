"""Private hyperparameter selection: random search with a random number of candidates, charged.

Choosing hyperparameters on private data is itself a mechanism (Liu & Talwar, "Private Selection
from Private Candidates", STOC 2019). Running ``K`` candidates and releasing the best costs about
``K`` times one candidate when ``K`` is fixed, but only a constant factor more when ``K`` is
*random* with a suitable distribution and hidden (Liu & Talwar for the geometric; Papernot &
Steinke, "Hyperparameter Tuning with Renyi Differential Privacy", ICLR 2022, Theorems 2 and 6,
for the truncated negative binomial and the Poisson in RDP). dp-accounting accounts it as
``RepeatAndSelectDpEvent(event, mean, shape)`` in its RDP accountant (only there), so every ε
here is an RDP bound.

:func:`select` runs the procedure:

1. split the private data once into a training part and a validation part of
   ``validation_size`` rows (a random permutation from the stream ``"validation_split"``);
2. draw ``K ~`` :class:`Repetitions` (``mean``, ``shape`` η) from the stream ``"num_candidates"``:
   truncated negative binomial for ``0 < η < ∞`` (geometric at η = 1), logarithmic at η = 0,
   Poisson at η = ∞ (then ``K = 0`` is possible and the output is ⊥: no model);
3. candidate ``i`` (key :func:`candidate_key`) draws a grid point uniformly (with replacement,
   stream ``"grid_point"``), trains on the training part with fresh randomness (the key's
   ``"batch"``/``"noise"``/``"stop"`` streams, as :func:`dpprep.algorithms.train` with that key)
   and releases a **noisy** validation score: the count of correct predictions plus Gaussian noise
   of std ``score_noise`` (stream ``"score"``), divided by ``validation_size``;
4. return the candidate with the highest noisy score: its parameters, grid point and noisy score.

The theorem needs each candidate's *whole* output to be private, so a candidate's event is the
composition ``[plan.dp_event(z), Gaussian(score_noise)]``
(:meth:`PrivateSelection.candidate_event`),
the selection's is ``RepeatAndSelectDpEvent(candidate, mean, shape)`` and private statistics
shared by every candidate (``fixed_events``, e.g. DPSGD-F's mean, computed once) compose once,
outside the repetition. **Only the best candidate's output is private**: ``K``, the other
candidates, their points and scores are diagnostics (revealing ``K`` would undo the benefit of
drawing it). The two parts of the split are treated like the plan treats ``n``: their sizes are
public, and a neighbouring dataset changes one record of one part. Under add/remove the
candidate's event charges both parts (valid whichever part it fell in; for the count, sensitivity
1 under either relation); under replace-one the split is a data-independent permutation of the
indices, so the replaced record sits in one part: the procedure's δ is the two parts' selections'
δ averaged over the uniform split :func:`select` draws (at most the larger part's ε), not their
composition (:meth:`PrivateSelection.splits_parts`).

:func:`search_many` runs steps 2–4 for several searches on one split, their candidates packed
into shared compiled calls; its grids may also set the training noise per point (each search is
then accounted by :meth:`PrivateSelection.end_to_end_of_grid`: a candidate's drawn point is
released with it, so it is charged as the mixture over the grid's points).

Candidates run as :func:`dpprep.sweeps.sweep_points` over the drawn points (each candidate is a
"seed" with its own key and its own point, ``per_seed``), in chunks padded to a power of two (or
to ``chunk_size``), so a selection compiles once per chunk shape, like a grid.

The selection is its plan's accountant (:meth:`PrivateSelection.plan`): the plan of every
candidate's run on the training part, its multiplier calibrated for the whole procedure:

>>> selection = PrivateSelection(Repetitions(mean=10, shape=1), score_noise=20.0,
...                              validation_size=200)
>>> plan = selection.plan("full", 1200, steps=50, l2_clip_norm=1.0,
...                       target_epsilon=2.0, delta=1e-5)
>>> # 1000 training rows; all of it (2, 1e-5)-DP
>>> plan.n, round(plan.noise_multiplier, 3), plan.epsilon <= 2.0
(1000, 31.161, True)
>>> # one candidate's training alone
>>> round(plan.execution.epsilon(plan.noise_multiplier, 1e-5), 3)
0.833
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import textwrap
import warnings
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from dp_accounting import dp_event
from dp_accounting.dp_event import DpEvent
from dp_accounting.rdp import rdp_privacy_accountant
from jax.typing import ArrayLike
from scipy import optimize, special, stats

from dpprep import algorithms, sampling, streams, sweeps
from dpprep.accounting import dp
from dpprep.algorithms import (
    TrainConfig,
    Traced,
    check_data,
    check_hyper,
    checked_plan,
    current_names,
    sweepable_fields,
    traced,
    with_values,
)
from dpprep.extensions import field_specs
from dpprep.extensions import reliance as ext_reliance
from dpprep.models import Array, Inputs, Params
from dpprep.plan import DPPlan, ExecutionPlan, epsilon_with_overflow_slack
from dpprep.validation import (
    check_delta,
    check_epsilon,
    check_key,
    check_positive,
    check_positive_int,
)

#: The named streams of a selection's key (:mod:`dpprep.streams`).
SPLIT, NUM_CANDIDATES, CANDIDATES = "validation_split", "num_candidates", "candidates"
#: The named streams of a candidate's key (besides the engine's "batch", "noise", "stop").
GRID_POINT, SCORE = "grid_point", "score"
#: Fields the selection sets itself (the training noise is calibrated for the whole procedure):
#: a grid of :func:`select` varies neither these nor an extension's privacy fields below the
#: plan's noise (:meth:`dpprep.extensions.Extension.noise_factor` < 1 at some point).
RESERVED = ("noise_multiplier",)
#: Largest chunk of candidates per compiled call by default (the chunk is the next power of two
#: of K up to this): compilations stay at most log2(MAX_CHUNK) + 1 per config over many draws.
MAX_CHUNK = 64
#: The four parts of an end-to-end account, in order.
PARTS = ("pre-processing", "private statistics", "selection", "training")

# counts a float32 mean of zeros and ones gives back exactly (times the size, rounded)
_MAX_COUNT = 2**23
_GAMMA_BISECTIONS = 200  # halvings of (0, 1]: float64 resolution long before
_BRACKET_DOUBLINGS = 60  # calibration: a bracket up to z = 2^60


def _rdp(plan: ExecutionPlan) -> dp.AccountingOptions:
    """RepeatAndSelect is accounted by dp-accounting's RDP accountant only: every ε of a selection
    is RDP under the plan's relation."""
    return dp.AccountingOptions(accountant="rdp", neighboring_relation=plan.neighboring_relation)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# The number of candidates


def tnb_mean(gamma: float, shape: float) -> float:
    """Mean of the truncated negative binomial ``D_{η,γ}`` (Papernot & Steinke 2022, Def. 1):
    ``η(1−γ)/(γ(1−γ^η))``, ``1/γ`` at η = 1 (geometric), ``(1−γ)/(γ log(1/γ))`` at η = 0
    (logarithmic); 1 at γ = 1."""
    if gamma >= 1.0:
        return 1.0
    if shape == 1.0:
        return 1.0 / gamma
    if shape == 0.0:
        return (1.0 - gamma) / (gamma * -math.log(gamma))
    return shape * (1.0 - gamma) / (gamma * -math.expm1(shape * math.log(gamma)))


def tnb_gamma(mean: float, shape: float) -> float:
    """The ``γ`` of ``D_{η,γ}`` with mean ``mean``: the smallest float ``γ`` found by bisection
    with ``tnb_mean(γ) ≤ mean``. So the distribution sampled has mean at most the one accounted,
    and ``γ`` at least dp-accounting's (its bisection keeps the other end), whose bound grows with
    ``log(1/γ)``: both sides of the approximation are on the safe side."""
    if mean == 1.0:
        return 1.0
    if shape == 1.0:
        return 1.0 / mean
    lo, hi = 0.0, 1.0  # tnb_mean(lo) = ∞ > mean >= tnb_mean(hi), and it decreases in γ
    for _ in range(_GAMMA_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if tnb_mean(mid, shape) > mean:
            lo = mid
        else:
            hi = mid
    return hi


def _logser_quantile(u: np.ndarray, p: float) -> np.ndarray:
    """The logarithmic distribution's inverse CDF at ``u`` (``P[K = k] = p^k / (k·(−ln(1 − p)))``,
    ``k ≥ 1``): the smallest ``k`` with ``P[K > k] ≤ 1 − u``. The tail sums are added smallest term
    first, up to a ``k`` beyond which the rest is below a thousandth of the smallest ``1 − u``
    asked for, so ``u`` as close to 1 as float64 allows is answered (scipy's ``logser.ppf`` can
    stop with "updating stopped, endless loop" there)."""
    norm = -math.log1p(-p)
    smallest = float(np.min(1.0 - u))
    last = 64
    # bound on P[K > last]
    while p ** (last + 1) / ((last + 1) * (1.0 - p) * norm) > 1e-3 * smallest:
        last *= 2
    k = np.arange(1, last + 1, dtype=np.float64)
    pmf = np.exp(k * math.log(p) - np.log(k) - math.log(norm))
    above = np.append(np.cumsum(pmf[::-1])[::-1][1:], 0.0)  # P[K > k], k = 1..last (non-increasing)
    return np.searchsorted(-above, -(1.0 - u), side="left") + 1


@dataclasses.dataclass(frozen=True)
class Repetitions:
    """The distribution of the number of candidates ``K`` that dp-accounting's
    ``RepeatAndSelectDpEvent(event, mean, shape)`` accounts (Papernot & Steinke 2022):

    * ``0 < shape < ∞``: truncated negative binomial ``D_{η,γ}``, ``P[K = k] ∝ (1−γ)^k
      Γ(k+η)/(Γ(η) k!)`` for ``k ≥ 1`` (``shape = 1``: geometric, Liu & Talwar 2019);
    * ``shape = 0``: logarithmic, ``P[K = k] ∝ (1−γ)^k / k``;
    * ``shape = inf``: Poisson with mean ``mean`` (``K = 0`` possible: the selection outputs ⊥).

    ``γ`` is set by ``mean`` (:func:`tnb_gamma`); ``mean = 1`` with a finite shape is ``K = 1``
    (the limit γ → 1), a single run. ValueError naming ``mean`` or ``shape`` on bad values.
    """

    mean: float
    shape: float = 1.0

    def __post_init__(self) -> None:
        shape = float(self.shape)
        if math.isnan(shape) or shape < 0:
            raise ValueError(
                "shape (η) must be >= 0 (0: logarithmic, 1: geometric, inf: Poisson), got"
                f" {self.shape!r}"
            )
        mean = float(self.mean)
        if not math.isfinite(mean) or mean < 1:
            raise ValueError(
                "mean (the mean number of candidates) must be a finite number >= 1, got"
                f" {self.mean!r}"
            )
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "mean", mean)

    @property
    def poisson(self) -> bool:
        return math.isinf(self.shape)

    @property
    def gamma(self) -> float | None:
        """``γ`` of the truncated negative binomial (None for the Poisson)."""
        return None if self.poisson else tnb_gamma(self.mean, self.shape)

    def describe(self) -> str:
        if self.poisson:
            return f"Poisson(mean {self.mean:g})"
        name = {0.0: "logarithmic", 1.0: "geometric"}.get(
            self.shape, f"truncated negative binomial (η = {self.shape:g})"
        )
        return f"{name}, mean {self.mean:g}"

    def pmf(self, k: ArrayLike) -> np.ndarray:
        """``P[K = k]``, elementwise."""
        k = np.asarray(k)
        if self.poisson:
            return stats.poisson.pmf(k, self.mean)
        gamma = tnb_gamma(self.mean, self.shape)
        if gamma == 1.0:
            return (k == 1).astype(float)
        if self.shape == 0.0:
            return stats.logser.pmf(k, 1.0 - gamma)
        # The negative binomial on {0, 1, ...} conditioned on K >= 1: P[K >= 1] = 1 − γ^η.
        return np.where(
            k >= 1,
            stats.nbinom.pmf(k, self.shape, gamma) / -math.expm1(self.shape * math.log(gamma)),
            0.0,
        )

    def quantile(self, u: ArrayLike) -> np.ndarray:
        """The inverse CDF at ``u ∈ (0, 1)`` (the smallest ``k`` with ``P[K ≤ k] ≥ u``), as
        int64."""
        u = np.asarray(u, np.float64)
        if np.any((u <= 0) | (u >= 1)):
            raise ValueError("u must lie in the open interval (0, 1)")
        gamma = 1.0 if self.poisson else tnb_gamma(self.mean, self.shape)
        if self.poisson:
            k = stats.poisson.ppf(u, self.mean)
        elif gamma == 1.0:
            k = np.ones_like(u)
        elif self.shape == 0.0:
            k = _logser_quantile(u, 1.0 - gamma)
        elif self.shape == 1.0:
            k = stats.geom.ppf(u, gamma)
        else:
            # Truncated at k >= 1 through the survival function, which keeps its precision when
            # P[K >= 1] = 1 − γ^η is small (small η): P[K > k | K >= 1] = sf(k)/sf(0) <= 1 − u.
            k = stats.nbinom.isf(
                (1.0 - u) * -math.expm1(self.shape * math.log(gamma)), self.shape, gamma
            )
        return np.asarray(k).astype(np.int64)

    def sample(self, key: Array, shape: tuple[int, ...] = ()) -> np.ndarray:
        """``K`` drawn from ``key`` (int64 array of ``shape``): a 53-bit uniform from the key's bits
        (float64 on the host, whatever JAX's x64 setting), through :meth:`quantile`."""
        bits = np.asarray(jax.random.bits(key, (*shape, 2), jnp.uint32)).astype(np.uint64)
        # 53 bits
        whole = (bits[..., 0] >> np.uint64(5)) * np.uint64(2**26) + (bits[..., 1] >> np.uint64(6))
        return self.quantile((whole.astype(np.float64) + 0.5) / 2.0**53)

    def dp_event(self, candidate: DpEvent) -> dp_event.RepeatAndSelectDpEvent:
        """dp-accounting's event of releasing the best of ``K`` runs of ``candidate``."""
        return dp_event.RepeatAndSelectDpEvent(candidate, self.mean, self.shape)


# --------------------------------------------------------------------------------------------------
# The end-to-end account


@dataclasses.dataclass(frozen=True)
class Part:
    """One part of an end-to-end account: its ε alone at the account's δ (None when there is
    nothing to charge), whether the procedure's total charges it, and how."""

    name: str
    epsilon: float | None
    charged: bool
    note: str


@dataclasses.dataclass(frozen=True)
class EndToEnd:
    """What a whole procedure charges: ``epsilon`` at ``delta`` for everything it released from
    the private data (composed, not a sum of the parts), and the :data:`PARTS` with each part's ε
    alone. :attr:`charged` names the parts the total charges; a part listed with ``charged=False``
    was not paid for (e.g. hyperparameters tuned on the data, in a training-only account).
    ``rests_on``: what the account rests on besides dpprep's checks (e.g. "rests on an unverified
    extension: … vouches for …", :func:`dpprep.extensions.reliance`), said in :meth:`describe`."""

    epsilon: float
    delta: float
    parts: tuple[Part, ...]
    accountant: str
    rests_on: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = tuple(part.name for part in self.parts)
        if names != PARTS:
            raise ValueError(f"parts must be {PARTS} in this order, got {names}")

    @property
    def charged(self) -> tuple[str, ...]:
        return tuple(part.name for part in self.parts if part.charged)

    def part(self, name: str) -> Part:
        for part in self.parts:
            if part.name == name:
                return part
        raise ValueError(f"no part {name!r}; parts are {PARTS}")

    def describe(self) -> str:
        """The breakdown, one line per part (each part's ε alone, one accountant), then the
        total."""
        lines = [
            f"end-to-end ({self.accountant}): epsilon = {self.epsilon:.4g} at delta ="
            f" {self.delta:g}, charging {' + '.join(self.charged) or 'nothing'}"
            + "".join(f"; {note}" for note in self.rests_on)
        ]
        for part in self.parts:
            value = "—" if part.epsilon is None else f"{part.epsilon:.4g}"
            mark = "charged" if part.charged else "not charged"
            lines.append(f"  {part.name:<19} epsilon alone {value:>8} ({mark})")
            lines += textwrap.wrap(
                part.note, 96, initial_indent="      ", subsequent_indent="      "
            )
        return "\n".join(lines)

    def as_row(self) -> dict[str, Any]:
        """Flat columns for a results row: the total, each part's ε and which parts were charged."""
        row: dict[str, Any] = {
            "epsilon_end_to_end": self.epsilon,
            "delta": self.delta,
            "charged": "+".join(self.charged) or "nothing",
            "accountant": self.accountant,
        }
        for part in self.parts:
            row[f"epsilon_{part.name.replace(' ', '_').replace('-', '_')}"] = part.epsilon
        if self.rests_on:
            row["rests_on"] = "; ".join(self.rests_on)
        return row


def _preprocessed(
    plan: ExecutionPlan, noise_multiplier: float, delta: float, preprocessing: Any
) -> tuple[float, Part, str]:
    """The pipeline's ε (pre-processing then the run), as the pre-processing accountant charges it
    (e.g. :meth:`dpprep.preprocess.privacy.meta.PreprocessedAccountant.pipeline`: the smaller of a
    theorem for pre-processed data and group privacy, each through ``plan.epsilon``)."""
    if not callable(getattr(preprocessing, "pipeline", None)):
        raise TypeError(
            "preprocessing must be a pre-processing accountant with pipeline(plan, z, delta) (e.g."
            " dpprep.preprocess.privacy.meta.PreprocessedAccountant), got"
            f" {type(preprocessing).__name__}"
        )
    charge = preprocessing.pipeline(plan, noise_multiplier, delta)
    return (
        charge.epsilon,
        Part("pre-processing", charge.epsilon, True, charge.note),
        charge.accountant,
    )


def training_only(
    plan: ExecutionPlan,
    noise_multiplier: float,
    delta: float,
    *,
    fixed_events: tuple[DpEvent, ...] = (),
    tuned: bool = True,
    options: dp.AccountingOptions | None = None,
    preprocessing: Any = None,
) -> EndToEnd:
    """The customary account: one run (and its ``fixed_events``) charged, by ``plan.epsilon``;
    ``tuned``: its hyperparameters were chosen on the private data, which this account does not
    charge (the selection part is listed as not charged, to say so).

    ``preprocessing``: the run trains on data pre-processed with the accountant's sensitivity
    (replace-one plans; :class:`dpprep.preprocess.privacy.meta.PreprocessedAccountant`): the total
    is then the pipeline's ε, the smaller of Hu et al.'s Theorem 2 and group privacy (at group size
    ``ceil(Δ∞) + 1``), and the pre-processing part carries it (it cannot be split from the run's).
    Not with ``fixed_events`` or ``options`` (a statistic of pre-processed data would need its own
    Theorem 2). ValueError otherwise, as the plan's own checks."""
    train = plan.epsilon(noise_multiplier, delta, options=options)
    accountant: str = (options or dp.AccountingOptions()).accountant
    pre = Part("pre-processing", None, False, "none declared")
    if preprocessing is not None:
        if fixed_events or options is not None:
            raise ValueError(
                "preprocessing: the pipeline is accounted by Theorem 2 or group privacy alone; "
                "fixed_events and options do not compose with it"
            )
        total, pre, accountant = _preprocessed(plan, noise_multiplier, delta, preprocessing)
    else:
        total = plan.epsilon(noise_multiplier, delta, fixed_events=fixed_events, options=options)
    return EndToEnd(
        total,
        delta,
        (
            pre,
            _statistics_part(
                fixed_events,
                delta,
                options or dp.AccountingOptions(neighboring_relation=plan.neighboring_relation),  # type: ignore[arg-type]
            ),
            Part(
                "selection",
                None,
                False,
                (
                    "hyperparameters chosen on the private data, not charged"
                    if tuned
                    else "none: hyperparameters fixed in advance"
                ),
            ),
            Part("training", train, True, f"one run of {plan.steps} steps ({plan.sampler})"),
        ),
        accountant,
    )


def _statistics_part(
    fixed_events: tuple[DpEvent, ...], delta: float, options: dp.AccountingOptions
) -> Part:
    if not fixed_events:
        return Part("private statistics", None, False, "none")
    eps = dp.composed_epsilon(list(fixed_events), delta, options=options)
    return Part(
        "private statistics",
        eps,
        True,
        f"{len(fixed_events)} event(s) released once, shared by every run",
    )


# --------------------------------------------------------------------------------------------------
# The accounting of a selection


@dataclasses.dataclass(frozen=True)
class PrivateSelection:
    """The privacy side of a selection (frozen; see the module docstring).

    Attributes:
      repetitions: the distribution of the number of candidates ``K``.
      score_noise: std of the Gaussian noise on each candidate's count of correct validation
        predictions (sensitivity 1).
      validation_size: rows of the private data held out for scoring (the rest trains).
      fixed_events: private statistics released once and shared by every candidate, composed
        once, outside the repetition (e.g. ``(dp.gaussian_event(sigma_F),)`` for DPSGD-F's mean).
    """

    repetitions: Repetitions
    score_noise: float
    validation_size: int
    fixed_events: tuple[DpEvent, ...] = ()

    #: A :class:`dpprep.plan.DPPlan` with this accountant accounts the whole procedure (the
    #: overflow slack of every candidate included), not one run.
    accounts_whole_procedure = True

    def __post_init__(self) -> None:
        if not isinstance(self.repetitions, Repetitions):
            raise TypeError(
                "repetitions must be a Repetitions(mean, shape), got"
                f" {type(self.repetitions).__name__}"
            )
        object.__setattr__(self, "score_noise", check_positive(self.score_noise, "score_noise"))
        object.__setattr__(
            self, "validation_size", check_positive_int(self.validation_size, "validation_size")
        )
        fixed = tuple(self.fixed_events)
        for event in fixed:
            if not isinstance(event, DpEvent):
                raise TypeError(
                    f"fixed_events must contain dp_accounting DpEvents, got {type(event).__name__}"
                )
        object.__setattr__(self, "fixed_events", fixed)

    def check_size(self, n: int) -> int:
        """The training part's size for ``n`` rows (ValueError naming validation_size when the
        validation part would leave no training row)."""
        n = check_positive_int(n, "n")
        if self.validation_size >= n:
            raise ValueError(
                f"validation_size={self.validation_size} must be smaller than the data ({n} rows): "
                "at least one row must remain to train on"
            )
        return n - self.validation_size

    def plan(self, sampling: str, n: int, **options: Any) -> DPPlan:
        """The :class:`~dpprep.plan.DPPlan` of a selection on ``n`` rows of private data: every
        candidate's run on the ``n − validation_size`` training rows, accounted (and, with
        ``target_epsilon``, calibrated) for the whole procedure by this selection. ``options`` are
        :meth:`DPPlan.create`'s (``l2_clip_norm``, ``delta``, ``target_epsilon`` or
        ``noise_multiplier``, ``batch_size``, ``steps`` or ``epochs``, …); the procedure's
        private statistics are this selection's ``fixed_events``."""
        if "accountant" in options or "fixed_events" in options:
            raise ValueError(
                "the selection is the plan's accountant, and its fixed_events are the selection's"
            )
        return DPPlan.create(sampling, self.check_size(n), accountant=self, **options)

    def score_event(self, plan: ExecutionPlan) -> dp_event.GaussianDpEvent:
        """The noisy count's event. A count moves by at most 1 under either relation; the
        accountants read a Gaussian's multiplier as relative to a sum that moves by 2 units under
        replace-one, so there the multiplier is ``2·score_noise`` (the same ``1/σ``)."""
        return dp_event.GaussianDpEvent(
            self.score_noise * (2.0 if plan.neighboring_relation == "replace_one" else 1.0)
        )

    def candidate_event(
        self, plan: ExecutionPlan, noise_multiplier: float
    ) -> dp_event.ComposedDpEvent:
        """One candidate's whole output: its training run composed with its noisy score (the event
        :meth:`epsilon` repeats and selects under add/remove; see :meth:`splits_parts`)."""
        return dp_event.ComposedDpEvent(
            [
                plan.dp_event(check_positive(noise_multiplier, "noise_multiplier")),
                self.score_event(plan),
            ]
        )

    def selection_event(
        self, plan: ExecutionPlan, noise_multiplier: float
    ) -> dp_event.RepeatAndSelectDpEvent:
        """dp-accounting's event of the selection of :meth:`candidate_event` (without the shared
        statistics): what :meth:`epsilon` charges under add/remove at one noise level."""
        return self.repetitions.dp_event(self.candidate_event(plan, noise_multiplier))

    @staticmethod
    def splits_parts(plan: ExecutionPlan) -> bool:
        """Whether a neighbouring dataset changes the training part *or* the validation part, never
        both: under replace-one the split is a data-independent permutation of the indices, so the
        replaced index lands in one part. Then the procedure is, for each split, either the
        selection of training runs (the scores post-process them) or the selection of noisy
        counts (the training identical). Under add/remove the parts' sizes would change with the
        record, so both parts are charged together.

        What is charged for the two parts (:func:`_split_epsilon`): where the procedure draws the
        split itself, uniformly (:func:`select`: :meth:`epsilon`, :meth:`calibrate`,
        :meth:`end_to_end`), δ is the average of the parts' δ(ε) weighted by the replaced record's
        chance to sit in each, ``1 − v/N`` (training) and ``v/N`` (validation), ``v`` =
        ``validation_size`` of ``N`` rows. Proof: given the split π the output is ``M_π(D)``, so
        the procedure's is the mixture ``Σ_π w_π M_π(D)`` with the same data-independent weights
        for ``D`` and ``D'``; the hockey-stick divergence ``∫ (P − e^ε Q)_+`` is jointly convex, so
        ``δ(ε) <= Σ_π w_π δ_π(ε) = (1 − v/N)·δ_training(ε) + (v/N)·δ_counts(ε)``. Where the split
        is the caller's (:meth:`end_to_end_of_grid`, :func:`search_many`) it may be fixed, the
        record's part known: the larger part's ε is charged (valid for every split)."""
        return plan.neighboring_relation == "replace_one"

    def _check_levels(self, noise_multipliers: ArrayLike | Sequence[float]) -> tuple[float, ...]:
        levels = np.asarray(noise_multipliers, np.float64).ravel()
        if levels.size == 0 or not np.all(np.isfinite(levels)) or not np.all(levels > 0):
            raise ValueError(
                "noise_multipliers must be a non-empty sequence of finite multipliers > 0, got"
                f" {noise_multipliers!r}"
            )
        return tuple(float(z) for z in levels)

    def _candidate_curve(
        self, plan: ExecutionPlan, levels: tuple[float, ...], *, trained: bool, scored: bool
    ) -> np.ndarray:
        """RDP, at each of :data:`dp.RDP_ORDERS`, of one candidate that draws its training
        multiplier uniformly from ``levels`` (its grid point, drawn independently of the data and
        released with the candidate): the output is a mixture with disjoint supports, so its
        Rényi divergence of order α is exactly ``log(mean_i exp((α−1)·ε_i(α)))/(α−1)`` for
        per-point divergences ``ε_i(α)`` — the log-mean-exp of the points' curves, at most the
        least noisy point's."""

        def events(z: float) -> list[DpEvent]:
            return [plan.dp_event(z)] * trained + [self.score_event(plan)] * scored

        unique, counts = np.unique(np.asarray(levels), return_counts=True)
        # a dp.NeighboringRelationName: the plan validated it
        relation: Any = plan.neighboring_relation
        curves = np.stack(
            [dp.rdp_curve(events(float(z)), neighboring_relation=relation) for z in unique]
        )
        if len(unique) == 1 or not trained:
            return curves[0]
        orders = np.asarray(dp.RDP_ORDERS)[None, :]
        weights = np.log(counts / counts.sum())[:, None]
        return np.asarray(
            special.logsumexp(weights + (orders - 1.0) * curves, axis=0) / (orders[0] - 1.0),
            np.float64,
        )

    def _selected(self, curve: np.ndarray) -> np.ndarray:
        """The RDP curve of the best of ``K`` candidates with RDP ``curve`` (Papernot & Steinke
        2022, Theorems 2 and 6, as dp-accounting applies them to a RepeatAndSelectDpEvent)."""
        # dp-accounting computes this only inside its accountant, from an event; a mixture has no
        # event, so its curve goes through the same function (tests pin both routes equal).
        return np.asarray(
            rdp_privacy_accountant._compute_rdp_repeat_and_select(  # noqa: SLF001
                dp.RDP_ORDERS, curve, self.repetitions.mean, self.repetitions.shape
            ),
            np.float64,
        )

    def _rdp_epsilon(self, curve: np.ndarray, delta: float) -> float:
        return float(rdp_privacy_accountant.compute_epsilon(dp.RDP_ORDERS, curve, delta)[0])

    def _overflow(self, plan: ExecutionPlan) -> float:
        """TV distance between the padded Poisson runs and ideal ones over the whole selection:
        at most E[K]·p (a union bound over the candidates, K independent of the data)."""
        return min(1.0, self.repetitions.mean * plan.overflow_probability())

    def _epsilon(
        self,
        plan: ExecutionPlan,
        levels: tuple[float, ...],
        delta: float,
        *,
        shared: bool = True,
        drawn_split: bool = True,
    ) -> tuple[float, float | None, float | None]:
        """ε of the procedure (with the shared statistics when ``shared``) and, where
        :meth:`splits_parts`, the two parts' ε (training runs, noisy counts); else ``None``s.
        ``drawn_split``: the procedure draws the split uniformly (δ averaged over it), else the
        larger part is charged (:meth:`splits_parts`)."""
        self._check_plan(plan)
        # a dp.NeighboringRelationName: the plan validated it
        relation: Any = plan.neighboring_relation
        fixed = (
            dp.rdp_curve(self.fixed_events, neighboring_relation=relation)
            if shared and self.fixed_events
            else np.zeros(len(dp.RDP_ORDERS))
        )
        what = f"at noise_multiplier={min(levels)!r} the selection"

        def curve(trained: bool, scored: bool) -> np.ndarray:
            return fixed + self._selected(
                self._candidate_curve(plan, levels, trained=trained, scored=scored)
            )

        def ideal(curve: np.ndarray) -> Callable[[float], float]:
            return lambda d: self._rdp_epsilon(curve, d)

        if not self.splits_parts(plan):
            return (
                epsilon_with_overflow_slack(
                    ideal(curve(True, True)), delta, self._overflow(plan), what
                ),
                None,
                None,
            )
        runs, counts_curve = curve(True, False), curve(False, True)
        training = epsilon_with_overflow_slack(ideal(runs), delta, self._overflow(plan), what)
        # the training runs are identical: no overflow to charge
        counts = ideal(counts_curve)(delta)
        larger = max(training, counts)
        if not drawn_split:
            return larger, training, counts
        total = _split_epsilon(
            runs, counts_curve, self._in_validation(plan), self._overflow(plan), delta, larger
        )
        return total, training, counts

    def _in_validation(self, plan: ExecutionPlan) -> float:
        """The replaced record's chance to sit in the validation part of a uniform split:
        ``v/N`` with ``N = plan.n + v`` rows (:func:`select` checks that the data has them)."""
        return self.validation_size / (plan.n + self.validation_size)

    def _check_plan(self, plan: ExecutionPlan) -> None:
        if not isinstance(plan, ExecutionPlan):
            raise TypeError(
                "plan must be an ExecutionPlan (PrivateSelection.plan(...).execution), got"
                f" {type(plan).__name__}"
            )
        schedule = plan.schedule()  # ValueError saying why for a run without a dp-accounting event
        if (
            plan.neighboring_relation == "replace_one"
            and schedule.sampling in ("poisson", "shuffle")
            and schedule.sampling_rate < 1
        ):
            raise ValueError(
                "private selection is accounted by dp-accounting's RDP accountant (the only one"
                " with RepeatAndSelectDpEvent), which has no replace-one bound for Poisson"
                " sampling: use neighboring_relation='add_remove', or full / without_replacement"
                " batches"
            )
        if plan.sampler == "shuffle" and plan.shuffle_bound == "as_poisson":
            warnings.warn(
                "shuffled DP-SGD candidates are accounted as if Poisson-subsampled (an assumption, "
                "not a proof; see ExecutionPlan): the selection's ε inherits it",
                UserWarning,
                stacklevel=4,
            )

    def epsilon(self, plan: ExecutionPlan, noise_multiplier: float, delta: float) -> float:
        """ε at ``delta`` of the whole procedure (shared statistics + selection) with training
        multiplier ``noise_multiplier`` on ``plan`` (RDP; the padded Poisson batches' overflow
        slack charged as in :meth:`ExecutionPlan.epsilon`, over E[K] runs). Under replace-one the
        two parts' δ averaged over the split :func:`select` draws (:meth:`splits_parts`; at most
        the larger part's ε), else both parts composed.

        >>> from dpprep.plan import ExecutionPlan
        >>> selection = PrivateSelection(Repetitions(mean=4, shape=1), score_noise=20.0,
        ...                              validation_size=200)
        >>> add_remove = ExecutionPlan.create("full", 1000, steps=50)
        >>> both = selection.epsilon(add_remove, 25.0, 1e-5)
        >>> replace_one = ExecutionPlan.create(
        ...     "full", 1000, steps=50, neighboring_relation="replace_one"
        ... )
        >>> split = selection.epsilon(replace_one, 50.0, 1e-5)
        >>> # replace-one at z = 2·25: the same training divergence
        >>> round(both, 4), round(split, 4)
        (2.1438, 2.099)
        """
        delta = check_delta(delta)
        return self._epsilon(plan, (check_positive(noise_multiplier, "noise_multiplier"),), delta)[
            0
        ]

    def scores_epsilon(self, plan: ExecutionPlan, delta: float) -> float:
        """ε at ``delta`` of the ``K`` noisy validation scores alone (repeated and selected, no
        training, no shared statistics): what the scores cost whatever the training noise."""
        self._check_plan(plan)
        return dp.composed_epsilon(
            [self.repetitions.dp_event(self.score_event(plan))],
            check_delta(delta),
            options=_rdp(plan),
        )

    def floor(self, plan: ExecutionPlan, delta: float) -> float:
        """The ε the procedure costs with no training noise charged at all (``z → ∞``): the
        shared statistics and ``K`` noisy scores (under replace-one their δ averaged with the
        noiseless training runs' selection's, :meth:`splits_parts`). No multiplier reaches a
        target at or below it."""
        self._check_plan(plan)
        delta = check_delta(delta)
        selection = self.repetitions.dp_event(self.score_event(plan))
        counts = dp.composed_epsilon([*self.fixed_events, selection], delta, options=_rdp(plan))
        if not self.splits_parts(plan):
            return counts
        # Replace-one (the split drawn by select): z → ∞ leaves the training runs' selection of
        # (nearly) nothing, its δ averaged with the counts' (splits_parts).
        relation: Any = plan.neighboring_relation  # a dp.NeighboringRelationName
        fixed = (
            dp.rdp_curve(self.fixed_events, neighboring_relation=relation)
            if self.fixed_events
            else np.zeros(len(dp.RDP_ORDERS))
        )
        runs = fixed + self._selected(np.zeros(len(dp.RDP_ORDERS)))
        counts_curve = dp.rdp_curve([*self.fixed_events, selection], neighboring_relation=relation)
        return _split_epsilon(
            runs,
            counts_curve,
            self._in_validation(plan),
            0.0,
            delta,
            max(counts, self._rdp_epsilon(runs, delta)),
        )

    def calibrate(
        self,
        plan: ExecutionPlan,
        target_epsilon: float,
        delta: float,
        *,
        tol: float = dp.CALIBRATION_TOL,
    ) -> float:
        """The smallest training multiplier ``z`` (within ``tol``; Brent's method, cached) with the
        whole procedure ``(target_epsilon, delta)``-DP; ValueError naming target_epsilon when even
        ``z → ∞`` leaves it above the target (:meth:`floor`)."""
        target = check_epsilon(target_epsilon, "target_epsilon")
        delta = check_delta(delta)
        tol = check_positive(tol, "tol")
        floor = self.floor(plan, delta)
        if not target > floor:
            raise ValueError(
                f"target_epsilon={target_epsilon!r} is too small for any candidate to run: K ~ "
                f"{self.repetitions.describe()} noisy scores (score_noise={self.score_noise:g})"
                + (
                    f" and {len(self.fixed_events)} shared statistic(s)"
                    if self.fixed_events
                    else ""
                )
                + f" alone cost epsilon={floor:.4g} at delta={delta:g}; ask for more, raise"
                " score_noise or lower the mean number of candidates"
            )

        return _calibrate(self, plan, target, delta, tol)

    def end_to_end(self, plan: ExecutionPlan, noise_multiplier: float, delta: float) -> EndToEnd:
        """The :class:`EndToEnd` account of this selection at ``noise_multiplier`` (cached)."""
        return _end_to_end(
            self,
            plan,
            (check_positive(noise_multiplier, "noise_multiplier"),),
            check_delta(delta),
            True,
        )

    def end_to_end_of_grid(
        self, plan: ExecutionPlan, noise_multipliers: ArrayLike | Sequence[float], delta: float
    ) -> EndToEnd:
        """The :class:`EndToEnd` account of a search whose grid points carry their **own** training
        multipliers (:func:`search_many`; e.g. a constant that sets σ), each candidate drawing its
        point uniformly from the grid's entries.

        The point is drawn independently of the data and released with the candidate, so a
        candidate's output is a mixture with disjoint supports and data-independent weights: its
        Rényi divergence of each order α is the log-mean-exp of the points' divergences,
        ``log(mean_i exp((α−1)·ε_i(α)))/(α−1)`` — exact for the mixture, and below the least noisy
        point's ``max_i ε_i(α)`` (what joint quasi-convexity alone gives; van Erven & Harremoës,
        IEEE Trans. Inf. Theory 2014). The repetition and selection then apply to that curve.

        >>> from dpprep.plan import ExecutionPlan
        >>> plan = ExecutionPlan.create("full", 1000, steps=50)
        >>> selection = PrivateSelection(Repetitions(mean=4, shape=1), score_noise=20.0,
        ...                              validation_size=200)
        >>> grid = selection.end_to_end_of_grid(plan, [40.0, 25.0, 60.0], 1e-5)
        >>> least_noisy = selection.end_to_end(plan, 25.0, 1e-5).epsilon
        >>> round(grid.epsilon, 4), round(least_noisy, 4)
        (1.9076, 2.1438)
        """
        return _end_to_end(
            self, plan, self._check_levels(noise_multipliers), check_delta(delta), False
        )

    def _end_to_end(
        self, plan: ExecutionPlan, levels: tuple[float, ...], delta: float, drawn_split: bool
    ) -> EndToEnd:
        total, training, counts = self._epsilon(plan, levels, delta, drawn_split=drawn_split)
        alone = self._epsilon(plan, levels, delta, shared=False, drawn_split=drawn_split)[0]
        scores = self.scores_epsilon(plan, delta)
        z = min(levels)
        train = plan.epsilon(z, delta, options=_rdp(plan))
        how = (
            f"best of K ~ {self.repetitions.describe()} candidates (Papernot & Steinke 2022), each"
            f" a training run and a noisy count of correct predictions (std {self.score_noise:g})"
            f" on {self.validation_size} validation rows; the noisy counts alone cost epsilon ="
            f" {scores:.4g}"
        )
        if len(set(levels)) > 1:
            how += (
                f"; each candidate draws one of {len(levels)} grid points whose training"
                f" multipliers run from z = {z:.4g} to {max(levels):.4g}, charged as their mixture"
                " (log-mean-exp of the points' RDP curves; the least noisy point alone would"
                " charge more)"
            )
        if training is not None and counts is not None and drawn_split:
            p = self._in_validation(plan)
            how += (
                "; replace-one: the replaced record sits in the training part or in the validation"
                f" part of the split drawn uniformly, so delta is the average of the training runs'"
                f" selection's (epsilon = {training:.4g} alone) and the noisy counts' (epsilon ="
                f" {counts:.4g} alone), weighted {1 - p:.4g} and {p:.4g}: epsilon = {total:.4g}"
                " is charged, not their composition"
            )
        elif training is not None and counts is not None:
            how += (
                "; replace-one: the replaced record sits in the training part or in the validation"
                f" part of the caller's split, so the larger of the training runs' selection"
                f" (epsilon = {training:.4g}) and the noisy counts' (epsilon = {counts:.4g}) is"
                " charged, not their composition"
            )
        trained = (
            "the least noisy grid point's run" if len(set(levels)) > 1 else "one candidate's run"
        )
        return EndToEnd(
            total,
            delta,
            (
                Part("pre-processing", None, False, "none declared"),
                _statistics_part(self.fixed_events, delta, _rdp(plan)),
                Part("selection", alone, True, how),
                Part(
                    "training",
                    train,
                    True,
                    f"{trained} of {plan.steps} steps ({plan.sampler}), "
                    "charged within the selection",
                ),
            ),
            "rdp",
        )


@functools.lru_cache(maxsize=128)
def _end_to_end(
    selection: PrivateSelection,
    plan: ExecutionPlan,
    levels: tuple[float, ...],
    delta: float,
    drawn_split: bool,
) -> EndToEnd:
    return selection._end_to_end(plan, levels, delta, drawn_split)


def _split_epsilon(
    runs: np.ndarray,
    counts: np.ndarray,
    in_validation: float,
    overflow: float,
    delta: float,
    larger: float,
) -> float:
    """The smallest ε (to 1e-12) at which ``(1 − p)·δ_runs(ε) + p·δ_counts(ε) <= delta``,
    ``p = in_validation``, each part's δ(ε) dp-accounting's conversion of its RDP curve (Canonne
    et al. 2020, Prop. 12), the training runs' plus the padded batches' overflow slack
    ``(1 + e^ε)·overflow`` (:func:`dpprep.sampling.overflow_delta`). Valid by the joint convexity
    of the hockey-stick divergence (:meth:`PrivateSelection.splits_parts`). ``larger``, the larger
    part's ε at ``delta``, meets it (each δ there is at most ``delta``): never above it."""
    orders = dp.RDP_ORDERS

    def excess(eps: float) -> float:
        runs_delta = rdp_privacy_accountant.compute_delta(orders, runs, eps)[0]
        # (1 + e^ε)·p, overflow-safe (ε in the thousands where the answer is large)
        slack = sampling.overflow_delta(eps, overflow) if eps > 0 else 2.0 * overflow
        runs_delta = min(1.0, runs_delta + slack)
        counts_delta = rdp_privacy_accountant.compute_delta(orders, counts, eps)[0]
        return (1.0 - in_validation) * runs_delta + in_validation * counts_delta - delta

    if excess(0.0) <= 0:
        return 0.0
    if not excess(larger) <= 0:  # rounding at the larger part's own answer: that is valid alone
        return larger
    eps = float(optimize.brentq(excess, 0.0, larger, xtol=1e-12))
    for _ in range(64):  # Brent's answer is within 1e-12 of a root, on either side: step up
        if excess(eps) <= 0:
            return eps
        eps = min(larger, eps + 1e-12)
    return larger


@functools.lru_cache(maxsize=128)
def _calibrate(
    selection: PrivateSelection, plan: ExecutionPlan, target: float, delta: float, tol: float
) -> float:
    """:meth:`PrivateSelection.calibrate` past its checks (cached: the arguments are hashable)."""

    seen: dict[float, float] = {}  # the bracket, its checks and Brent's method revisit points

    def excess(z: float) -> float:
        if z not in seen:
            try:
                seen[z] = selection.epsilon(plan, z, delta) - target
            # the overflow slack leaves nothing of delta: too little noise, far above
            except ValueError:
                seen[z] = math.inf
        return seen[z]

    hi = 1.0
    for _ in range(_BRACKET_DOUBLINGS):
        if excess(hi) <= 0:
            break
        hi *= 2.0
    else:
        raise ValueError(
            f"target_epsilon={target!r} needs a noise multiplier above {hi:.3g}; ask for more"
        )
    lo = hi / 2.0
    while excess(lo) <= 0:
        if lo < tol:
            return lo
        lo, hi = lo / 2.0, lo
    # ε is continuous and decreasing in z: Brent's method on the bracket
    if math.isfinite(excess(lo)):
        root = optimize.brentq(excess, lo, hi, xtol=tol / 4)
        # the exact root is within tol/4 of Brent's: up meets the target
        up = min(hi, root + tol / 2)
        if excess(up) <= 0:
            return up
    while hi - lo > tol:  # otherwise (or when the slack refused lo), plain bisection
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if excess(mid) <= 0 else (mid, hi)
    return hi


# --------------------------------------------------------------------------------------------------
# Running it


@dataclasses.dataclass(frozen=True)
class SelectionResult:
    """What :func:`select` returns.

    ``params``, ``point`` and ``score`` are the private output: the best candidate's parameters,
    its grid point (``{field: value}``) and its noisy validation accuracy (all None when the
    Poisson ``K`` was 0). ``accounting`` is the procedure's :class:`EndToEnd` at
    ``noise_multiplier``. ``diagnostics`` (``num_candidates``, ``grid_indices``,
    ``noisy_scores``, ``accuracies``, ``best``, ``chunk_size``) are **not** private: ``K`` and the
    other candidates must not be released.
    """

    params: Params | None
    point: dict[str, Any] | None
    score: float | None
    noise_multiplier: float
    accounting: EndToEnd
    diagnostics: dict[str, Any]


def candidate_key(key: Array, index: int) -> Array:
    """The key of candidate ``index`` of a selection run with ``key``: it trains with this key
    (as :func:`dpprep.algorithms.train` would) and draws its point and score noise from its
    ``"grid_point"`` and ``"score"`` streams. Independent of ``K``, so padding changes nothing."""
    return jax.random.fold_in(streams.stream(key, CANDIDATES), index)


def split(
    data: tuple[Inputs, Array | np.ndarray], validation_size: int, key: Array
) -> tuple[tuple[Array, Array], tuple[Array, Array]]:
    """``((x_train, y_train), (x_validation, y_validation))``: a random permutation of the rows
    from the ``"validation_split"`` stream of ``key``, its first ``validation_size`` rows held out.
    """
    x, y = data
    n = int(np.shape(y)[0])
    if isinstance(validation_size, bool) or not isinstance(validation_size, (int, np.integer)):
        raise TypeError(
            f"validation_size must be an integer number of rows, got {validation_size!r}"
        )
    if not 1 <= validation_size < n:
        raise ValueError(f"validation_size={validation_size} must be between 1 and n − 1 = {n - 1}")
    order = np.asarray(jax.random.permutation(streams.stream(key, SPLIT), n))
    held, kept = order[:validation_size], order[validation_size:]
    take = lambda rows: jax.tree_util.tree_map(lambda a: a[rows], x)  # noqa: E731  (array or dict inputs)
    return (take(kept), y[kept]), (take(held), y[held])


@functools.partial(jax.jit, static_argnums=2)
def _draws(key: Array, which: Array, size: int) -> tuple[Array, Array, Array]:
    """Candidates ``which``'s keys, grid indices (uniform on ``size`` points) and standard normal
    score noise."""
    keys = jax.vmap(lambda i: candidate_key(key, i))(which)
    index = jax.vmap(lambda k: jax.random.randint(streams.stream(k, GRID_POINT), (), 0, size))(keys)
    noise = jax.vmap(lambda k: jax.random.normal(streams.stream(k, SCORE)))(keys)
    return keys, index, noise


def _check_grid(
    config: TrainConfig, grid: Mapping[str, Any], *, noise_levels: bool = False
) -> dict[str, Any]:
    """A grid ``{field: values}`` with one shared, non-empty leading axis of points, checked
    against the config's sweepable fields and made arrays (pytree fields stay trees). The training
    noise fields (:data:`RESERVED`) only with ``noise_levels`` (:func:`search_many`)."""
    if not isinstance(grid, Mapping) or not grid:
        raise ValueError("grid must be a non-empty mapping {field: values} (a flat axis of points)")
    grid = current_names(grid, config.extensions, "grid: ")
    known = sweepable_fields(config)
    reserved = sorted(set(grid) & set(RESERVED))
    if reserved and not noise_levels:
        raise ValueError(
            f"grid cannot vary {reserved}: the selection sets the training noise itself "
            "(the plan's noise_multiplier, calibrated for the whole procedure)"
        )
    unknown = sorted(set(grid) - set(known))
    if unknown:
        raise ValueError(
            f"grid cannot vary {unknown}; sweepable fields of this config are {list(known)}"
        )
    # A list is a pytree of scalars: make plain fields arrays, keep pytree fields (e.g. noise
    # scales) as trees.
    pytrees = {name for name, (_, spec) in field_specs(config.extensions).items() if spec.pytree}
    values = {
        name: jax.tree_util.tree_map(np.asarray, value) if name in pytrees else np.asarray(value)
        for name, value in grid.items()
    }
    lengths = {
        int(np.shape(leaf)[0]) if np.ndim(leaf) else -1
        for value in values.values()
        for leaf in jax.tree_util.tree_leaves(value)
    }
    if lengths != {next(iter(lengths))} or -1 in lengths:
        raise ValueError(
            "grid values need one shared leading axis (the grid points), got lengths"
            f" {sorted(lengths)}"
        )
    if 0 in lengths:
        raise ValueError("grid is empty: it needs at least one point")
    return values


def _check_search_config(config: TrainConfig) -> tuple[DPPlan, Traced]:
    """What every private search needs of its config (:func:`select`, :func:`search_many`): a
    plan, ``config.hyper``, a classifier and one released iterate. Returns the plan and the values.
    """
    plan = checked_plan(config)
    values = traced(config)
    if config.model.task != "classification":
        raise ValueError(
            "config.model must be a classifier: the score is a noisy count of correct predictions "
            f"(got task {config.model.task!r})"
        )
    if config.iterates == "both":
        raise ValueError(
            "config.iterates='both' releases two models; a search returns one ('last' or 'average')"
        )
    return plan, values


def _check_selection(selection: Any) -> PrivateSelection:
    if not isinstance(selection, PrivateSelection):
        raise TypeError(f"selection must be a PrivateSelection, got {type(selection).__name__}")
    if selection.validation_size >= _MAX_COUNT:
        raise ValueError(
            f"validation_size={selection.validation_size} must be below 2^23: the count of correct "
            "predictions is recovered exactly from a float32 accuracy only up to there"
        )
    return selection


def _checked_grid(
    config: TrainConfig,
    plan: DPPlan,
    values0: Traced,
    grid: Mapping[str, Any],
    params0: Params,
    num_features: int | None,
    *,
    noise_levels: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """:func:`_check_grid`, then every point's values (``values0`` with the point's) checked
    against the plan, the model and the extensions; returns the grid and what each point charges."""
    values = _check_grid(config, grid, noise_levels=noise_levels)
    charged = check_hyper(
        with_values(values0, values),
        params0,
        plan=plan,
        swept=tuple(values),
        num_features=num_features,
        extensions=config.extensions,
        clip_method=config.clip_method,
    )
    return values, charged


def _warn_if_scores_dominate(account: EndToEnd, scores: float, shared: bool) -> None:
    """The noisy validation scores alone (``scores``, their ε) are part of the selection's cost;
    where they share the budget with the training (``shared``: both parts composed), say so when
    they take more than half of it (the training then gets less). Under replace-one the parts
    do not share it (:meth:`PrivateSelection.splits_parts`): the scores cost the training nothing
    below the target, and at or above :meth:`PrivateSelection.floor` calibration refuses."""
    if shared and scores > 0.5 * account.epsilon:
        warnings.warn(
            f"the noisy validation scores alone cost epsilon = {scores:.4g} of the selection's"
            f" {account.epsilon:.4g} (more than half): raise score_noise or lower the mean number"
            f" of candidates to leave the training more\n{account.describe()}",
            UserWarning,
            stacklevel=3,
        )


def select(
    config: TrainConfig,
    params0: Params,
    data: tuple[Inputs, ArrayLike],
    key: Array,
    grid: Mapping[str, Any],
    *,
    chunk_size: int | None = None,
    verbose: bool = False,
) -> SelectionResult:
    """Private random search over ``grid`` (see the module docstring).

    Args:
      config: the static config of every candidate; ``config.plan`` is the selection's plan
        (:meth:`PrivateSelection.plan`: the candidates' run on the training part, its noise
        calibrated for — and its ε accounting — the whole procedure) and ``config.hyper`` gives
        the fields not in ``grid``. Classifiers only (the score is a count of correct
        predictions); one iterate (``iterates`` not ``"both"``).
      params0, data: initial parameters and the private ``(x, y)``, split by :func:`split`.
      key: the selection's PRNG key (streams :data:`SPLIT`, :data:`NUM_CANDIDATES`,
        :data:`CANDIDATES`).
      grid: ``{field: values}`` with a shared leading axis of ``G`` points (as
        :func:`dpprep.sweeps.sweep_points`' ``points``); each candidate draws one uniformly. It
        varies neither the noise multiplier nor any extension's noise below the plan's.
      chunk_size: candidates per compiled call (default: the next power of two of K, at most
        :data:`MAX_CHUNK`); the last chunk is padded, so one compilation per chunk size.
      verbose: print the account's breakdown (:meth:`EndToEnd.describe`) to stderr.

    Every argument is checked, and the procedure accounted, before anything is trained
    (TypeError/ValueError naming the argument). When the noisy scores alone take more than half
    the budget a warning says so, with the breakdown.
    """
    plan, values0 = _check_search_config(config)
    selection = plan.accountant
    if not isinstance(selection, PrivateSelection):
        raise ValueError(
            "config.plan must be a selection's plan: PrivateSelection.plan(sampling, n, ...),"
            " whose noise is calibrated for (and whose epsilon accounts) the whole procedure; got"
            f" {plan.describe()}"
        )
    _check_selection(selection)
    key = check_key(key)
    x, y = check_data(data, params0, config.model)
    n = algorithms.rows(x)
    if n - selection.validation_size != plan.n:
        raise ValueError(
            f"the data has {n} rows: {n - selection.validation_size} train after the "
            f"{selection.validation_size} validation rows, but the plan was made for n={plan.n} "
            "(make it with selection.plan(sampling, len(data), ...))"
        )
    values, charged = _checked_grid(
        config, plan, values0, grid, params0, algorithms.num_features(x)
    )
    if float(np.min(charged["noise_multiplier"])) < plan.noise_multiplier:
        raise ValueError(
            "a grid point (or hyper.extra) lowers an extension's noise below the plan's (noise"
            " factor < 1): the selection's epsilon, calibrated for the plan's noise, would not"
            " cover that candidate"
        )
    if chunk_size is not None:
        chunk_size = check_positive_int(chunk_size, "chunk_size")
    z = plan.noise_multiplier
    assert plan.delta is not None
    accounting = dataclasses.replace(
        selection.end_to_end(plan.execution, z, plan.delta),
        rests_on=tuple(ext_reliance(config.extensions)),
    )
    _warn_if_scores_dominate(
        accounting,
        selection.scores_epsilon(plan.execution, plan.delta),
        not selection.splits_parts(plan.execution),
    )
    if verbose:
        print(accounting.describe(), file=sys.stderr)

    train_data, validation = split((x, y), selection.validation_size, key)
    num = _num_candidates(selection, key)
    if num == 0:  # the Poisson K: nothing runs, the output is ⊥
        return SelectionResult(
            None,
            None,
            None,
            z,
            accounting,
            {"num_candidates": 0, "grid_indices": np.zeros(0, np.int64)},
        )
    chunk = chunk_size or min(MAX_CHUNK, 1 << (num - 1).bit_length())
    (found,) = _run_searches(
        config, params0, train_data, validation, [(key, values)], selection, chunk
    )
    assert found.index is not None
    # The chosen point as given in the grid (Python floats for scalar fields, arrays for pytree
    # ones).
    point = {
        name: jax.tree_util.tree_map(
            lambda v: v[found.index].item() if np.ndim(v) == 1 else v[found.index], value
        )
        for name, value in values.items()
    }
    return SelectionResult(
        found.params, point, found.score, z, accounting, {**found.diagnostics, "chunk_size": chunk}
    )


@dataclasses.dataclass(frozen=True)
class Search:
    """One private random search of :func:`search_many`: its PRNG ``key`` (streams
    :data:`NUM_CANDIDATES`, :data:`CANDIDATES`) and its ``grid`` ``{field: values}`` of ``G``
    points (as :func:`select`'s), which may set the training noise per point."""

    key: Array
    grid: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """What one :class:`Search` of :func:`search_many` returns. ``params``, ``index`` (the chosen
    point's position in the grid) and ``score`` (its noisy validation accuracy) are the private
    output (None when the Poisson ``K`` was 0), at ``accounting`` (None under a non-private
    plan); ``diagnostics`` (``num_candidates``, ``grid_indices``, ``noisy_scores``,
    ``accuracies``, ``best``) are **not** private."""

    params: Params | None
    index: int | None
    score: float | None
    diagnostics: dict[str, Any]
    accounting: EndToEnd | None = None


def _num_candidates(selection: PrivateSelection, key: Array) -> int:
    return int(selection.repetitions.sample(streams.stream(key, NUM_CANDIDATES)))


def _run_searches(
    config: TrainConfig,
    params0: Params,
    train: tuple[Inputs, ArrayLike],
    validation: tuple[Inputs, ArrayLike],
    searches: list[tuple[Array, dict[str, Any]]],
    selection: PrivateSelection,
    chunk: int,
) -> list[SearchResult]:
    """Every search's candidates (drawn from its key's streams), trained ``chunk`` at a time as one
    compiled call (each candidate a "seed" of :func:`dpprep.sweeps.sweep_points` with its own key
    and point; the last call padded with copies of the last candidate) and scored on ``validation``.
    """
    names = tuple(searches[0][1])
    m = int(np.shape(validation[1])[0])
    drawn: list[tuple[int, np.ndarray, np.ndarray, Any]] = []  # K, grid indices, score noise, keys
    for key, values in searches:
        num = _num_candidates(selection, key)
        if num == 0:
            drawn.append((0, np.zeros(0, np.int64), np.zeros(0), None))
            continue
        # One _draws shape per power of two (the padding repeats the last candidate, then is
        # dropped).
        which = np.minimum(np.arange(1 << (num - 1).bit_length()), num - 1)
        keys, idx, noise = _draws(
            key, jnp.asarray(which), int(jax.tree_util.tree_leaves(values)[0].shape[0])
        )
        drawn.append(
            (num, np.asarray(idx, np.int64)[:num], np.asarray(noise, np.float64)[:num], keys[:num])
        )
    owners = [(s, j) for s, (num, *_) in enumerate(drawn) for j in range(num)]
    accuracies = [np.zeros(num) for num, *_ in drawn]
    scores = [np.zeros(num) for num, *_ in drawn]
    best: list[int] = [-1] * len(searches)
    best_params: list[Params | None] = [None] * len(searches)
    for start in range(0, len(owners), chunk):
        take = [owners[min(i, len(owners) - 1)] for i in range(start, start + chunk)]
        real = min(chunk, len(owners) - start)
        keys = jnp.stack([drawn[s][3][j] for s, j in take])
        # Each candidate's point of its own search's grid (per_seed: one point per candidate).
        points = {
            name: jax.tree_util.tree_map(
                lambda *leaves: np.stack(leaves)[:, None],
                *[
                    jax.tree_util.tree_map(
                        lambda v, i=drawn[s][1][j]: np.asarray(v)[i], searches[s][1][name]
                    )
                    for s, j in take
                ],
            )
            for name in names
        }
        result = sweeps.sweep_points(
            config, params0, train, keys, points, eval_data=validation, per_seed=names, chunk_size=1
        )
        assert result.evaluation is not None
        acc = np.asarray(result.evaluation["accuracy"], np.float64)[:, 0]
        for c, (s, j) in enumerate(take[:real]):
            accuracies[s][j] = acc[c]
            # The count is exact: a float32 mean of m zeros and ones, times m, rounds back to it.
            scores[s][j] = (np.rint(acc[c] * m) + selection.score_noise * drawn[s][2][j]) / m
            if best[s] < 0 or scores[s][j] > scores[s][best[s]]:  # ties: the earliest candidate
                best[s] = j
                best_params[s] = jax.tree_util.tree_map(
                    lambda a, c=c: np.asarray(a)[c, 0], result.params
                )
    out = []
    for s, (num, idx, _, _) in enumerate(drawn):
        diagnostics: dict[str, Any] = {"num_candidates": num, "grid_indices": idx}
        if num == 0:
            out.append(SearchResult(None, None, None, diagnostics))
            continue
        diagnostics.update(noisy_scores=scores[s], accuracies=accuracies[s], best=best[s])
        out.append(
            SearchResult(best_params[s], int(idx[best[s]]), float(scores[s][best[s]]), diagnostics)
        )
    return out


def search_many(
    config: TrainConfig,
    params0: Params,
    train: tuple[Inputs, ArrayLike],
    validation: tuple[Inputs, ArrayLike],
    searches: Sequence[Search],
    *,
    selection: PrivateSelection,
    chunk_size: int = 8,
) -> list[SearchResult]:
    """Several private random searches on one split, their candidates packed together into
    compiled calls of ``chunk_size`` (the last padded): one compilation however many searches and
    candidates. Each search runs :func:`select`'s procedure (steps 2–4 of the module docstring)
    with ``selection``'s ``K`` and score noise, but its grid may **set the training noise per
    point** (``noise_multiplier`` or an extension's noise field). Under a private plan every point
    is checked against it (noise > 0, every extension's noise covered) and each search is accounted
    by :meth:`PrivateSelection.end_to_end_of_grid` (every candidate charged as the mixture over the
    grid's points, which it draws uniformly): its :attr:`SearchResult.accounting`. Under a
    non-private plan nothing is
    claimed (``accounting`` None: e.g. a nominal-ε mechanism whose guarantee, if any, its caller
    derives). Each search is private on its own; releasing several outputs composes, which the
    caller charges.

    Args:
      config: the static config of every candidate (``config.plan``: the candidates' run on the
        training part; ``config.hyper`` gives the fields no grid varies). Classifiers only; one
        iterate.
      params0: initial parameters.
      train, validation: the split (:func:`split`); ``validation`` has ``selection.validation_size``
      rows.
      searches: the :class:`Search` es (every grid varies the same fields).
      selection: ``K``'s distribution, the score noise and the validation size.
      chunk_size: candidates per compiled call.

    Every argument is checked before anything is trained (ValueError naming the argument).
    """
    plan, values0 = _check_search_config(config)
    selection = _check_selection(selection)
    if plan.accountant is not None and plan.accountant != selection:
        raise ValueError(
            "config.plan is accounted by another accountant; search_many accounts each search"
            " itself (PrivateSelection.end_to_end_of_grid)"
        )
    if plan.fixed_events:
        raise ValueError(
            "config.plan carries private statistics (fixed_events): a search composes them once,"
            " outside the repetition, as the selection's own fixed_events (PrivateSelection(...,"
            " fixed_events=...))"
        )
    searches = list(searches)
    if not searches or not all(isinstance(s, Search) for s in searches):
        raise ValueError("searches must be a non-empty sequence of Search(key, grid)")
    x, _ = check_data(train, params0, config.model)
    checked_plan(config, algorithms.rows(x))
    xv, _ = check_data(validation, params0, config.model)
    if algorithms.rows(xv) != selection.validation_size:
        raise ValueError(
            f"validation has {algorithms.rows(xv)} rows, selection.validation_size="
            f"{selection.validation_size}"
        )
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    checked: list[tuple[Array, dict[str, Any]]] = []
    accounts: list[EndToEnd | None] = []
    for i, search in enumerate(searches):
        values, charged = _checked_grid(
            config,
            plan,
            values0,
            search.grid,
            params0,
            algorithms.num_features(x),
            noise_levels=True,
        )
        if i and tuple(values) != tuple(checked[0][1]):
            raise ValueError(
                f"every search's grid must vary the same fields: searches[{i}] varies"
                f" {list(values)}, searches[0] {list(checked[0][1])}"
            )
        checked.append((check_key(search.key), values))
        if plan.private and any(charged["fixed_events"]):
            raise ValueError(
                f"searches[{i}]'s grid declares private statistics per point (e.g. a private mean):"
                " a search composes statistics once, as the selection's fixed_events"
            )
        if plan.private:
            assert plan.delta is not None
            account = selection.end_to_end_of_grid(
                plan.execution, charged["noise_multiplier"], plan.delta
            )
            accounts.append(
                dataclasses.replace(account, rests_on=tuple(ext_reliance(config.extensions)))
            )
        else:
            accounts.append(None)
    found = _run_searches(config, params0, train, validation, checked, selection, chunk_size)
    return [
        dataclasses.replace(result, accounting=account) for result, account in zip(found, accounts)
    ]


__all__ = [
    "CANDIDATES",
    "EndToEnd",
    "GRID_POINT",
    "MAX_CHUNK",
    "NUM_CANDIDATES",
    "PARTS",
    "Part",
    "PrivateSelection",
    "Repetitions",
    "SCORE",
    "SPLIT",
    "Search",
    "SearchResult",
    "SelectionResult",
    "candidate_key",
    "search_many",
    "select",
    "split",
    "tnb_gamma",
    "tnb_mean",
    "training_only",
]
