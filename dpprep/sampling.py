"""Batch selection for the private learners, as small :class:`Sampler` objects.

A sampler says how many steps a run takes, how large its fixed-shape batch is and what it is
divided by, how to draw step ``t``'s batch, and which dp-accounting event one noisy step of it
is. :class:`dpprep.plan.ExecutionPlan` reads all of that once, so the engine and the accountant
count the same steps. Every draw returns fixed-shape indices plus a 0/1 ``mask`` marking real
examples, so a whole run compiles once and runs under ``lax.scan``. Registered samplers
(:data:`SAMPLERS`): ``full``, ``poisson``, ``shuffle``, ``without_replacement``, ``replacement``,
``fixed_order``; :func:`register` adds another.

**Poisson sampling and overflow.** Each example joins the batch independently with probability
``q``; the realised size is ``Binomial(n, q)``. The batch is padded to a fixed size ``pad`` chosen
by :func:`poisson_pad_size` so that, over a whole run of ``steps`` steps, the probability that any
draw exceeds ``pad`` is at most ``max_overflow_prob`` (default 1e-10). Should a draw overflow, the
``pad`` lowest selected indices are kept and the step's ``overflow`` flag is set (the learners
record it per step and warn). The accountants analyse the ideal Poisson mechanism; the implemented
one differs from it only on the overflow event, so it is within total variation ``p`` of it
(``p`` = the run's overflow probability) and is therefore ``(ε, δ + (1 + e^ε)·p)``-DP whenever the
ideal one is ``(ε, δ)``-DP (:func:`overflow_delta` computes that slack). With the defaults it is
below 3e-9 even at ε = 10.

Cost per Poisson draw is O(n): one random 32-bit word per example compared with a threshold
(:func:`inclusion_threshold`: the inclusion probability is never above ``q``), then a fixed-size
``jnp.nonzero(..., size=pad)``: a fixed O(n) cost per step, whatever the batch size, that vmapped
sweeps share across the runs with the same key.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import Any, Protocol

import jax
import jax.numpy as jnp
from scipy import stats

from dpprep.accounting.dp import DpSgdSchedule
from dpprep.renames import renamed_fields, warn_renamed
from dpprep.tracing import everywhere
from dpprep.validation import check_epsilon, check_positive_int, check_probability

Array = jax.Array


def poisson_pad_size(n: int, q: float, steps: int = 1, *, max_overflow_prob: float = 1e-10) -> int:
    """Smallest ``pad`` with ``P[some of `steps` Binomial(n, q) draws > pad] <=
    max_overflow_prob``."""
    n = check_positive_int(n, "n")
    q = check_probability(q, "q")
    steps = check_positive_int(steps, "steps")
    check_probability(max_overflow_prob, "max_overflow_prob")
    per_step = max_overflow_prob / steps  # union bound over the steps
    pad = int(stats.binom.isf(per_step, n, q))
    # isf is the smallest k with sf(k) <= p up to floating error; step up until it holds exactly.
    while pad < n and stats.binom.sf(pad, n, q) > per_step:
        pad += 1
    return max(1, min(pad, n))


def overflow_probability(n: int, q: float, pad: int, steps: int = 1) -> float:
    """Probability that at least one of ``steps`` Poisson draws selects more than ``pad``
    examples."""
    n = check_positive_int(n, "n")
    q = check_probability(q, "q")
    pad = check_positive_int(pad, "pad")
    steps = check_positive_int(steps, "steps")
    per_step = float(stats.binom.sf(pad, n, q))
    return float(-math.expm1(steps * math.log1p(-per_step))) if per_step < 1 else 1.0


def overflow_delta(epsilon: float, overflow_prob: float) -> float:
    """δ slack ``(1 + e^ε)·p`` to add when a mechanism is within TV ``p`` of an (ε, δ)-DP one
    (``inf`` when the slack overflows a float, i.e. it exceeds every δ)."""
    epsilon = check_epsilon(epsilon)
    p = check_probability(overflow_prob, "overflow_prob", allow_zero=True)
    if p == 0.0:
        return 0.0
    if epsilon < 700.0:  # e^ε is finite: the plain product (what every pinned slack used)
        return (1.0 + math.exp(epsilon)) * p
    # Log space beyond: log((1 + e^ε)p) = ε + log1p(e^-ε) + log p; e^ε alone would overflow.
    log_slack = epsilon + math.log1p(math.exp(-epsilon)) + math.log(p)
    return math.exp(log_slack) if log_slack < math.log(sys.float_info.max) else math.inf


def inclusion_threshold(q: float) -> int | None:
    """The 32-bit threshold ``t = ⌊q·2³²⌋`` of :func:`poisson_batch` (None when q = 1).

    Example ``i`` is selected when a uniform 32-bit word is ``< t``, i.e. with probability
    ``t/2³² ∈ (q − 2⁻³², q]``: never above the ``q`` the accountant is given (ε grows with q), so
    accounting at ``q`` stays valid. (Comparing a float32 uniform with ``q`` instead rounds the
    rate *up* by up to 2⁻²³.)
    """
    q = check_probability(q, "q")
    return None if q >= 1.0 else int(math.floor(q * 2.0**32))


def poisson_batch(key: Array, n: int, q: float, pad: int) -> tuple[Array, Array, Array, Array]:
    """One Poisson draw: ``(indices (pad,), mask (pad,) float32, size, overflow)``.

    ``q`` is a host float (see :func:`inclusion_threshold` for the exact inclusion probability).
    ``size`` is the realised Binomial(n, q) draw (it may exceed ``pad``, in which case
    ``overflow`` is True and only the ``pad`` lowest selected indices are returned). Unused slots
    hold index 0 with mask 0.
    """
    threshold = inclusion_threshold(q)
    if threshold is None:
        selected = jnp.ones((n,), bool)
    else:
        selected = jax.random.bits(key, (n,), jnp.uint32) < jnp.uint32(threshold)
    size = jnp.sum(selected, dtype=jnp.int32)
    (indices,) = jnp.nonzero(selected, size=pad, fill_value=0)
    mask = (jnp.arange(pad) < size).astype(jnp.float32)
    return indices.astype(jnp.int32), mask, size, size > pad


def shuffled_batches(key: Array, n: int, batch_size: int, epochs: int) -> tuple[Array, Array]:
    """Fixed-size batches over ``epochs`` fresh permutations: ``(indices, mask)``, each
    ``(epochs·⌈n/B⌉, B)``. Every example appears exactly once per epoch; the last batch of an
    epoch is padded (mask 0) when ``B`` does not divide ``n``.
    """
    per_epoch = steps_per_epoch(n, batch_size)
    padded = per_epoch * batch_size
    perms = jax.vmap(lambda k: jax.random.permutation(k, n))(jax.random.split(key, epochs))
    indices = jnp.pad(perms, ((0, 0), (0, padded - n))).reshape(epochs * per_epoch, batch_size)
    mask = (jnp.arange(padded) < n).astype(jnp.float32)
    mask = jnp.broadcast_to(mask, (epochs, padded)).reshape(epochs * per_epoch, batch_size)
    return indices.astype(jnp.int32), mask


def gather(data: Any, idx: Array | None, mask: Array | None) -> Any:
    """Rows ``idx`` of every leaf of ``data`` (the data itself when ``idx`` is None), the padded
    slots (``mask`` 0) set to zeros. Poisson's and shuffle's unused slots point at index 0; were
    they filled from it, a slot counted by mistake would be a second copy of record 0. Zeros are
    no record: whatever counts them adds a term that depends on no one's data."""
    if idx is None:
        return data

    def zeroed(a: Array, idx: Array, mask: Array) -> Array:
        rows = a[idx]
        real = (mask > 0).reshape((-1,) + (1,) * (rows.ndim - 1))
        return jnp.where(real, rows, jnp.zeros((), rows.dtype))

    def take(a: Any) -> Array:
        a = jnp.asarray(a)
        if mask is None:
            return a[idx]
        # The cond hands the consumers one materialised batch. A bare select is fused by XLA
        # into every consumer and recomputed per element there: 1.12x an MLP's whole step on the
        # vmap path (per-example outer products), against 1.00x this way
        # (benchmarks/guard_cost.py). The branch without zeroing runs only when no slot is padded.
        return jax.lax.cond(
            everywhere(jnp.all(mask > 0)), lambda a, idx, _: a[idx], zeroed, a, idx, mask
        )

    return jax.tree_util.tree_map(take, data)


def steps_per_epoch(n: int, batch_size: int) -> int:
    """Number of shuffled fixed-size batches per epoch, ``⌈n/B⌉``."""
    return -(-check_positive_int(n, "n") // check_positive_int(batch_size, "batch_size"))


def poisson_steps(n: int, batch_size: int, epochs: float) -> int:
    """Steps of Poisson DP-SGD for ``epochs`` passes at expected batch size ``B``: ``⌈E·n/B⌉``."""
    n = check_positive_int(n, "n")
    batch_size = check_positive_int(batch_size, "batch_size")
    if not (math.isfinite(float(epochs)) and float(epochs) > 0):
        raise ValueError(f"epochs must be a finite number > 0, got {epochs!r}")
    return max(1, math.ceil(float(epochs) * n / batch_size - 1e-9))


def stopping_time(key: Array, n: int, kappa: int = 1) -> Array:
    """Hu et al.'s random stopping time ``T ~ Unif{1, …, n − κ + 1}`` (DP-SGD by iteration)."""
    return jax.random.randint(key, (), 1, n - kappa + 2, dtype=jnp.int32)


def without_replacement_batch(key: Array, n: int, batch_size: int) -> Array:
    """``batch_size`` distinct indices, uniform over the subsets of that size (a fresh draw per
    step): the first ``B`` of a random permutation."""
    return jax.random.permutation(key, n)[:batch_size].astype(jnp.int32)


# --------------------------------------------------------------------------------------------------
# Samplers: what the engine draws and what the accountant charges, side by side.


@renamed_fields(normaliser="normalize_by")
@dataclasses.dataclass(frozen=True)
class Layout:
    """Static shape of a run as a sampler lays it out on ``n`` records (see :class:`Sampler`)."""

    batch_size: int  # expected (poisson) or fixed batch size; n for full, 1 for fixed_order
    steps: int  # scan length = noisy releases (with random_stop: their maximum)
    pad: int  # rows of the fixed-shape batch
    normalize_by: float  # the noisy sum is divided by this
    epochs: int = 0  # permutations drawn up front (shuffle)
    random_stop: bool = False  # fixed_order without steps: stop at T ~ Unif{1..n−κ+1}


class Sampler(Protocol):
    """How a learner picks each step's records. Implementations are stateless and hashable.

    ``schedule(plan)`` is the :class:`dpprep.accounting.dp.DpSgdSchedule` the accountant
    charges for ``plan`` (under its ``neighboring_relation``), or None when dp-accounting has no
    event for the sampler (the plan then refuses to account it and says what to use instead,
    ``no_event_reason``).
    """

    name: str
    neighboring_relation: str
    no_event_reason: str

    def layout(
        self,
        n: int,
        batch_size: int | None,
        steps: int | None,
        epochs: float | None,
        *,
        kappa: int,
        max_overflow_prob: float,
    ) -> Layout: ...

    def prepare(self, key: Array, plan: Any) -> Any: ...

    def select(
        self, key: Array, plan: Any, t: Array, prepared: Any
    ) -> tuple[Array | None, Array | None, Array, Array]: ...

    def schedule(self, plan: Any) -> Any: ...


def _need_batch(name: str, batch_size: int | None, n: int, *, at_most_n: bool = True) -> int:
    if batch_size is None:
        raise ValueError(f"batch_size is required for sampling={name!r}")
    b = check_positive_int(batch_size, "batch_size")
    if at_most_n and b > n:
        raise ValueError(f"batch_size must be <= n = {n} for sampling={name!r}, got {b}")
    return b


def _steps_or_epochs(name: str, steps: int | None, epochs: float | None, per_epoch) -> int:
    if steps is not None and epochs is not None:
        raise ValueError("give steps or epochs, not both")
    if steps is None and epochs is None:
        raise ValueError(f"give steps or epochs for sampling={name!r}")
    return check_positive_int(steps, "steps") if steps is not None else per_epoch(epochs)


@dataclasses.dataclass(frozen=True)
class _Base:
    name: str = ""
    neighboring_relation: str = "add_remove"
    no_event_reason: str = ""

    def prepare(self, key: Array, plan: Any) -> Any:
        return None


@dataclasses.dataclass(frozen=True)
class FullBatch(_Base):
    """Every record every step (DP-GD); divided by ``n``. ``epochs`` = steps."""

    name: str = "full"

    def layout(self, n, batch_size, steps, epochs, *, kappa, max_overflow_prob):
        steps = _steps_or_epochs(
            self.name, steps, epochs, lambda e: check_positive_int(e, "epochs")
        )
        return Layout(n, steps, n, float(n))

    def select(self, key, plan, t, prepared):
        return None, None, jnp.int32(plan.n), jnp.bool_(False)

    def schedule(self, plan):
        return _schedule(plan.steps, "full")


@dataclasses.dataclass(frozen=True)
class PoissonSampler(_Base):
    """Each record independently with rate ``q = B/n`` (DP-SGD as the accountants analyse it),
    padded to a fixed size (:func:`poisson_pad_size`) and divided by the expected size ``B``."""

    name: str = "poisson"

    def layout(self, n, batch_size, steps, epochs, *, kappa, max_overflow_prob):
        b = _need_batch(self.name, batch_size, n)
        steps = _steps_or_epochs(self.name, steps, epochs, lambda e: poisson_steps(n, b, e))
        pad = poisson_pad_size(n, b / n, steps, max_overflow_prob=max_overflow_prob)
        return Layout(b, steps, pad, float(b))

    def select(self, key, plan, t, prepared):
        idx, mask, size, overflow = poisson_batch(
            jax.random.fold_in(key, t), plan.n, plan.batch_size / plan.n, plan.pad
        )
        return idx, mask, size, overflow

    def schedule(self, plan):
        return _schedule(plan.steps, self.name, plan.batch_size / plan.n)


@dataclasses.dataclass(frozen=True)
class ShuffleSampler(PoissonSampler):
    """Fresh permutation per epoch cut into ``⌈n/B⌉`` batches of ``B`` (the last padded, still
    divided by ``B``); ``epochs`` must be an integer and the run takes ``E·⌈n/B⌉`` steps.

    **Accounted as if Poisson-subsampled** with ``q = B/n`` over the steps it really takes (the
    customary number, not a proof: shuffled batches can leak more, Chua et al. 2024)."""

    name: str = "shuffle"

    def layout(self, n, batch_size, steps, epochs, *, kappa, max_overflow_prob):
        b = _need_batch(self.name, batch_size, n)
        per_epoch = steps_per_epoch(n, b)
        steps = _steps_or_epochs(
            self.name, steps, epochs, lambda e: check_positive_int(e, "epochs") * per_epoch
        )
        return Layout(b, steps, b, float(b), epochs=-(-steps // per_epoch))

    def prepare(self, key, plan):
        return shuffled_batches(key, plan.n, plan.pad, plan.epochs)

    def select(self, key, plan, t, prepared):
        idx_all, mask_all = prepared
        mask = mask_all[t]
        return idx_all[t], mask, jnp.sum(mask).astype(jnp.int32), jnp.bool_(False)


@dataclasses.dataclass(frozen=True)
class WithoutReplacementSampler(_Base):
    """``B`` distinct records drawn afresh each step, divided by ``B``. Its event is
    dp-accounting's sampled-without-replacement Gaussian, a replace-one guarantee."""

    name: str = "without_replacement"
    neighboring_relation: str = "replace_one"

    def layout(self, n, batch_size, steps, epochs, *, kappa, max_overflow_prob):
        b = _need_batch(self.name, batch_size, n)
        steps = _steps_or_epochs(self.name, steps, epochs, lambda e: poisson_steps(n, b, e))
        return Layout(b, steps, b, float(b))

    def select(self, key, plan, t, prepared):
        idx = without_replacement_batch(jax.random.fold_in(key, t), plan.n, plan.pad)
        return idx, None, jnp.int32(plan.pad), jnp.bool_(False)

    def schedule(self, plan):
        return DpSgdSchedule(
            plan.steps, "without_replacement", plan.batch_size / plan.n, dataset_size=plan.n
        )


@dataclasses.dataclass(frozen=True)
class WithReplacementSampler(_Base):
    """``B`` indices uniform with replacement each step (Sun et al.'s Algorithm 1), divided by
    ``B``. dp-accounting has no accountant for it."""

    name: str = "replacement"
    no_event_reason: str = (
        "dp-accounting has no accountant for sampling with replacement; "
        "use sampling='poisson' or 'without_replacement' for an accounted run"
    )

    def layout(self, n, batch_size, steps, epochs, *, kappa, max_overflow_prob):
        b = _need_batch(self.name, batch_size, n, at_most_n=False)
        steps = _steps_or_epochs(self.name, steps, epochs, lambda e: poisson_steps(n, b, e))
        return Layout(b, steps, b, float(b))

    def select(self, key, plan, t, prepared):
        idx = jax.random.randint(jax.random.fold_in(key, t), (plan.pad,), 0, plan.n)
        return idx, None, jnp.int32(plan.pad), jnp.bool_(False)

    def schedule(self, plan):
        return None


@dataclasses.dataclass(frozen=True)
class FixedOrderSampler(_Base):
    """Record ``t`` at step ``t``, not divided (normaliser 1), replace-one. With ``steps`` given
    (DP-FGD, T ≤ n) each record is in at most one step, so the whole run is one Gaussian release
    per record. Without ``steps`` it is DP-SGD by iteration: the scan has ``n − κ + 1`` steps and
    stops at ``T ~ Unif{1..n−κ+1}``; that is analysed by amplification by iteration
    (:func:`dpprep.accounting.dp.sgd_iter_epsilon`), not by a dp-accounting event."""

    name: str = "fixed_order"
    neighboring_relation: str = "replace_one"
    no_event_reason: str = (
        "DP-SGD by iteration (fixed_order with a random stop) is accounted by amplification by "
        "iteration, not by a dp-accounting event: use plan.epsilon / plan.calibrate "
        "(dpprep.accounting.dp.sgd_iter_epsilon with noise std z·C and L = C)"
    )

    def layout(self, n, batch_size, steps, epochs, *, kappa, max_overflow_prob):
        if epochs is not None:
            raise ValueError(
                "fixed_order takes steps (or None for the random stopping time), not epochs"
            )
        if steps is None:
            kappa = check_positive_int(kappa, "kappa")
            if kappa > n:
                raise ValueError(f"kappa must be <= n = {n}, got {kappa}")
            return Layout(1, n - kappa + 1, 1, 1.0, random_stop=True)
        steps = check_positive_int(steps, "steps")
        if steps > n:
            raise ValueError(
                f"steps must be <= n = {n} for fixed_order (one record per step), got {steps}"
            )
        return Layout(1, steps, 1, 1.0)

    def select(self, key, plan, t, prepared):
        return t[None], None, jnp.int32(1), jnp.bool_(False)

    def schedule(self, plan):
        # Each record is in at most one step: the run is one Gaussian release per record.
        return None if plan.random_stop else _schedule(1, "full")


def _schedule(steps: int, sampling: str, rate: float = 1.0) -> DpSgdSchedule:
    # DpSgdSchedule validates the name
    return DpSgdSchedule(steps, sampling, rate)  # type: ignore[arg-type]


SAMPLERS: dict[str, Sampler] = {}


def neighboring_relation_of(sampler: Sampler) -> str:
    """``sampler.neighboring_relation`` (a sampler written for dpprep 0.1 names it
    ``neighbouring``: read with a :class:`~dpprep.renames.RenamedWarning`)."""
    relation = getattr(sampler, "neighboring_relation", None)
    if relation is None and hasattr(sampler, "neighbouring"):
        warn_renamed("neighbouring", "neighboring_relation", f"{type(sampler).__qualname__}.")
        relation = sampler.neighbouring
    return relation  # type: ignore[return-value]  # the plan checks it against the relations


def register(sampler: Sampler) -> Sampler:
    """Adds ``sampler`` under ``sampler.name`` (a new way of picking batches plugs in here). A name
    already registered is refused: plans look their sampler up by name, so replacing one would
    change what every existing plan of that name runs, and not what it charges."""
    if not getattr(sampler, "name", ""):
        raise ValueError("sampler.name must be a non-empty string")
    if sampler.name in SAMPLERS:
        raise ValueError(
            f"a sampler named {sampler.name!r} is registered already; register yours under a new"
            " name"
        )
    SAMPLERS[sampler.name] = sampler
    return sampler


for _sampler in (
    FullBatch(),
    PoissonSampler(),
    ShuffleSampler(),
    WithoutReplacementSampler(),
    WithReplacementSampler(),
    FixedOrderSampler(),
):
    register(_sampler)  # type: ignore[arg-type]  # each implements the Sampler protocol


def get(name: str) -> Sampler:
    """The registered sampler called ``name``; ValueError listing the known ones otherwise."""
    if name not in SAMPLERS:
        raise ValueError(f"sampling must be one of {tuple(SAMPLERS)}, got {name!r}")
    return SAMPLERS[name]
