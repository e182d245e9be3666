"""Empirical privacy auditing: ε lower bounds for every dpprep learner from many in/out runs.

An audit trains a learner many times on a dataset *with* a canary record and many times on the
neighbouring dataset *without* it (or with the canary replaced, for replace-one guarantees), scores
each run with an attack that only sees what the threat model allows, and turns the two score samples
into a high-confidence **lower bound** on ε at the learner's δ. A lower bound is evidence, never a
certificate: it can expose a guarantee that is false (too little noise, wrong accounting, a
pre-processing step nobody charged), but a bound below the theoretical ε proves nothing about the
worst case — a better attack, canary or dataset might reach higher.

Threat models (:data:`THREAT_MODELS`):

* ``"white_box"``: every noisy update is observed (the trajectory θ_0..θ_T) and the canary is a
  *Dirac gradient canary*: under the audit's linear loss ``ℓ(θ; x, y) = −y·⟨θ, x⟩`` every record's
  gradient is ``−y·x`` whatever θ is, so the canary ``x = a·C·e_d`` (a coordinate no other record
  uses; ``a = canary_norm`` = 4 by default) is clipped by an honest learner to exactly ``−C·e_d``
  in each batch it is in, and nothing else moves that coordinate (background records have
  ``y = 0``: zero gradient, the adversary's best case, Nasr et al. 2023). Clipping binds on the
  canary, so a learner clipping to 2C, or not at all, releases a larger shift. The attack is the
  likelihood-ratio test, for the learner's sampler, of what the *honest* learner releases
  (Neyman–Pearson: the most powerful test of this pair), so white-box bounds are close to tight.
* ``"final_model"``: only the last iterate is released; the canary is an *input-space* record of a
  logistic regression (``x_c = a·e_d``, label 1, large enough that clipping binds early on) and the
  score is the final model's margin ``⟨θ_T, x_c⟩``. DP-SGD by iteration is audited only here: its
  amplification-by-iteration
  guarantee hides the intermediate iterates (white-box is outside its threat model and refused).

**The yardstick is not the code under test.** DP-GD, DP-SGD and DPSGD-F are held to the (ε, δ)
the user asked for through :func:`yardstick`: the stated run (sampler, n, batch size, steps or
epochs, DPSGD-F's ε_F) calibrated by dp-accounting directly, never by the plan under test, with
deterministic checks of the plan against it (:meth:`Yardstick.checks`) — a calibration or
step-count bug in the plan cannot move the ε it is audited against.

**A suite of scores.** Besides the likelihood-ratio attack below, a runner may return the updates of
coordinates no record touches; the :class:`NoiseTest` checks that they are the i.i.d. Gaussian noise
the account charges (scale, and independence across steps, runs and coordinates) — evidence that
needs no model of the attack (a frozen noise key, shared noise). The verdict is the union of the
rigorous bounds and the noise test, at a split significance.

**Canaries that stress the rules.** White-box DP-GD and DP-SGD draw the canary's position per run
(first, last, random: :data:`CANARY_POSITIONS`) and make every other record oppose it (about C per
batch), so slot-bound bugs and batch-level clipping rules show; the paths a user runs are audited
too (:data:`PATHS`: one point of a vmapped sweep, the vmap clipping path of a two-leaf model;
DPSGD-F's grid path, CorrDP's sensitive coordinates, a private selection end to end and its noisy
validation scores through ``search_many``, the public drivers with the options users set).

Learners (:data:`LEARNERS`) and the ε each audit is held against (``AuditResult.theoretical``):
DP-GD, Poisson DP-SGD (the yardstick, overflow slack included), shuffled DP-SGD (the rigorous
no-amplification bound: each record is in one batch per epoch, so E Gaussian releases; the
customary as-if-Poisson number is reported as ``claimed`` — an audit can and does exceed it),
DP-SGD by iteration (Feldman et al.'s bound, :func:`dpprep.accounting.dp.sgd_iter_epsilon`),
DPSGD-F (the PLD-composed [private mean, DP-SGD] event; the canary moves the private mean as
well as the gradients and the attack scores both), CorrDP-SGD (a canary that changes only an
insensitive feature, audited against *standard* DP of that pair: CorrDP's nominal ε charges such
a change through its correlation weight only, so it is not a standard-DP promise for it) and mean
imputation followed by DP-GD (audited against Hu et al.'s overall ε, Theorem 2; the canary moves
the imputed value of every incomplete row).

Statistics come from ``jax_privacy.auditing.CanaryScoreAuditor`` (Clopper–Pearson over runs,
:meth:`epsilon_clopper_pearson`), except the Gaussian-DP bound: jax-privacy 2.0.0's
``epsilon_from_gdp`` takes ``|μ|`` of an estimate built from upper confidence bounds, which is not
a valid bound for the reversed direction and returns ε ≈ 2–3 on identical score samples
(google-deepmind/jax_privacy PR #270). :func:`gdp_lower_bound` is the same estimator in the
direction the audit's scores are oriented (in-canary scores high) only. Thresholds are fixed
before the evaluation runs, from separate pilot runs (``levels`` quantiles of the pilot scores), so
the Bonferroni correction covers ``levels`` thresholds instead of one per distinct score. The GDP
bound additionally assumes that the learner's trade-off curve is Gaussian-shaped (exact for DP-GD;
an approximation for subsampled learners); the Clopper–Pearson bound assumes nothing.

All runs of an audit are one jitted, vmapped call over (seed, canary inclusion), in chunks.

**Which bound to trust.** :attr:`AuditResult.rigorous` names the bounds that are valid for that
learner whatever its implementation does: Clopper–Pearson always; the GDP bound too for full-batch
learners (their pair's trade-off curve is Gaussian, bugs in noise, clipping or release count
included); the trade-off test (:func:`tradeoff_excess`) for learners whose accountant has a
privacy profile (DP-GD, Poisson DP-SGD, DPSGD-F, and shuffled DP-SGD through its proven
no-amplification bound, ``epochs`` Gaussian releases): the attack's (FPR, FNR) points, with
Clopper–Pearson confidence, against the whole claimed curve δ(ε) — valid for any mechanism, and
with power where the one-point Clopper–Pearson bound has none (subsampled learners).
:attr:`AuditResult.violation` is the verdict of the rigorous tests against the theoretical ε.
It is the union of k ≤ 4 tests (with the noise test), so each is computed at ``level / k``
(Bonferroni, :func:`test_significance`).

**Alarms that mean something.** A verdict is reached in two stages on independent runs: the tests
fire at ``screen`` (5 %) on the first runs — the learner is *suspected* — and again at
``significance / screen`` on as many fresh runs — the violation is *confirmed*. An honest learner
is suspected with probability at most 5 % and reported as a violation with probability at most
``significance`` (1e-3 by default, the audit's family-wise error rate), while a real bug, which
fires on both stages, keeps almost all of its power. Every audit draws its runs from its own key
(:func:`audit_key`: the seed folded with its whole config), so audits of different learners are
independent trials. :meth:`AuditResult.verdict` says which test fired, the ε lower bound with a
point estimate, the chance an honest learner is flagged so, and what to suspect next.

**Bug catalogue.** The catalogue of planted privacy bugs the audit is tested against lives outside
the library (``experiments.audit.bugs``), so nothing in dpprep can switch a bug on. The audit's
reference ε comes from the accountant (or, for CorrDP, from the paper's Eq. 4 written out here),
which no bug touches.

**Auditing your own learner.** Each learner implements a small protocol: ``build(cfg, key)``
returns an :class:`AuditTarget` — ``runner(keys, inside) -> scores`` (the in/out trainings and
the attack, vmapped) and the ε the learner claims. :func:`register` adds it under a name, and
``audit(AuditConfig(name, …))`` audits it exactly as dpprep's own learners, which are registered
the same way (:data:`REGISTRY`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import textwrap
import time
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from dp_accounting import dp_event as dp_event_lib
from jax.typing import ArrayLike
from jax_privacy import auditing as jp_auditing
from scipy import stats

from dpprep import models
from dpprep.accounting import dp
from dpprep.algorithms import Hyper, Traced, TrainConfig, engine_fn
from dpprep.plan import DPPlan
from dpprep.renames import renamed_fields
from dpprep.validation import (
    check_delta,
    check_epsilon,
    check_positive,
    check_positive_int,
    check_probability,
)

THREAT_MODELS = ("white_box", "final_model")
#: The lower bounds an audit reports (:class:`Bounds`): ``"gdp"`` (``epsilon_gdp``),
#: ``"clopper_pearson"`` (``epsilon_cp``) and ``"tradeoff"`` (``delta_excess``: the claimed
#: privacy profile tested point by point, :func:`tradeoff_excess`).
BOUND_NAMES = ("gdp", "clopper_pearson", "tradeoff")
#: Rigorous bounds of a full-batch Gaussian learner (see :attr:`AuditTarget.rigorous`).
_GAUSSIAN_RIGOROUS = ("clopper_pearson", "gdp")
#: The code paths a white-box SGD audit can run (:func:`_trajectory_setup`): what
#: :func:`~dpprep.algorithms.train` runs on a GLM (the fast clipping path), the per-example
#: (``vmap``) clipping path of a model with two parameter leaves, and one point of a vmapped
#: :func:`~dpprep.sweeps.sweep_points` call.
PATHS = ("train", "vmap_clip", "sweep_point")
#: Where a white-box canary may sit (:attr:`AuditConfig.canary_positions`): the first record, the
#: last one, or a uniformly random interior one — drawn afresh for every run.
CANARY_POSITIONS = ("first", "last", "random")
#: The most statistical tests a verdict combines: the rigorous bounds and the noise test.
_MAX_TESTS = len(BOUND_NAMES) + 1


@dataclasses.dataclass(frozen=True)
class AuditTarget:
    """What an audit runs — the protocol a learner implements to be audited.

    Attributes:
      runner: ``runner(keys, inside) -> scores``, jittable and vmapped over runs: run ``i``
        trains with key ``keys[i]`` on the dataset with the canary (``inside[i]`` True) or on its
        neighbour without it, and returns the attack's score (oriented: in-canary runs score
        high).
      theoretical: the ε the learner's guarantee gives this canary pair at the audit's δ — the
        bound a lower bound must never exceed.
      claimed: the ε a user is told (usually equal; see :class:`AuditResult`).
      details: numbers to report beside the bounds (noise multiplier, steps, …).
      rigorous: the bounds (of :data:`BOUND_NAMES`) that are valid lower bounds for this learner
        whatever its implementation does. Clopper–Pearson always is; the Gaussian-DP bound only
        where the pair's true trade-off curve is Gaussian-shaped — a full-batch learner adding
        Gaussian noise to a fixed sum (DP-GD, CorrDP-SGD, the imputation pipeline), bugs in
        its noise, clipping or release count included. For subsampled or shuffled learners it
        holds only under the assumption that their curve is Gaussian, which it is not exactly.
      profile: the claimed guarantee's privacy profile ``ε ↦ δ(ε)`` (vectorised), e.g.
        :func:`privacy_profile` of the accountant's event; with it the audit also runs the
        trade-off test (:func:`tradeoff_excess`), rigorous for any mechanism.
      releases: the noisy updates per run the account charges; the runner's ``null`` output
        must have that many steps (a run that releases more is flagged before any statistics).
      checks: deterministic checks made while building (e.g. :meth:`Yardstick.checks`: the
        plan's noise against an independent calibration); a False one is a violation.
      host: the runner is a host function, called once per chunk of runs as it is (not traced):
        for learners audited through a public driver that compiles its own calls (a sweep of a
        grid, a private selection).

    The runner may return, instead of the scores, ``{"score": (runs,), "null": (runs, T, m)}``:
    ``null`` holds the updates of ``m >= 2`` coordinates no record touches, divided by the least
    noise std an honest learner adds there, for the noise test (:class:`NoiseTest`), which then
    joins the verdict's rigorous tests; a run whose columns some record does touch is NaN there
    and left out.
    """

    runner: Callable[[jax.Array, jax.Array], Any]
    theoretical: float
    claimed: float
    details: dict[str, float] = dataclasses.field(default_factory=dict)
    rigorous: tuple[str, ...] = ("clopper_pearson",)
    profile: Callable[[np.ndarray], np.ndarray] | None = None
    releases: int | None = None
    checks: dict[str, bool] = dataclasses.field(default_factory=dict)
    host: bool = False

    def __post_init__(self) -> None:
        if not callable(self.runner):
            raise TypeError(
                "runner must be a callable runner(keys, inside) -> scores, got"
                f" {type(self.runner).__name__}"
            )
        for name in ("theoretical", "claimed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                raise TypeError(f"{name} must be a number (an epsilon), got {type(value).__name__}")
            if math.isnan(value) or value <= 0:
                raise ValueError(
                    f"{name} must be an epsilon > 0 (inf allowed: no guarantee), got {value!r}: a"
                    " NaN yardstick would make every bound compare False and every audit pass"
                )


@dataclasses.dataclass(frozen=True)
class Learner:
    """A registered learner: ``build(cfg, key) -> AuditTarget`` for an :class:`AuditConfig`, the
    threat models it is audited under, and why it is not audited under the others."""

    build: Callable[[Any, jax.Array], AuditTarget]
    threat_models: tuple[str, ...]
    why_not: dict[str, str] = dataclasses.field(default_factory=dict)


#: Every auditable learner by name (dpprep's own, below, and any :func:`register`\ ed one).
REGISTRY: dict[str, Learner] = {}


def register(
    name: str,
    build: Callable[[Any, jax.Array], AuditTarget],
    *,
    threat_models: tuple[str, ...] = ("white_box",),
    why_not: dict[str, str] | None = None,
) -> None:
    """Makes ``AuditConfig(name, …)`` audit a learner of your own: ``build(cfg, key)`` returns its
    :class:`AuditTarget` (a runner of in/out trainings and the ε it claims) for the config's ε, δ,
    sizes and ``noise_factor``; :func:`audit` then runs pilot and evaluation runs and bounds ε."""
    if not isinstance(name, str) or not name:
        raise ValueError("name must be a non-empty string")
    if not callable(build):
        raise TypeError("build must be callable: build(cfg, key) -> AuditTarget")
    unknown = sorted(set(threat_models) - set(THREAT_MODELS))
    if unknown or not threat_models:
        raise ValueError(
            f"threat_models must be a non-empty subset of {THREAT_MODELS}, got {threat_models!r}"
        )
    REGISTRY[name] = Learner(build, tuple(threat_models), dict(why_not or {}))


@dataclasses.dataclass(frozen=True)
class AuditConfig:
    """One audit: a learner calibrated to ``epsilon`` at ``delta``, attacked ``runs`` times per
    world.

    Attributes:
      learner, threat_model: see :data:`LEARNERS`, :data:`THREAT_MODELS`, :data:`SUPPORTED`.
      epsilon: the ε the learner is calibrated to (for ``impute_dp_gd``: the DP-GD mechanism's own
        ε, before pre-processing is charged; for ``corrdp_sgd``: the nominal CorrDP ε).
      delta: δ of the guarantee and of the lower bound.
      runs: evaluation runs per world (in and out); ``pilot_runs``: runs per world that only fix
        the thresholds.
      n: records (background + canary); ``dim``: background feature dimension (the canary uses
        one more coordinate).
      steps: DP-GD / CorrDP / pipeline steps; ``epochs``, ``batch_size``: minibatch learners.
      levels: thresholds of the score test (Bonferroni over ``levels``).
      significance: the audit's family-wise error rate: the probability that an honest learner is
        reported as a violation (:attr:`AuditResult.violation`), 1e-3 by default. A violation is
        *suspected* when the verdict's k statistical tests, each at ``screen / k``, fire on the
        first runs, and *confirmed* when they fire again, each at ``(significance / screen) / k``,
        on as many fresh, independent runs: the two stages are independent, so an honest learner
        is confirmed with probability at most ``screen · significance / screen``. Deterministic
        checks (:attr:`AuditTarget.checks`) need no confirmation.
      screen: the probability that an honest learner is *suspected* (:attr:`AuditResult.suspected`;
        5 % by default): the first stage's level. ``screen == significance``: one stage, no
        confirmation runs (a suspicion is the verdict).
      noise_factor: the learner's real noise over what its accountant assumes (1: honest; < 1: a
        deliberately broken learner, for tests that the audit catches it).
      tv: CorrDP's correlation weight of the audited insensitive feature.
      eps_f: DPSGD-F's share of ε for the private mean.
      missing_fraction: the share of rows whose imputed feature is missing (``impute_dp_gd``).
      canary_positions: where the white-box canary of DP-GD and DP-SGD sits, drawn per run from
        these (:data:`CANARY_POSITIONS`): a bug tied to a slot (one always sampled, a padding
        slot that points at a record) shows only when the canary can be there.
      opposer: every background record's gradient opposes the canary's clipped one, about C per
        batch in all (white-box DP-GD and DP-SGD; DPSGD-F through the engine and its grid, where
        two halves of opposite features and labels survive the centring), so that clipping rules
        that treat a batch as a whole (its sum, its largest norm) show; False: zero-gradient
        background records.
      canary_norm: the canary's gradient (white-box) or feature (final-model) norm in units of
        the clip bound, >= 1. Above 1 clipping binds on the canary, so a learner that clips too
        little (to 2C, or not at all) releases a larger shift than an honest one and is caught;
        at 1 such bugs leave the outputs unchanged. The attack scores what the *honest* learner
        releases for it (``C`` times its direction), so the bound stays valid at any value.
      sampling, microbatch_size, steps_per_call, leaves: the options of a learner audited through
        a public driver (:data:`DRIVERS`): its sampler (``"full"``: ``steps`` full-batch steps;
        ``"poisson"``, ``"shuffle"``: ``epochs`` at ``batch_size``), the config's microbatches and
        compiled calls of ``steps_per_call`` steps (a host loop; a remainder when it does not
        divide the steps), and a model of ``leaves`` parameter leaves (1: the GLM fast path;
        more: the per-example path, the canary spanning every leaf). Other learners take the
        defaults.
      neighboring_relation: the driver's guarantee (:data:`NEIGHBORING_RELATIONS`): "add_remove"
        (the worlds differ by the canary against a zero-gradient record) or "replace_one" (the
        canary against a record whose clipped gradient is the opposite of the canary's: the
        worlds' sums differ by 2C), the plan and the yardstick both stating it. Driver learners
        only.
      optimizer: the driver's optimizer after the privatizer, at ``learning_rate``: "sgd" or
        "adam" (:data:`OPTIMIZERS`). Adam's updates cannot be turned back into the noisy gradients
        the white-box attack scores, so it is audited under ``threat_model="final_model"``: the
        last iterate's shift along the canary, held to the same yardstick (what any optimizer
        releases after the privatizer is post-processing). Driver learners only.
      dropout: a stochastic model (:attr:`~dpprep.models.Model.stochastic`) whose key drops each
        example's loss with this probability and scales a kept one by ``1/(1 − dropout)``
        (:func:`example_dropout`): the driver's stochastic path runs (the step key split per
        example, the clipping of a loss that takes a key). 0: a deterministic model. An honest
        learner still clips what each example contributes to C, so the yardstick is the same; the
        attack scores the canary as if always kept (valid, a little weaker). Driver learners only.
      chunk: runs per compiled chunk (memory); ``seed``: the audit's randomness, which
        :func:`audit_key` makes the audit's own: two audits that differ in anything (the learner,
        ε, a size) draw independent runs at the same seed.
    """

    learner: str
    threat_model: str = "white_box"
    epsilon: float = 1.0
    delta: float = 1e-5
    runs: int = 20_000
    pilot_runs: int = 2_000
    n: int = 100
    dim: int = 4
    steps: int = 10
    epochs: int = 2
    batch_size: int = 10
    levels: int = 32
    significance: float = 1e-3
    screen: float = 0.05
    noise_factor: float = 1.0
    learning_rate: float = 1.0
    tv: float = 0.25
    eps_f: float = 0.2
    missing_fraction: float = 0.5
    canary_positions: tuple[str, ...] = CANARY_POSITIONS
    opposer: bool = True
    canary_norm: float = 4.0
    sampling: str = "poisson"
    microbatch_size: int | None = None
    steps_per_call: int | None = None
    leaves: int = 1
    neighboring_relation: str = "add_remove"
    optimizer: str = "sgd"
    dropout: float = 0.0
    chunk: int = 4096
    seed: int = 0

    def __post_init__(self) -> None:
        check_learner(self.learner, self.threat_model)
        check_epsilon(self.epsilon)
        check_delta(self.delta)
        # Whole numbers, stored as ints (a float like 100.0 is normalised, 2000.5 refused).
        minimums = {
            "n": 4,
            "dim": 1,
            "steps": 1,
            "epochs": 1,
            "batch_size": 1,
            "levels": 2,
            "chunk": 1,
            "runs": 1,
        }
        for name, minimum in minimums.items():
            object.__setattr__(
                self, name, check_positive_int(getattr(self, name), name, minimum=minimum)
            )
        object.__setattr__(
            self,
            "pilot_runs",
            check_positive_int(self.pilot_runs, "pilot_runs", minimum=self.levels),
        )
        if (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, (int, np.integer))
            or not 0 <= self.seed < 2**63
        ):
            raise ValueError(f"seed must be an integer in [0, 2**63), got {self.seed!r}")
        check_positive(self.noise_factor, "noise_factor")
        check_positive(self.learning_rate, "learning_rate")
        if not (
            isinstance(self.canary_norm, (int, float, np.floating))
            and math.isfinite(self.canary_norm)
            and self.canary_norm >= 1.0
        ):
            raise ValueError(
                "canary_norm must be a finite number >= 1 (units of the clip bound), got"
                f" {self.canary_norm!r}"
            )
        check_probability(self.tv, "tv")
        if not 0 < self.significance < 0.5:
            raise ValueError(f"significance must be in (0, 0.5), got {self.significance!r}")
        if not self.significance <= self.screen < 0.5:
            raise ValueError(
                f"screen must be in [significance, 0.5) = [{self.significance}, 0.5), got"
                f" {self.screen!r}: it is the first stage's level, and significance / screen the"
                " confirmation's"
            )
        if not 0 < self.missing_fraction < 1:
            raise ValueError(f"missing_fraction must be in (0, 1), got {self.missing_fraction!r}")
        if self.learner in DPSGDF_LEARNERS and not 0 < self.eps_f < self.epsilon:
            raise ValueError(f"eps_f must be in (0, epsilon={self.epsilon}), got {self.eps_f!r}")
        positions = self.canary_positions
        if (
            isinstance(positions, str)
            or not isinstance(positions, (tuple, list))
            or not positions
            or not set(positions) <= set(CANARY_POSITIONS)
        ):
            raise ValueError(
                f"canary_positions must be a non-empty tuple of {CANARY_POSITIONS}, got"
                f" {positions!r}"
            )
        object.__setattr__(self, "canary_positions", tuple(positions))
        if not isinstance(self.opposer, (bool, np.bool_)):
            raise ValueError(f"opposer must be True or False, got {self.opposer!r}")
        driver_options = {
            "sampling": "poisson",
            "microbatch_size": None,
            "steps_per_call": None,
            "leaves": 1,
            "neighboring_relation": "add_remove",
            "optimizer": "sgd",
            "dropout": 0.0,
        }
        if self.learner not in DRIVERS:
            set_here = [k for k, v in driver_options.items() if getattr(self, k) != v]
            if set_here:
                raise ValueError(
                    f"{', '.join(set_here)} set for learner {self.learner!r}: these are the options"
                    f" of a learner audited through a public driver ({', '.join(DRIVERS)})"
                )
        if self.neighboring_relation not in NEIGHBORING_RELATIONS:
            raise ValueError(
                f"neighboring_relation must be one of {NEIGHBORING_RELATIONS}, got"
                f" {self.neighboring_relation!r}"
            )
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.optimizer != "sgd" and self.threat_model == "white_box":
            raise ValueError(
                f"optimizer={self.optimizer!r} is audited under threat_model='final_model': its"
                " updates cannot be turned back into the noisy gradients the white-box attack"
                " scores (SGD's can)"
            )
        if not (isinstance(self.dropout, (int, float, np.floating)) and 0 <= self.dropout < 1):
            raise ValueError(f"dropout must be a probability in [0, 1), got {self.dropout!r}")
        if self.sampling not in ("full", "poisson", "shuffle"):
            raise ValueError(
                f"sampling must be 'full', 'poisson' or 'shuffle', got {self.sampling!r}"
            )
        for name in ("microbatch_size", "steps_per_call"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_positive_int(getattr(self, name), name))
        object.__setattr__(self, "leaves", check_positive_int(self.leaves, "leaves"))
        if self.leaves > 8:
            raise ValueError(f"leaves must be at most 8, got {self.leaves}")
        minibatch = (
            ("dp_sgd_poisson", "dp_sgd_shuffle")
            + DPSGDF_LEARNERS
            + tuple(f"dp_sgd_poisson_{p}" for p in PATHS[1:])
        )
        if (
            self.learner in minibatch or (self.learner in DRIVERS and self.sampling != "full")
        ) and self.batch_size >= self.n:
            raise ValueError(
                f"batch_size must be < n = {self.n} for a minibatch learner, got {self.batch_size}"
            )
        # Each bound runs at level / k for the k tests of the verdict (at most _MAX_TESTS: the
        # rigorous bounds and the noise test; the learner, hence k, is known only when it is built),
        # at the stricter of the two stages' levels.
        level = min(self.stage_levels)
        needed = required_runs(
            self.epsilon_to_certify,
            self.delta,
            significance=level / _MAX_TESTS,
            levels=self.levels,
        )
        if self.runs < needed:
            raise ValueError(
                f"runs={self.runs} per world is too few: even a perfect attack's Clopper-Pearson"
                f" bound cannot reach epsilon={self.epsilon_to_certify:.3g} at delta={self.delta}"
                f" with fewer than {needed} runs per world (level {level:.3g} split over up to"
                f" {_MAX_TESTS} tests, {self.levels} thresholds)"
            )

    @property
    def confirms(self) -> bool:
        """A suspicion is confirmed on fresh runs (``screen > significance``)."""
        return self.screen > self.significance

    @property
    def stage_levels(self) -> tuple[float, ...]:
        """The level of each stage's verdict: ``(screen, significance / screen)``, or
        ``(significance,)`` for a one-stage audit."""
        if not self.confirms:
            return (self.significance,)
        return (self.screen, self.significance / self.screen)

    @property
    def epsilon_to_certify(self) -> float:
        """The ε a perfect attack must be able to reach with ``runs``: the calibration target,
        capped at 8 (a large-ε audit is still worth running for its lower bound)."""
        return min(self.epsilon, 8.0)


def check_learner(learner: str, threat_model: str) -> None:
    """ValueError naming what is known, for an unknown learner or a threat model it is not audited
    under."""
    if learner not in REGISTRY:
        raise ValueError(
            f"unknown learner {learner!r}; known: {', '.join(REGISTRY)} (or auditing.register your"
            " own)"
        )
    if threat_model not in THREAT_MODELS:
        raise ValueError(
            f"unknown threat_model {threat_model!r}; known: {', '.join(THREAT_MODELS)}"
        )
    entry = REGISTRY[learner]
    if threat_model not in entry.threat_models:
        why = entry.why_not.get(threat_model, "")
        raise ValueError(
            f"learner {learner!r} is audited under {', '.join(entry.threat_models)} only, not "
            f"{threat_model!r}" + (f": {why}" if why else "")
        )


# --------------------------------------------------------------------------------------------------
# Statistics


def _cp_upper(successes: np.ndarray, trials: int, alpha: float) -> np.ndarray:
    """One-sided Clopper–Pearson upper bound at level ``alpha`` (1 where every trial succeeded)."""
    k = np.asarray(successes, np.float64)
    upper = stats.beta.ppf(1.0 - alpha, k + 1.0, np.maximum(trials - k, 1e-300))
    return np.where(k >= trials, 1.0, upper)


def gdp_epsilon(mu: float, delta: float) -> float:
    """ε at ``delta`` of μ-Gaussian DP (one Gaussian release of sensitivity 1, noise std 1/μ)."""
    if mu <= 0:
        return 0.0
    return dp.analytic_gaussian_epsilon(1.0 / mu, delta)


def gdp_lower_bound(
    in_scores: ArrayLike, out_scores: ArrayLike, *, significance: float, delta: float
) -> tuple[float, float]:
    """``(μ_lb, ε_lb)``: the Gaussian-DP lower bound of Nasr et al. (2023) for scores oriented so
    that in-canary runs score high: at every threshold ``t`` of the test "in iff score ≥ t",
    Clopper–Pearson upper bounds ``FPR⁺``, ``FNR⁺`` (Bonferroni over all ``2·#thresholds``) give
    ``μ_t = Φ⁻¹(1 − FPR⁺) − Φ⁻¹(FNR⁺)``; ``μ_lb = max(0, max_t μ_t)`` and ε is its GDP conversion.
    jax-privacy's ``epsilon_from_gdp`` is the same estimator with ``|μ_t|`` (module docstring)."""
    inside, outside = (
        np.sort(np.asarray(in_scores, np.float64)),
        np.sort(np.asarray(out_scores, np.float64)),
    )
    thresholds = np.unique(np.concatenate([inside, outside]))
    fn = np.searchsorted(inside, thresholds, side="left")  # in-runs below t
    fp = outside.size - np.searchsorted(outside, thresholds, side="left")  # out-runs at or above t
    alpha = significance / (2 * thresholds.size)
    fpr, fnr = _cp_upper(fp, outside.size, alpha), _cp_upper(fn, inside.size, alpha)
    ok = np.maximum(fpr, fnr) < 1.0 - delta
    if not np.any(ok):
        return 0.0, 0.0
    mu = float(np.max(stats.norm.isf(fpr[ok]) - stats.norm.ppf(fnr[ok])))
    mu = max(mu, 0.0)
    return mu, gdp_epsilon(mu, delta)


def test_significance(significance: float, rigorous: tuple[str, ...]) -> float:
    """Significance of each bound of an audit whose verdict (:attr:`AuditResult.violation`) is the
    union of the ``rigorous`` tests: Bonferroni, ``significance / len(rigorous)``, so the union of
    the tests errs on an honest learner with probability at most ``significance``. Every bound,
    rigorous or not, is computed at this level, so all reported bounds share one confidence."""
    return significance / max(1, len(rigorous))


def required_runs(
    epsilon: float, delta: float, *, significance: float = 0.05, levels: int = 32
) -> int:
    """Fewest runs per world with which a *perfect* attack (no overlap of the scores) reaches a
    Clopper–Pearson lower bound of ``epsilon``: with 0 false positives of ``N`` the bound is
    ``log((1 − δ − u)/u)``, ``u = 1 − a^{1/N}``, ``a = significance/(2·levels)``."""
    a = significance / (2 * levels)
    # log((1-δ-u)/u) >= ε  <=>  u <= (1-δ)/(1+e^ε)  <=>  N >= log(a)/log(1-(1-δ)/(1+e^ε))
    return int(math.ceil(math.log(a) / math.log1p(-(1.0 - delta) / (1.0 + math.exp(epsilon)))))


@dataclasses.dataclass(frozen=True)
class Bounds:
    """Lower bounds from one pair of score samples (all at the audit's δ and significance)."""

    epsilon_gdp: float
    mu_gdp: float
    epsilon_cp: float
    auroc: float
    delta_excess: float = math.nan
    epsilon_at_excess: float = math.nan


def lower_bounds(
    in_scores: ArrayLike, out_scores: ArrayLike, *, delta: float, significance: float
) -> Bounds:
    """Gaussian-DP (:func:`gdp_lower_bound`) and Clopper–Pearson (jax-privacy) lower bounds."""
    auditor = jp_auditing.CanaryScoreAuditor(np.asarray(in_scores), np.asarray(out_scores))
    mu, eps_gdp = gdp_lower_bound(in_scores, out_scores, significance=significance, delta=delta)
    eps_cp = float(auditor.epsilon_clopper_pearson(significance, delta))
    return Bounds(float(eps_gdp), float(mu), eps_cp, float(auditor.attack_auroc()))


#: ε grid of the trade-off test (the claimed δ(ε) is compared with the empirical one at each).
TRADEOFF_EPSILONS = np.linspace(0.02, 10.0, 500)


def tradeoff_excess(
    in_scores: ArrayLike,
    out_scores: ArrayLike,
    profile: Callable[[np.ndarray], np.ndarray],
    *,
    significance: float,
    epsilons: np.ndarray = TRADEOFF_EPSILONS,
) -> tuple[float, float]:
    """``(excess, ε*)``: the trade-off test of a claimed privacy profile ``δ(ε)``.

    (ε, δ)-DP forces every test to satisfy ``e^ε·FPR + FNR ≥ 1 − δ`` and ``e^ε·FNR + FPR ≥ 1 − δ``.
    With Clopper–Pearson upper bounds ``FPR⁺``, ``FNR⁺`` at every threshold of "in iff score ≥ t"
    (Bonferroni over all ``2·#thresholds``, as :func:`gdp_lower_bound`), the empirical
    ``δ_lb(ε) = max_t max(1 − e^ε FPR⁺ − FNR⁺, 1 − e^ε FNR⁺ − FPR⁺)`` is, with probability at least
    ``1 − significance``, below the true δ(ε) at *every* ε at once. ``excess = max_ε δ_lb(ε) −
    δ(ε)`` > 0 therefore refutes the claimed profile for any mechanism — rigorous like Clopper–
    Pearson, but it tests the whole curve the accountant claims instead of its one (ε, δ) point,
    which is where a subsampled learner's bugs show. ``ε*`` is where the excess is largest."""
    inside, outside = (
        np.sort(np.asarray(in_scores, np.float64)),
        np.sort(np.asarray(out_scores, np.float64)),
    )
    thresholds = np.unique(np.concatenate([inside, outside]))
    fn = np.searchsorted(inside, thresholds, side="left")
    fp = outside.size - np.searchsorted(outside, thresholds, side="left")
    alpha = significance / (2 * thresholds.size)
    fpr, fnr = _cp_upper(fp, outside.size, alpha), _cp_upper(fn, inside.size, alpha)
    grow = np.exp(np.asarray(epsilons, np.float64))[:, None]
    empirical = np.maximum(1 - grow * fpr - fnr, 1 - grow * fnr - fpr).max(axis=1)
    claimed = np.asarray(profile(np.asarray(epsilons, np.float64)), np.float64)
    gap = empirical - claimed
    i = int(np.argmax(gap))
    return float(gap[i]), float(epsilons[i])


def privacy_profile(
    event: dp_event_lib.DpEvent,
    *,
    overflow_prob: float = 0.0,
    discretization: float = 1e-4,
    neighboring_relation: str = "add_remove",
) -> Callable[[np.ndarray], np.ndarray]:
    """``ε ↦ δ(ε)`` of a dp-accounting event under ``neighboring_relation`` ("add_remove" or
    "replace_one"; PLD, pessimistic, so the claimed curve is never below the true one and the
    trade-off test stays valid), plus the Poisson overflow slack ``(1 + e^ε)·overflow_prob`` the
    plan charges."""
    from dpprep import sampling

    accountant = _reference_accountant(neighboring_relation, discretization)
    accountant.compose(event)

    def profile(epsilons: np.ndarray) -> np.ndarray:
        return np.array(
            [
                min(
                    1.0,
                    accountant.get_delta(float(e))
                    + sampling.overflow_delta(float(e), overflow_prob),
                )
                for e in np.atleast_1d(epsilons)
            ]
        )

    return profile


def discretise(scores: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Scores as the index of the last pilot threshold they reach (0..levels)."""
    return np.searchsorted(thresholds, scores, side="right").astype(np.float64)


# --------------------------------------------------------------------------------------------------
# The audit's models and data


@models.spec_factory
def linear_loss_model(num_features: int) -> models.Model:
    """The white-box audit's GLM: ``ℓ(θ; x, y) = −y·⟨w, x⟩`` (no intercept), whose per-example
    gradient ``−y·x`` does not depend on θ: convex, 0-smooth, ‖x‖-Lipschitz."""

    def init(key):
        del key
        return {"w": jnp.zeros((num_features, 1), jnp.float32)}

    def apply(params, x):
        return x @ params["w"]

    def per_example_loss(params, x, y):
        return -y * (x @ params["w"])[:, 0]

    def residual(params, x, y):
        del params, x
        return -y[:, None]

    return models.Model(
        "audit_linear_loss", init, apply, per_example_loss, residual, task="regression"
    )


def _model(kind: str, num_features: int) -> models.Model:
    """The audit's model (the factories are cached: one object, so one compilation, per shape)."""
    if kind == "linear":
        return linear_loss_model(num_features)
    return models.logistic_regression(num_features, fit_intercept=False)


def background(cfg: AuditConfig, key: jax.Array) -> tuple[np.ndarray, np.ndarray]:
    """``n − 1`` background records: Gaussian features in the first ``dim`` coordinates scaled into
    the unit ball (the canary's coordinate ``dim`` is 0), labels from a fixed linear rule."""
    kx, kw = jax.random.split(key)
    x = np.asarray(jax.random.normal(kx, (cfg.n - 1, cfg.dim)), np.float64)
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1.0) * 1.5
    w = np.asarray(jax.random.normal(kw, (cfg.dim,)), np.float64)
    y = (x @ w > 0).astype(np.float32)
    x = np.concatenate([x, np.zeros((cfg.n - 1, 1))], axis=1).astype(np.float32)
    return x, y


def _chunked(
    fn: Callable,
    keys: jax.Array,
    inside: jax.Array,
    chunk: int,
    after: Callable[[float], None] | None = None,
) -> np.ndarray | dict[str, np.ndarray]:
    """``fn`` over fixed-size chunks (the last one padded by repeating runs), so one compilation;
    its outputs (arrays or a dict of them) concatenated over runs. ``after(seconds)`` is called
    after each chunk with its time (the outputs on the host)."""
    total = keys.shape[0]
    pad = -total % chunk
    if pad:
        keys = jnp.concatenate([keys, keys[:pad]])
        inside = jnp.concatenate([inside, inside[:pad]])
    out = []
    for i in range(0, total + pad, chunk):
        start = time.perf_counter()
        out.append(
            jax.tree_util.tree_map(np.asarray, fn(keys[i : i + chunk], inside[i : i + chunk]))
        )
        if after is not None:
            after(time.perf_counter() - start)
    return jax.tree_util.tree_map(lambda *parts: np.concatenate(parts)[:total], *out)


def _canary(cfg: AuditConfig, norm: float) -> jnp.ndarray:
    """``norm·e_d``: the canary's features, in the coordinate ``dim`` no background record uses."""
    return jnp.zeros(cfg.dim + 1, jnp.float32).at[cfg.dim].set(norm)


#: Score given to a run whose release equals the neighbour's noiseless value exactly (finite, so
#: the audit's non-finite check still guards real overflows).
_EXACT_RELEASE = 1e6


def _poisson_log_lr(a: jax.Array, signal: float, q: float) -> jax.Array:
    """Log-likelihood ratio of one step's normalised update ``a`` (N(b·signal, 1), b ~ Bern(q))
    against N(0, 1)."""
    gauss = signal * a - 0.5 * signal**2
    return jnp.logaddexp(jnp.log1p(-q), jnp.log(q) + gauss)


def _updates(params_trajectory: dict, params0: dict) -> jax.Array:
    """θ_t − θ_{t−1} for t = 1..T of the ``w`` leaf, shape (T, d)."""
    w = params_trajectory["w"][..., 0]
    prev = jnp.concatenate([params0["w"][None, :, 0], w[:-1]], axis=0)
    return w - prev


def _sgd_setup(cfg: AuditConfig, key: jax.Array) -> AuditTarget:
    """DP-GD, Poisson / shuffled DP-SGD: white-box through :func:`_trajectory_setup` (what
    :func:`~dpprep.algorithms.train` runs), final-model here (zero-out neighbours; the margin of the
    canary under the last iterate, held to the plan's account)."""
    sampling = {"dp_gd": "full", "dp_sgd_poisson": "poisson", "dp_sgd_shuffle": "shuffle"}[
        cfg.learner
    ]
    if cfg.threat_model == "white_box":
        return _trajectory_setup(cfg, key, sampling, "train")
    d = cfg.dim + 1
    model = _model("logistic", d)
    x_bg, y_bg = background(cfg, key)
    clip = 1.0
    kwargs = (
        {"steps": cfg.steps}
        if sampling == "full"
        else {"epochs": cfg.epochs, "batch_size": cfg.batch_size}
    )
    dp_plan = DPPlan.create(
        sampling, cfg.n, l2_clip_norm=clip, target_epsilon=cfg.epsilon, delta=cfg.delta, **kwargs
    )
    plan, z, claimed = dp_plan.execution, dp_plan.noise_multiplier, dp_plan.epsilon
    ref = yardstick(sampling, cfg.n, epsilon=cfg.epsilon, delta=cfg.delta, pad=plan.pad, **kwargs)
    tc = TrainConfig(model, Hyper(cfg.learning_rate), dp_plan)
    hyper = Traced(cfg.learning_rate, z * cfg.noise_factor, clip)
    train_fn = engine_fn(tc)
    # Feature norm canary_norm·C: clipping binds on the canary early on.
    canary_x = _canary(cfg, clip * cfg.canary_norm)
    params0 = model.init(None)
    x_bg, y_bg = jnp.asarray(x_bg), jnp.asarray(y_bg)

    def one(run_key, inside):
        row = jnp.where(inside, canary_x, 0.0)  # out: the zero record (zero-out)
        x = jnp.concatenate([x_bg, row[None]])
        y = jnp.concatenate([y_bg, jnp.ones((1,), jnp.float32)])
        params, _ = train_fn(hyper, params0, x, y, run_key)
        return (params["w"][:, 0] @ canary_x) / clip

    details = {
        "noise_multiplier": float(z),
        "reference_noise_multiplier": float(ref.noise_multiplier),
        "steps": float(plan.steps),
        "sampling_rate": float(ref.sampling_rate),
        "requested_epsilon": float(cfg.epsilon),
    }
    rigorous = _GAUSSIAN_RIGOROUS if sampling == "full" else ("clopper_pearson",)
    return AuditTarget(
        jax.jit(jax.vmap(one)),
        float(ref.epsilon),
        float(claimed),
        details,
        rigorous=rigorous + ("tradeoff",),
        profile=ref.profile(),
        checks=ref.checks(dp_plan),
    )


def _iteration_setup(cfg: AuditConfig, key: jax.Array) -> AuditTarget:
    """DP-SGD by iteration (fixed order, random stop), final model, replace-one canary at record
    0."""
    d = cfg.dim + 1
    model = _model("linear", d)
    x_bg, _ = background(cfg, key)
    y_bg = np.zeros(cfg.n - 1, np.float32)
    clip = 1.0
    # The linear loss is 0-smooth, so β-smooth for every β > 0: the plan states β = 1/η, under
    # which the run's step η ≤ 2/β is contractive.
    dp_plan = DPPlan.create(
        "fixed_order",
        cfg.n,
        l2_clip_norm=clip,
        target_epsilon=cfg.epsilon,
        delta=cfg.delta,
        smoothness=1.0 / cfg.learning_rate,
    )
    z, theoretical = dp_plan.noise_multiplier, dp_plan.epsilon
    tc = TrainConfig(model, Hyper(cfg.learning_rate), dp_plan)
    hyper = Traced(cfg.learning_rate, z * cfg.noise_factor, clip)
    train_fn = engine_fn(tc)
    canary_x = _canary(cfg, clip * cfg.canary_norm)  # clipped to C·e_d by an honest learner
    params0 = model.init(None)
    x_bg, y_bg = jnp.asarray(x_bg), jnp.asarray(y_bg)

    def one(run_key, inside):
        # Replace-one: the canary (clipped gradient −C·e_d) or its mirror (+C·e_d), first in the
        # order.
        label = jnp.where(inside, 1.0, -1.0)
        x = jnp.concatenate([canary_x[None], x_bg])
        y = jnp.concatenate([label[None], y_bg])
        params, _ = train_fn(hyper, params0, x, y, run_key)
        return params["w"][cfg.dim, 0]

    # Held to the requested ε: the plan's own account of its noise must be within it.
    return AuditTarget(
        jax.jit(jax.vmap(one)),
        float(cfg.epsilon),
        float(theoretical),
        {"noise_multiplier": float(z), "steps": float(cfg.n)},
        checks={"plan_account": bool(theoretical <= cfg.epsilon * (1 + 1e-9))},
    )


def _dpsgdf_data(
    cfg: AuditConfig, key: jax.Array, opposer: bool | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """DPSGD-F's audit columns: column ``dim`` is the canary's; ``dim + 1``, ``dim + 2`` are no
    record's. Returns the ``n − 1`` background rows (unit-normalised), their labels, the canary's
    unit row ``e_dim`` and the opposers' label weight ``w``.

    With ``cfg.opposer`` the background opposes the canary: ``⌊(n − 1)/2⌋`` rows ``+e_dim``
    labelled ``−w`` and as many ``−e_dim`` labelled ``+w`` (any remainder a zero row, label 0).
    Each gradient ``−y·(C_F·x − μ̂)`` is then about ``+w·C_F·e_dim``, the canary's clipped one's
    opposite, and ``w = C/(C_F·b)`` (``b`` the expected batch) puts about C of it in a batch, so a
    rule that treats a batch as a whole (its largest norm) shows. Centring cannot cancel it: the
    two halves' features cancel in the mean (the noiseless mean's column ``dim`` stays 0), their
    gradients, signed by the labels, add. Without opposers: Gaussian rows in the first ``dim``
    columns, label 0 (zero gradient). ``opposer``: overrides ``cfg.opposer``."""
    from dpprep import dpsgdf

    d = cfg.dim + 3
    e_d = np.zeros(d, np.float32)
    e_d[cfg.dim] = 1.0
    if cfg.opposer if opposer is None else opposer:
        half = (cfg.n - 1) // 2
        rest = cfg.n - 1 - 2 * half
        weight = 1.0 / (2.0 * cfg.batch_size * (cfg.n - 1) / cfg.n)  # C / (C_F · b), C_F = 2
        unit_bg = np.concatenate(
            [np.tile(e_d, (half, 1)), np.tile(-e_d, (half, 1)), np.zeros((rest, d), np.float32)]
        )
        labels = np.concatenate([np.full(half, -weight), np.full(half, weight), np.zeros(rest)])
        return unit_bg.astype(np.float32), labels.astype(np.float32), e_d, weight
    x_bg, _ = background(cfg, key)
    unit_bg = np.asarray(dpsgdf.unit_normalize(x_bg[:, : cfg.dim]), np.float32)
    unit_bg = np.concatenate([unit_bg, np.zeros((cfg.n - 1, d - cfg.dim), np.float32)], axis=1)
    return unit_bg, np.zeros(cfg.n - 1, np.float32), e_d, 0.0


def _dpsgdf_score(
    cfg: AuditConfig,
    ref: Yardstick,
    updates: jax.Array | np.ndarray,
    mu_hat: jax.Array | np.ndarray,
    feature_norm: float,
    clip: float,
    opposer_weight: float,
    xp: Any = jnp,
) -> jax.Array | np.ndarray:
    """The DPSGD-F attack on one run (``xp``: jnp traced, np on the host): the released mean's
    evidence on the canary's column plus the Poisson likelihood ratio of every update along the
    canary's clipped (centred) gradient, at the reference noises, with the opposers of
    :func:`_dpsgdf_data` (label weight ``opposer_weight``; 0: none) in the batches."""
    assert ref.mean_multiplier is not None
    z_ref, s_ref = ref.noise_multiplier, ref.mean_multiplier
    e_d = np.zeros(updates.shape[-1], np.float32)
    e_d[cfg.dim] = 1.0
    # The canary's clipped gradient −C·v, v = unit(C_F e_d − μ̂), is known from the released μ̂.
    v = feature_norm * e_d - mu_hat
    v = v / xp.linalg.norm(v, axis=-1, keepdims=True)
    a = (
        xp.einsum("...td,...d->...t", updates, v)
        * ref.normalize_by
        / (cfg.learning_rate * z_ref * clip)
    )
    m = (mu_hat[..., cfg.dim] * cfg.n / feature_norm) / s_ref  # N(b/s, 1): the mean's evidence
    if opposer_weight:
        # each opposer moves a by −s·w·C_F·⟨e_d, v⟩/C (its μ̂ terms cancel in pairs on average)
        weight = opposer_weight * feature_norm * v[..., cfg.dim] / clip
        others = 2 * ((cfg.n - 1) // 2)
        log_lr = _poisson_opposed_log_lr(
            jnp.asarray(a),
            1.0 / z_ref,
            ref.sampling_rate,
            others,
            jnp.asarray(weight)[..., None, None],  # per run, against (steps, counts)
        )
    else:
        log_lr = _poisson_log_lr(jnp.asarray(a), 1.0 / z_ref, ref.sampling_rate)
    score = m / s_ref - 0.5 / s_ref**2 + xp.asarray(jnp.sum(log_lr, axis=-1))
    # Exact-release check: without the canary the noiseless mean's coordinate is exactly 0 (no
    # background record uses it). A Gaussian release hits it with probability 0, so this never
    # moves an honest run's score, but a mean released without its noise is then separated
    # perfectly (any fixed score keeps Clopper–Pearson valid; this one also has power there).
    return xp.where(mu_hat[..., cfg.dim] == 0.0, -_EXACT_RELEASE, score)


def _dpsgdf_null(
    cfg: AuditConfig,
    ref: Yardstick,
    updates: jax.Array | np.ndarray,
    inside: jax.Array | np.ndarray,
    clip: float,
    xp: Any = jnp,
) -> jax.Array | np.ndarray:
    """The noise test's columns of DPSGD-F: in the out world no record has a gradient (the zero
    record has label 0), so the untouched columns carry the noise alone; in the in world the
    canary's centred gradient touches them through μ̂, so those runs are left out (NaN)."""
    null = (
        updates[..., cfg.dim + 1 : cfg.dim + 3]
        * ref.normalize_by
        / (cfg.learning_rate * ref.floor * clip)
    )
    return xp.where(xp.reshape(inside, inside.shape + (1, 1)), xp.nan, null)


def _dpsgdf_run(cfg: AuditConfig) -> tuple[Any, DPPlan, float, Yardstick]:
    """DPSGD-F's audited run (``C_F = 2``, ``C = 1``, the last iterate): its config, its plan
    (z calibrated for [mean, DP-SGD] at (ε, δ)), the private mean's multiplier and the independent
    yardstick of the run the config states."""
    from dpprep import dpsgdf

    run = dpsgdf.DpsgdfConfig(
        method="dpsgdf",
        epsilon=cfg.epsilon,
        delta=cfg.delta,
        eps_F=cfg.eps_f,
        feature_norm=2.0,
        batch_size=cfg.batch_size,
        epochs=cfg.epochs,
        learning_rate=cfg.learning_rate,
        l2_clip_norm=1.0,
        iterates="last",
    )
    dp_plan = dpsgdf.plan(run, cfg.n)
    s = dpsgdf.calibrate(run, cfg.n).mean_multiplier
    assert s is not None
    ref = yardstick(
        "poisson",
        cfg.n,
        epsilon=cfg.epsilon,
        delta=cfg.delta,
        epochs=cfg.epochs,
        batch_size=cfg.batch_size,
        pad=dp_plan.pad,
        mean_epsilon=cfg.eps_f,
    )
    assert ref.mean_multiplier is not None
    return run, dp_plan, float(s), ref


def _dpsgdf_setup(cfg: AuditConfig, key: jax.Array) -> AuditTarget:
    """DPSGD-F (Algorithm 3): the canary ``x̃ = e_d`` enters the private mean and, centred, the
    gradients; the attack scores the released mean and every update (zero-out neighbours: the
    out world's record is the zero row with label 0, which moves neither). The mean is released
    by :func:`dpprep.dpsgdf.mean_from_parts`, the code :func:`dpprep.dpsgdf.fit` runs, so a bug
    there shows in the audit. The canary's centred gradient ``C_F e_d − μ̂`` has norm about
    ``C_F = 2 > C``: clipping binds on it. The canary's position is drawn per run
    (``canary_positions``); the out world's untouched columns carry the noise test."""
    from dpprep import dpsgdf

    unit_bg, y_bg_np, e_d_np, weight = _dpsgdf_data(cfg, key)
    d = unit_bg.shape[1]
    model = _model("linear", d)
    run, dp_plan, s, ref = _dpsgdf_run(cfg)
    feature_norm, clip, z = run.feature_norm, run.l2_clip_norm, dp_plan.noise_multiplier
    tc = dataclasses.replace(
        dpsgdf.train_config(run, dp_plan, d, 1, model=model), track_params=True
    )
    plan = dp_plan.execution
    train_fn = engine_fn(tc)
    params0 = model.init(None)
    e_d = jnp.asarray(e_d_np)
    bg_sum = jnp.asarray(unit_bg.sum(axis=0))
    y_bg = jnp.asarray(y_bg_np)
    unit_bg = jnp.asarray(unit_bg)
    mean_noise_sd = s * cfg.noise_factor
    positions = tuple(cfg.canary_positions)

    def one(run_key, inside):
        k_place, k_run = jax.random.split(run_key)
        index = _place(k_place, positions, cfg.n)
        row = jnp.where(inside, e_d, 0.0)
        x = _with_canary(unit_bg, row, index)
        y = _with_canary(y_bg, jnp.where(inside, 1.0, 0.0), index)
        xi = dpsgdf.mean_noise(k_run, d)
        mu_hat = dpsgdf.mean_from_parts(
            (bg_sum + row) / cfg.n, cfg.n, feature_norm, mean_noise_sd, xi
        )
        hyper = Traced(
            cfg.learning_rate,
            z * cfg.noise_factor,
            clip,
            extra={"feature_scale": jnp.float32(feature_norm), "feature_shift": mu_hat},
        )
        _, metrics = train_fn(hyper, params0, x, y, k_run)
        updates = _updates(metrics["params"], params0)
        return {
            "score": _dpsgdf_score(cfg, ref, updates, mu_hat, feature_norm, clip, weight),
            "null": _dpsgdf_null(cfg, ref, updates, inside, clip),
        }

    details = {
        "noise_multiplier": float(z),
        "mean_multiplier": float(s),
        "steps": float(plan.steps),
        "reference_noise_multiplier": float(ref.noise_multiplier),
        "reference_mean_multiplier": float(ref.mean_multiplier),
    }
    checks = {**ref.checks(dp_plan), **ref.mean_checks(s)}
    return AuditTarget(
        jax.jit(jax.vmap(one)),
        float(ref.epsilon),
        float(dp_plan.epsilon),
        details,
        rigorous=("clopper_pearson", "tradeoff"),
        profile=ref.profile(),
        checks=checks,
        releases=ref.steps,
    )


def _dpsgdf_fit_setup(cfg: AuditConfig, key: jax.Array) -> AuditTarget:
    """DPSGD-F through its public entry :func:`dpprep.dpsgdf.fit`, one call per run on the raw
    dataset with the canary inserted (its input checks, normalisation, private mean, plan and
    calibration all run), the audit's linear-loss model passed as ``model`` and every iterate
    recorded (``track_params``); scored and held to the yardstick as :func:`_dpsgdf_setup` (the
    released μ̂ and every update, the out world's untouched columns)."""
    from dpprep import dpsgdf

    # fit takes class labels, which cannot carry the opposers' weights: zero-gradient background
    # records here (the engine fit runs is audited with opposers as dpsgdf and dpsgdf_grid)
    unit_bg, labels, e_d, weight = _dpsgdf_data(cfg, key, opposer=False)
    labels = labels.astype(np.int32)
    model = _model("linear", unit_bg.shape[1])
    run, dp_plan, s, ref = _dpsgdf_run(cfg)
    feature_norm, clip = run.feature_norm, run.l2_clip_norm
    params0 = model.init(None)
    positions = tuple(cfg.canary_positions)

    def runner(keys, inside):
        index, run_keys = _split_runs(keys, positions, cfg.n)
        scores, nulls = [], []
        for i, world in enumerate(np.asarray(inside)):
            row = e_d if world else np.zeros_like(e_d)  # out: the zero record (label 0)
            x = np.insert(unit_bg, int(index[i]), row, axis=0)
            y = np.insert(labels, int(index[i]), int(world))
            out = dpsgdf.fit(run, x, y, run_keys[i], model=model, track_params=True)
            updates = np.asarray(_updates(out.metrics["params"], params0))
            mu_hat = np.asarray(out.mu_hat, np.float32)
            scores.append(
                _dpsgdf_score(cfg, ref, updates, mu_hat, feature_norm, clip, weight, xp=np)
            )
            nulls.append(_dpsgdf_null(cfg, ref, updates, np.asarray(world), clip, xp=np))
        return {"score": np.asarray(scores), "null": np.asarray(nulls)}

    details = {
        "noise_multiplier": float(dp_plan.noise_multiplier),
        "mean_multiplier": float(s),
        "steps": float(dp_plan.steps),
        "reference_noise_multiplier": float(ref.noise_multiplier),
        "reference_mean_multiplier": float(ref.mean_multiplier),
    }
    return AuditTarget(
        runner,
        float(ref.epsilon),
        float(dp_plan.epsilon),
        details,
        rigorous=("clopper_pearson", "tradeoff"),
        profile=ref.profile(),
        checks={**ref.checks(dp_plan), **ref.mean_checks(s)},
        releases=ref.steps,
        host=True,
    )


def _dpsgdf_grid_setup(cfg: AuditConfig, key: jax.Array) -> AuditTarget:
    """DPSGD-F through its grid path, end to end on the host: :func:`dpprep.dpsgdf.grid_group`
    (the grid's calibration and each seed's private mean, :func:`~dpprep.dpsgdf.mean_from_parts`)
    and :func:`dpprep.sweeps.sweep_points` over the grid's points ``C_F ∈ {1, 2}``; the audited
    run is the ``C_F = 2`` point, scored as :func:`_dpsgdf_setup` scores the engine's run (the
    released mean and every update, the out world's untouched columns) and held to the same
    independent yardstick. A sweep shares its data across seeds, so the canary sits at one place:
    record 0 (the slot padding points at). Each chunk of runs is one sweep per world it holds, over
    that world's runs repeated to the chunk's length (one compilation for any mix of worlds)."""
    from dpprep import dpsgdf, sweeps

    unit_bg, y_bg, e_d, weight = _dpsgdf_data(cfg, key)
    d = unit_bg.shape[1]
    model = _model("linear", d)
    feature_norm, clip, audited = 2.0, 1.0, 1
    model_list = dpsgdf.grid_models(
        ["dpsgdf"], [1.0, feature_norm], [cfg.learning_rate], [cfg.eps_f], cfg.epsilon
    )
    worlds = {
        True: np.concatenate([e_d[None], unit_bg]),
        False: np.concatenate([np.zeros((1, d), np.float32), unit_bg]),
    }
    labels = {
        world: np.concatenate([[1.0 if world else 0.0], y_bg]).astype(np.float32)
        for world in worlds
    }
    params0 = model.init(None)

    def group(
        world: bool, seed_keys: jax.Array
    ) -> tuple[TrainConfig, dict[str, Any], tuple[str, ...]]:
        found = dpsgdf.grid_group(
            "audit",
            model_list,
            cfg.batch_size,
            cfg.epochs,
            cfg.n,
            worlds[world].mean(axis=0),
            seed_keys,
            delta=cfg.delta,
            fit_intercept=False,
            num_classes=2,
            num_features=d,
        )
        points = dict(found.points)
        points["noise_multiplier"] = points["noise_multiplier"] * np.float32(cfg.noise_factor)
        return (
            dataclasses.replace(found.config, model=model, track_params=True),
            points,
            found.per_seed,
        )

    probe_config, probe, _ = group(True, jax.random.split(key, 1))
    dp_plan = probe_config.plan
    z, s = (
        float(probe["noise_multiplier"][audited]) / cfg.noise_factor,
        float(probe["mean_multiplier"][audited]),
    )
    ref = yardstick(
        "poisson",
        cfg.n,
        epsilon=cfg.epsilon,
        delta=cfg.delta,
        epochs=cfg.epochs,
        batch_size=cfg.batch_size,
        pad=dp_plan.pad,
        mean_epsilon=cfg.eps_f,
    )
    assert ref.mean_multiplier is not None

    def runner(keys, inside):
        inside = np.asarray(inside)
        # the engine target's training keys
        run_keys = jax.vmap(lambda k: jax.random.split(k)[1])(keys)
        score = np.empty(inside.shape[0])
        null = np.empty((inside.shape[0], ref.steps, 2))
        for world in (True, False):
            (mine,) = np.nonzero(inside == world)
            if mine.size == 0:
                continue
            # This world's runs, padded (repeated) to the chunk's length: one compilation for any
            # mix.
            take = np.resize(mine, inside.shape[0])
            config, points, per_seed = group(world, run_keys[take])
            result = sweeps.sweep_points(
                config,
                params0,
                (worlds[world], labels[world]),
                run_keys[take],
                points,
                per_seed=per_seed,
                return_params=False,
            )
            # (runs, T, d)
            trajectory = np.asarray(result.metrics["params"]["w"])[: mine.size, audited, :, :, 0]
            updates = np.diff(
                np.concatenate([np.zeros_like(trajectory[:, :1]), trajectory], axis=1), axis=1
            )
            mu_hat = np.asarray(points["feature_shift"])[: mine.size, audited]
            score[mine] = _dpsgdf_score(
                cfg, ref, updates, mu_hat, feature_norm, clip, weight, xp=np
            )
            null[mine] = _dpsgdf_null(cfg, ref, updates, np.full(mine.size, world), clip, xp=np)
        return {"score": score, "null": null}

    details = {
        "noise_multiplier": z,
        "mean_multiplier": s,
        "steps": float(dp_plan.steps),
        "reference_noise_multiplier": float(ref.noise_multiplier),
        "reference_mean_multiplier": float(ref.mean_multiplier),
    }
    checks = {**ref.checks(dp_plan), **ref.mean_checks(s), "calibration": bool(z >= ref.floor)}
    return AuditTarget(
        runner,
        float(ref.epsilon),
        float(dp_plan.epsilon),
        details,
        rigorous=("clopper_pearson", "tradeoff"),
        profile=ref.profile(),
        checks=checks,
        host=True,
        releases=ref.steps,
    )


class _CorrdpCase(NamedTuple):
    """A CorrDP-SGD audit's setting (:func:`_corrdp_case`): the run and its point, the data of
    both worlds, the audited column and its reference σ, and the ε the run is held to."""

    run: Any
    point: Any
    params0: dict
    x_bg: np.ndarray
    canary: np.ndarray
    column: int
    sigma_c: float
    sigma_s: float
    sigma_u: float
    null_columns: tuple[int, int]
    theoretical: float
    details: dict[str, float]

    def data(self, inside: Any, xp: Any = jnp) -> tuple[Any, Any]:
        """The run's dataset: the same record up to one feature, ``+a·e_c`` (in) or ``−a·e_c``
        (out), label 1, ``a = canary_norm·L``, after the background."""
        row = xp.where(inside, 1.0, -1.0) * xp.asarray(self.canary)
        x = xp.concatenate([xp.asarray(self.x_bg), row[None]])
        y = xp.concatenate([xp.zeros(self.x_bg.shape[0], xp.float32), xp.ones(1, xp.float32)])
        return x.astype(xp.float32), y


def _corrdp_case(cfg: AuditConfig, key: jax.Array, coordinate: str) -> _CorrdpCase:
    """CorrDP-SGD (full batch, per-example clipping at L, the theory constant): replace-one canary
    that differs from its neighbour only in one coordinate of the class ``coordinate`` — the
    insensitive coordinate ``dim`` or the sensitive coordinate 0 — each held to its own σ.

    The reference is derived here from the paper's Eq. 4 — ``σ_j² = K_δ L² T/(n² ε²)·w_j``, ``w =
    1`` on sensitive features and ``max{TV, m_s²/m²}`` on insensitive ones — and the closed form
    of T Gaussian releases of a ``2L/n`` shift, not from :func:`dpprep.corrdp.noise.corrdp_factors`
    or the accountant the learner uses: a bug in the learner's noise factors must not move the
    yardstick it is measured against. Two more columns no record touches, one of each class,
    carry the noise test, each normalised by its class's reference σ."""
    from dpprep.corrdp import noise as corr_noise
    from dpprep.corrdp import sgd as corr_sgd

    # Columns: background (sensitive, 0..dim−1) | canary's insensitive column | null sensitive |
    # null insensitive.
    d = cfg.dim + 3
    null_s, null_u = cfg.dim + 1, cfg.dim + 2
    model = _model("linear", d)
    lipschitz = 1.0
    run = corr_sgd.CorrDPSGD(
        model,
        steps=cfg.steps,
        learning_rate=cfg.learning_rate,
        delta=cfg.delta,
        clip_mode="per_example",
        l2_clip_norm=lipschitz,
    )
    sensitive = list(range(cfg.dim)) + [null_s]
    factors = corr_noise.corrdp_factors(d, sensitive, cfg.tv)
    params0 = model.init(None)
    point = corr_sgd.Point(
        "corrdp",
        cfg.epsilon,
        corr_noise.theory_constant(lipschitz, cfg.steps, cfg.n),
        corr_noise.param_factors(params0, factors),
    )
    # Eq. 4 written out (K_δ = log(1/δ) + 1; the floor m_s²/m² with m_s sensitive of m = d).
    weight_u = max(cfg.tv, (len(sensitive) / d) ** 2)
    base = math.sqrt(
        (math.log(1.0 / cfg.delta) + 1.0) * lipschitz**2 * cfg.steps / (cfg.n**2 * cfg.epsilon**2)
    )
    # noise std of a coordinate of the mean gradient
    sigma_s, sigma_u = base, base * math.sqrt(weight_u)
    column, sigma_c = (cfg.dim, sigma_u) if coordinate == "insensitive" else (0, sigma_s)
    # T full-batch Gaussian releases, each shifted by 2L/n (replace-one): one of μ = 2L√T/(n σ_c).
    theoretical = gdp_epsilon(2.0 * lipschitz * math.sqrt(cfg.steps) / (cfg.n * sigma_c), cfg.delta)
    x_bg, _ = background(cfg, key)
    x_bg = np.concatenate(
        [x_bg[:, : cfg.dim], np.zeros((cfg.n - 1, d - cfg.dim), np.float32)], axis=1
    ).astype(np.float32)
    canary = np.zeros(d, np.float32)
    canary[column] = lipschitz * cfg.canary_norm  # clipped to L·e_c
    details = {
        "nominal_epsilon": float(cfg.epsilon),
        "sigma_canary_coordinate": float(sigma_c),
        "factor_insensitive": float(weight_u),
        "factor_insensitive_library": float(factors[cfg.dim]),
        "factor_sensitive_library": float(factors[0]),
    }
    return _CorrdpCase(
        run,
        point,
        params0,
        x_bg,
        canary,
        column,
        sigma_c,
        sigma_s,
        sigma_u,
        (null_s, null_u),
        float(theoretical),
        details,
    )


def _corrdp_setup(cfg: AuditConfig, key: jax.Array, coordinate: str = "insensitive") -> AuditTarget:
    """CorrDP-SGD through the engine, white-box (:func:`_corrdp_case`): every update scored along
    the canary's column, the untouched columns of both classes carrying the noise test."""
    from dpprep.corrdp import sgd as corr_sgd

    case = _corrdp_case(cfg, key, coordinate)
    values = corr_sgd.point_values(case.run, case.params0, cfg.n, [case.point])
    tc = dataclasses.replace(case.run.train_config(cfg.n), track_params=True)
    hyper = Traced(
        cfg.learning_rate,
        0.0,
        1.0,
        extra={
            "stddev": jnp.float32(values["stddev"][0] * cfg.noise_factor),
            "noise_scales": jax.tree_util.tree_map(
                lambda v: jnp.asarray(v[0]), values["noise_scales"]
            ),
        },
    )
    train_fn = engine_fn(tc)
    null_scale = jnp.asarray([1 / case.sigma_s, 1 / case.sigma_u], jnp.float32) / cfg.learning_rate

    def one(run_key, inside):
        x, y = case.data(inside)
        _, metrics = train_fn(hyper, case.params0, x, y, run_key)
        updates = _updates(metrics["params"], case.params0)
        return {
            "score": jnp.sum(updates[:, case.column]) / (cfg.learning_rate * case.sigma_c),
            "null": updates[:, jnp.asarray(case.null_columns)] * null_scale,
        }

    return AuditTarget(
        jax.jit(jax.vmap(one)),
        case.theoretical,
        float(cfg.epsilon),
        case.details,
        rigorous=_GAUSSIAN_RIGOROUS,
        releases=cfg.steps,
    )


def _corrdp_points_setup(cfg: AuditConfig, key: jax.Array) -> AuditTarget:
    """CorrDP-SGD through its public entry :func:`dpprep.corrdp.sgd.sweep_points`, the runs of a
    chunk's world the seeds of one call (its point values, noise scales and engine all run), the
    canary at its insensitive coordinate (:func:`_corrdp_case`). The entry returns the last
    iterate, so the audit is final-model: its coordinate on the canary's column, which for this
    full-batch SGD on a linear loss is the sum of every update there (the white-box statistic)."""
    from dpprep.corrdp import sgd as corr_sgd

    case = _corrdp_case(cfg, key, "insensitive")

    def runner(keys, inside):
        inside = np.asarray(inside)
        out = np.zeros(inside.size, np.float32)
        for world in (True, False):
            rows = np.flatnonzero(inside == world)
            if rows.size == 0:
                continue
            result = corr_sgd.sweep_points(
                case.run, case.params0, case.data(world, np), keys[rows], [case.point]
            )
            w = np.asarray(result.params["w"])[:, 0, case.column, 0]
            w0 = float(np.asarray(case.params0["w"])[case.column, 0])
            out[rows] = (w - w0) / (cfg.learning_rate * case.sigma_c)
        return out

    return AuditTarget(
        runner,
        case.theoretical,
        float(cfg.epsilon),
        case.details,
        rigorous=_GAUSSIAN_RIGOROUS,
        host=True,
    )


def selection_reference_multiplier(
    *,
    steps: int,
    mean: float,
    shape: float,
    score_noise: float,
    in_validation: float,
    epsilon: float,
    delta: float,
) -> float:
    """The training multiplier a private selection of full-batch DP-GD candidates needs for
    (``epsilon``, ``delta``) under replace-one, computed from dp-accounting's events directly (the
    audit's reference for :func:`dpprep.selection.select`'s calibration, independent of its
    accountant): each part of the uniform split is the best of ``K`` (``mean``, ``shape``) runs —
    ``steps`` Gaussian releases whose sum moves by 2C (multiplier ``z/2`` per unit of
    sensitivity), or one noisy count that moves by 1 (``score_noise``) — in the RDP accountant
    (the only one with ``RepeatAndSelectDpEvent``), and δ is their average weighted by the
    record's chance to sit in each (``in_validation`` for the counts), which is valid by the joint
    convexity of the hockey-stick divergence (Papernot & Steinke 2022 for the repetition)."""
    from dp_accounting.rdp import rdp_privacy_accountant as rdp
    from scipy import optimize

    def delta_at(event: dp_event_lib.DpEvent, eps: float) -> float:
        # add/remove semantics: each multiplier is the noise over the release's sensitivity
        accountant = rdp.RdpAccountant(list(dp.RDP_ORDERS))
        return float(accountant.compose(event).get_delta(eps))

    counts = dp_event_lib.RepeatAndSelectDpEvent(
        dp_event_lib.GaussianDpEvent(score_noise), mean, shape
    )

    def epsilon_at(z: float) -> float:
        runs = dp_event_lib.RepeatAndSelectDpEvent(
            dp_event_lib.SelfComposedDpEvent(dp_event_lib.GaussianDpEvent(z / 2), steps),
            mean,
            shape,
        )

        def excess(eps: float) -> float:
            return (
                (1 - in_validation) * delta_at(runs, eps)
                + in_validation * delta_at(counts, eps)
                - delta
            )

        hi = 1.0
        while excess(hi) > 0:
            hi *= 2
        return float(optimize.brentq(excess, 0.0, hi, xtol=1e-9)) if excess(0.0) > 0 else 0.0

    lo, hi = 1e-3, 1.0
    while epsilon_at(hi) > epsilon:
        lo, hi = hi, hi * 2
    return float(optimize.brentq(lambda z: epsilon_at(z) - epsilon, lo, hi, xtol=1e-7))


def _selection_plan(selection: Any, cfg: AuditConfig, **noise: float) -> DPPlan:
    """The audited selections' plan: ``cfg.steps`` steps of full-batch DP-GD, C = 1, replace-one
    (the canary replaces a record), at ``noise`` (``target_epsilon`` or ``noise_multiplier``)."""
    return selection.plan(
        "full",
        cfg.n,
        steps=cfg.steps,
        l2_clip_norm=1.0,
        delta=cfg.delta,
        neighboring_relation="replace_one",
        **noise,
    )


def _selection_setup(cfg: AuditConfig, key: jax.Array) -> AuditTarget:
    """A private selection (:func:`dpprep.selection.select`), the whole procedure, final model:
    random search with a random number of candidates (truncated geometric, mean 2) over two
    learning rates of ``steps``-step full-batch DP-GD on a logistic regression, noisy validation
    scores, the best candidate released. Replace-one: record 0 is the canary ``0.9·e_0`` (label 1,
    a coordinate no other record uses) or an ordinary record; the score is the released model's
    weight on ``e_0``. Held to the requested ε, which the selection's plan must account end to end
    (its calibration covers training, the noisy scores and the repetitions). A host runner: each
    run is one :func:`~dpprep.selection.select` call (small data, one compilation per shape)."""
    from dpprep.selection import PrivateSelection, Repetitions, select

    d = cfg.dim
    rng = np.random.default_rng(np.asarray(jax.random.randint(key, (), 0, 2**31 - 1)).item())
    x = np.zeros((cfg.n, d), np.float32)
    x[:, 1:] = rng.uniform(-0.4, 0.4, size=(cfg.n, d - 1))
    y = rng.integers(0, 2, size=cfg.n).astype(np.int32)
    x_in, y_in = x.copy(), y.copy()
    x_in[0], y_in[0] = 0.0, 1
    x_in[0, 0] = 0.9
    selection = PrivateSelection(Repetitions(2.0, 1.0), score_noise=8.0, validation_size=4)
    plan = _selection_plan(selection, cfg, target_epsilon=cfg.epsilon)
    requested_z = float(plan.noise_multiplier)
    claimed = float(plan.epsilon)
    if cfg.noise_factor != 1.0:  # a deliberately broken learner: less noise than its account claims
        plan = _selection_plan(
            selection, cfg, noise_multiplier=plan.noise_multiplier * cfg.noise_factor
        )
    model = models.logistic_regression(d, fit_intercept=False)
    config = TrainConfig(model=model, hyper=Hyper(learning_rate=1.0), plan=plan, iterates="last")
    params0 = model.init(jax.random.key(0))
    grid = {"learning_rate": [2.0, 4.0]}

    def runner(keys, inside):
        out = []
        for run_key, world in zip(keys, np.asarray(inside)):
            result = select(config, params0, (x_in, y_in) if world else (x, y), run_key, grid)
            out.append(float(np.ravel(jax.tree_util.tree_leaves(result.params)[0])[0]))
        return np.asarray(out)

    reference = selection_reference_multiplier(
        steps=cfg.steps,
        mean=selection.repetitions.mean,
        shape=selection.repetitions.shape,
        score_noise=selection.score_noise,
        in_validation=selection.validation_size / cfg.n,
        epsilon=cfg.epsilon,
        delta=cfg.delta,
    )
    details = {
        "noise_multiplier": float(plan.noise_multiplier),
        "reference_noise_multiplier": reference,
        "steps": float(cfg.steps),
    }
    return AuditTarget(
        runner,
        float(cfg.epsilon),
        claimed,
        details,
        host=True,
        checks={
            "plan_account": bool(claimed <= cfg.epsilon * (1 + 1e-9)),
            # the requested plan's noise, before any deliberate breakage (noise_factor)
            "calibration": bool(requested_z >= (1 - YARDSTICK_TOLERANCE) * reference),
        },
    )


#: The selection-scores audit's validation part (rows) and its candidates' training noise (the
#: training part is the same in both worlds: any multiplier).
_SCORES_VALIDATION, _SCORES_TRAINING_NOISE = 20, 10.0


def selection_scores_epsilon(
    *, mean: float, shape: float, score_noise: float, delta: float
) -> float:
    """ε at ``delta`` of the best of ``K`` (``mean``, ``shape``) noisy counts of one validation
    part (each a count that one record moves by at most 1, plus Gaussian noise of std
    ``score_noise``), from dp-accounting's RDP accountant directly (Papernot & Steinke 2022): what
    a private selection releases about a record that sits in its validation part."""
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    event = dp_event_lib.RepeatAndSelectDpEvent(
        dp_event_lib.GaussianDpEvent(score_noise), mean, shape
    )
    return float(rdp.RdpAccountant(list(dp.RDP_ORDERS)).compose(event).get_epsilon(delta))


def _selection_score_noise(epsilon: float, delta: float) -> float:
    """The score noise at which :func:`selection_scores_epsilon` (K geometric, mean 2) is
    ``epsilon``."""
    from scipy import optimize

    def excess(sigma: float) -> float:
        return (
            selection_scores_epsilon(mean=2.0, shape=1.0, score_noise=sigma, delta=delta) - epsilon
        )

    hi = 1.0
    while excess(hi) > 0:
        hi *= 2
    return float(optimize.brentq(excess, hi / 2 if hi > 1 else 1e-3, hi, xtol=1e-9))


def _selection_scores_setup(cfg: AuditConfig, key: jax.Array) -> AuditTarget:
    """A private selection's noisy validation scores, through the public
    :func:`dpprep.selection.search_many` on a split the audit fixes (the caller's split, which
    :func:`~dpprep.selection.search_many` takes), final model: each run is one search (random
    search over two learning rates of ``steps``-step full-batch DP-GD, ``K`` truncated geometric
    with mean 2), the runs of a world packed into one call. The canary is a validation row on
    which every candidate's prediction is fixed (all-zero features: logit 0, class 0), as are the
    other validation rows': labelled 0 (in) or 1 (out, replace-one), it moves every candidate's
    count by exactly 1, so the released noisy score moves by one count over the validation size.
    The score noise is set so that the scores cost ``cfg.epsilon`` (the candidates' training noise
    is any: the training part is the same in both worlds). The score is the released score.
    Held to dp-accounting's ε of the repeated-and-selected
    noisy count (:func:`selection_scores_epsilon`): the training part is the same in both
    worlds, so that is the whole release's guarantee for this split — tighter than the
    selection's own ε (reported as ``claimed``)."""
    from dpprep.selection import PrivateSelection, Repetitions, Search, search_many

    del key  # the data are fixed: the canary's effect does not depend on them
    v, d = _SCORES_VALIDATION, cfg.dim
    if cfg.n <= v + 1:
        raise ValueError(f"selection_scores needs n > {v + 1} (a {v}-row validation part)")
    score_noise = _selection_score_noise(cfg.epsilon, cfg.delta)
    selection = PrivateSelection(Repetitions(2.0, 1.0), score_noise=score_noise, validation_size=v)
    plan = _selection_plan(selection, cfg, noise_multiplier=_SCORES_TRAINING_NOISE)
    rng = np.random.default_rng(0)
    train_x = rng.uniform(-0.5, 0.5, size=(cfg.n - v, d)).astype(np.float32)
    train = (train_x, (train_x[:, 0] > 0).astype(np.int32))
    validation_x = np.zeros((v, d), np.float32)
    model = models.logistic_regression(d, fit_intercept=False)
    config = TrainConfig(model=model, hyper=Hyper(learning_rate=1.0), plan=plan, iterates="last")
    params0 = model.init(jax.random.key(0))
    grid = {"learning_rate": np.asarray([1.0, 2.0], np.float32)}
    theoretical = selection_scores_epsilon(
        mean=2.0, shape=1.0, score_noise=score_noise, delta=cfg.delta
    )

    def runner(keys, inside):
        inside = np.asarray(inside)
        out = np.zeros(inside.size)
        for world in (True, False):
            rows = np.flatnonzero(inside == world)
            if rows.size == 0:
                continue
            labels = np.zeros(v, np.int32)
            labels[0] = 0 if world else 1  # class 0 is every candidate's prediction
            found = search_many(
                config,
                params0,
                train,
                (validation_x, labels),
                [Search(keys[i], grid) for i in rows],
                selection=selection,
            )
            out[rows] = [float(r.score) for r in found]  # K >= 1 (geometric): always a score
        return out

    details = {
        "noise_multiplier": float(plan.noise_multiplier),
        "score_noise": score_noise,
        "validation_size": float(v),
        "steps": float(cfg.steps),
    }
    return AuditTarget(runner, theoretical, float(plan.epsilon), details, host=True)


def impute_canary_datasets(
    cfg: AuditConfig, key: jax.Array
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
    """The pipeline audit's two raw datasets, mean-imputed: column 0 is missing in a share
    ``missing_fraction`` of the rows (label 1: their imputed value enters the gradients), observed
    in the others (label 0: they only set the mean), and the canary (label 1) has column 0 = +1 (in)
    or −1 (out). Returns ``(x_in, x_out, y, sensitivity)``; the sensitivity is the larger of the two
    datasets' (Cor. 4 depends on n and p only, which they share)."""
    from dpprep.preprocess import impute_mean

    n, p = cfg.n, int(round(cfg.missing_fraction * (cfg.n - 1)))
    observed = np.asarray(
        jax.random.uniform(key, (n - 1 - p,), minval=-0.5, maxval=0.5), np.float64
    )
    col = np.concatenate([np.full(p, np.nan), observed])
    raw = np.stack([col, np.zeros(n - 1)], axis=1)
    y = np.concatenate([np.ones(p), np.zeros(n - 1 - p), [1.0]]).astype(np.float32)
    out = []
    for value in (1.0, -1.0):
        imputed = impute_mean(np.concatenate([raw, [[value, 0.0]]]))
        out.append(imputed)
    return (out[0].data.astype(np.float32), out[1].data.astype(np.float32), y, out[0].sensitivity)


def _impute_setup(cfg: AuditConfig, key: jax.Array) -> AuditTarget:
    """Mean imputation then Hu et al.'s DP-GD (σ = L√T/(εn), replace-one), held against the
    pipeline's overall ε (Theorem 2 or group privacy, whichever is smaller)."""
    from dpprep.preprocess.privacy import meta, table1

    x_in, x_out, y, sens = impute_canary_datasets(cfg, key)
    mechanism = table1.dp_gd(epsilon=cfg.epsilon, lipschitz=1.0, smoothness=1.0)
    overall = meta.overall_privacy(mechanism, sens, delta=cfg.delta)
    candidates = [overall.epsilon] + (
        [overall.group_epsilon] if overall.group_epsilon is not None else []
    )
    theoretical = float(min(candidates))
    alone = gdp_epsilon(2.0 * cfg.epsilon, cfg.delta)  # DP-GD's own RDP 2αε² is 2ε-GDP
    model = _model("linear", 2)
    z = math.sqrt(cfg.steps) / cfg.epsilon  # noise std L√T/ε on the gradient sum (L = C = 1)
    dp_plan = DPPlan.create(
        "full",
        cfg.n,
        steps=cfg.steps,
        l2_clip_norm=1.0,
        noise_multiplier=z,
        delta=cfg.delta,
        neighboring_relation="replace_one",
    )
    tc = TrainConfig(model, Hyper(cfg.learning_rate), dp_plan, track_params=True)
    hyper = Traced(cfg.learning_rate, z * cfg.noise_factor, 1.0)
    train_fn = engine_fn(tc)
    params0 = model.init(None)
    # The gradient sums differ by Δ (in − out) on every step; project the updates on it.
    g_in, g_out = -(y[:, None] * x_in).sum(0), -(y[:, None] * x_out).sum(0)
    delta_vec = g_in - g_out
    direction = jnp.asarray(delta_vec / np.linalg.norm(delta_vec))
    x_in, x_out, y = jnp.asarray(x_in), jnp.asarray(x_out), jnp.asarray(y)
    g_out = jnp.asarray(g_out)

    def one(run_key, inside):
        x = jnp.where(inside, x_in, x_out)
        _, metrics = train_fn(hyper, params0, x, y, run_key)
        # noisy gradient sums
        sums = -_updates(metrics["params"], params0) * cfg.n / cfg.learning_rate
        return jnp.sum((sums - g_out) @ direction) / z

    details = {
        "mechanism_epsilon_alone": float(alone),
        "theorem2_epsilon": float(overall.epsilon),
        "group_epsilon": float(overall.group_epsilon or math.nan),
        "linf": float(sens.linf),
        "l2": float(sens.l2),
        "gradient_shift": float(np.linalg.norm(delta_vec)),
    }
    return AuditTarget(
        jax.jit(jax.vmap(one)), theoretical, float(alone), details, rigorous=_GAUSSIAN_RIGOROUS
    )


# --------------------------------------------------------------------------------------------------
# The independent yardstick


#: Relative tolerance between the reference calibration and the plan's: two PLD calibrations of
#: the same run (different grids and brackets) agree to ~3e-5 here; a noise within 1 % of the
#: reference is not refuted, and the curves the audit holds a learner to are those at ``(1 − τ)·z``.
YARDSTICK_TOLERANCE = 0.01
# : PLD grid of the reference accountant (coarser than the plan's 1e-4: pessimistic, and ~10x fewer
# points).
_REFERENCE_DISCRETIZATION = 1e-3


@renamed_fields(normaliser="normalize_by")
@dataclasses.dataclass(frozen=True)
class Yardstick:
    """What an audit holds a learner to, computed from the run the user *stated* (sampler, n, batch
    size, steps or epochs, requested (ε, δ)) through dp-accounting directly — never from the plan
    under test, so a calibration, step-count or sampling-rate bug in the plan does not move it.

    Attributes:
      requested: the ε the user asked for.
      noise_multiplier: the reference calibration ``z_ref``: the smallest multiplier with the stated
        run (ε, δ)-DP by dp-accounting's PLD accountant (Poisson overflow slack taken out of δ).
      floor: ``(1 − τ)·z_ref`` (:data:`YARDSTICK_TOLERANCE`): the least noise an honest learner has;
        the noise test and the claimed curve use it, so two calibrations' rounding never flags.
      epsilon: the ε the audit is held to — the stated run's at ``floor`` (for shuffled DP-SGD
        the proven no-amplification bound at ``floor``; its as-if-Poisson claim is not proven).
      steps: the steps the stated run takes (the trajectory length an audit expects).
      releases: the Gaussian releases of the proven event (``steps``; for shuffled DP-SGD
        ``epochs``: each record is in one batch per epoch).
      normalize_by: what each step's noisy sum is divided by (n for full batches, B otherwise).
      sampling_rate: the stated ``B/n``.
      overflow_prob: probability that a padded Poisson batch drops a record (stated pad), charged
        as the δ slack ``(1 + e^ε)·p`` in the profile.
      neighboring_relation: the stated guarantee's relation (:data:`NEIGHBORING_RELATIONS`).
    """

    requested: float
    delta: float
    noise_multiplier: float
    floor: float
    epsilon: float
    steps: int
    releases: int
    normalize_by: float
    sampling_rate: float
    overflow_prob: float
    sampler: str
    proven: str
    mean_multiplier: float | None = None
    neighboring_relation: str = "add_remove"

    @property
    def mean_floor(self) -> float | None:
        """``(1 − τ)·σ_F``: the least noise multiplier an honest private mean has (None: no
        mean)."""
        return (
            None
            if self.mean_multiplier is None
            else (1.0 - YARDSTICK_TOLERANCE) * self.mean_multiplier
        )

    def event(self, noise_multiplier: float) -> dp_event_lib.DpEvent:
        """The proven event of the stated run at ``noise_multiplier`` (with the private mean at
        its floor, for DPSGD-F)."""
        return _reference_event(
            self.proven, self.sampling_rate, self.releases, noise_multiplier, self.mean_floor
        )

    def profile(self) -> Callable[[np.ndarray], np.ndarray]:
        """The curve ``ε ↦ δ(ε)`` the learner is held to: the proven event at ``floor``, plus the
        overflow slack."""
        return privacy_profile(
            self.event(self.floor),
            overflow_prob=self.overflow_prob,
            discretization=_REFERENCE_DISCRETIZATION,
            neighboring_relation=self.neighboring_relation,
        )

    def checks(self, plan: DPPlan) -> dict[str, bool]:
        """The deterministic checks of a plan against the yardstick: ``calibration`` — its noise is
        at least the reference's floor; ``plan_account`` — the plan's own account of its noise is
        within the requested ε (``plan.epsilon(plan.calibrate(ε)) ≤ ε``)."""
        return {
            "calibration": bool(plan.noise_multiplier >= self.floor),
            "plan_account": bool(plan.epsilon <= self.requested * (1 + 1e-9)),
        }

    def mean_checks(self, mean_multiplier: float) -> dict[str, bool]:
        """DPSGD-F: the private mean's multiplier (on the sum's C_F) against the reference floor."""
        assert self.mean_floor is not None
        return {"mean_calibration": bool(mean_multiplier >= self.mean_floor)}


def _reference_event(
    kind: str, q: float, releases: int, z: float, mean: float | None = None
) -> dp_event_lib.DpEvent:
    gaussian = dp_event_lib.GaussianDpEvent(z)
    one = gaussian if kind == "full" else dp_event_lib.PoissonSampledDpEvent(q, gaussian)
    run = dp_event_lib.SelfComposedDpEvent(one, releases)
    return (
        run
        if mean is None
        else dp_event_lib.ComposedDpEvent([dp_event_lib.GaussianDpEvent(mean), run])
    )


def analytic_gaussian_multiplier(epsilon: float, delta: float) -> float:
    """The smallest σ with one Gaussian release of sensitivity 1 and noise std σ (ε, δ)-DP: the
    root of Balle & Wang's (2018) exact δ(σ) = Φ(1/(2σ) − εσ) − e^ε·Φ(−1/(2σ) − εσ), solved here
    with scipy (the audit's reference for DPSGD-F's private mean, independent of dpprep's)."""
    from scipy import optimize

    def gap(sigma: float) -> float:
        a, b = 1 / (2 * sigma), epsilon * sigma
        return float(stats.norm.cdf(a - b) - math.exp(epsilon) * stats.norm.cdf(-a - b)) - delta

    hi = 1.0
    while gap(hi) > 0:
        hi *= 2
    return float(optimize.brentq(gap, 1e-6, hi, xtol=1e-12, rtol=1e-12))


#: The neighbouring relations an audit's worlds can differ by: the canary's slot holds nothing
#: (a zero-gradient record) or, for "replace_one", a record whose clipped gradient opposes the
#: canary's, so the worlds' sums differ by 2C.
NEIGHBORING_RELATIONS = ("add_remove", "replace_one")


def _reference_accountant(
    neighboring_relation: str = "add_remove", discretization: float = _REFERENCE_DISCRETIZATION
) -> Any:
    from dp_accounting import privacy_accountant
    from dp_accounting.pld import pld_privacy_accountant

    relation = {
        "add_remove": privacy_accountant.NeighboringRelation.ADD_OR_REMOVE_ONE,
        "replace_one": privacy_accountant.NeighboringRelation.REPLACE_ONE,
    }[neighboring_relation]
    return pld_privacy_accountant.PLDAccountant(
        relation, value_discretization_interval=discretization
    )


def _slack(epsilon: float, overflow_prob: float) -> float:
    return (1.0 + math.exp(min(epsilon, 700.0))) * overflow_prob


@functools.lru_cache(maxsize=256)
def _reference_epsilon(
    kind: str,
    q: float,
    releases: int,
    z: float,
    delta: float,
    overflow_prob: float,
    mean: float | None = None,
    neighboring_relation: str = "add_remove",
) -> float:
    accountant = _reference_accountant(neighboring_relation)
    accountant.compose(_reference_event(kind, q, releases, z, mean))
    eps = float(accountant.get_epsilon(delta))
    if overflow_prob > 0:  # the slack at the (larger) ε of the slack-free δ is a valid charge
        eps = float(
            accountant.get_epsilon(max(delta - _slack(2 * eps + 1, overflow_prob), delta / 2))
        )
    return eps


@functools.lru_cache(maxsize=256)
def _reference_calibration(
    kind: str,
    q: float,
    releases: int,
    epsilon: float,
    delta: float,
    overflow_prob: float,
    mean: float | None = None,
    neighboring_relation: str = "add_remove",
) -> float:
    from dp_accounting import mechanism_calibration

    target_delta = delta - _slack(epsilon, overflow_prob)
    if not target_delta > 0:
        raise ValueError(f"the stated run's Poisson overflow slack leaves nothing of delta={delta}")

    def eps_of(z: float) -> float:
        accountant = _reference_accountant(neighboring_relation)
        accountant.compose(_reference_event(kind, q, releases, z, mean))
        return float(accountant.get_epsilon(target_delta))

    # A bracket found by doubling from z = 1 (a tiny lower end would make the PLD grid explode).
    lo = hi = 1.0
    while eps_of(hi) > epsilon:
        lo, hi = hi, 2 * hi
    while lo == hi or eps_of(lo) <= epsilon:
        if lo < 1e-2:
            raise ValueError(
                f"the stated run is (epsilon={epsilon}, delta={delta})-DP with almost no noise"
            )
        lo, hi = lo / 2, lo
    return float(
        mechanism_calibration.calibrate_dp_mechanism(
            lambda: _reference_accountant(neighboring_relation),
            lambda z: _reference_event(kind, q, releases, z, mean),
            epsilon,
            target_delta,
            mechanism_calibration.ExplicitBracketInterval(lo, hi),
            tol=1e-5,
        )
    )


def yardstick(
    sampler: str,
    n: int,
    *,
    epsilon: float,
    delta: float,
    steps: int | None = None,
    epochs: int | None = None,
    batch_size: int | None = None,
    pad: int | None = None,
    mean_epsilon: float | None = None,
    neighboring_relation: str = "add_remove",
) -> Yardstick:
    """The :class:`Yardstick` of the run a user states: ``sampler`` in ``"full"`` (``steps``),
    ``"poisson"`` (``epochs`` at expected batch ``batch_size``: ``⌈E·n/B⌉`` steps; ``pad``: the
    stated padded batch, whose overflow is charged) or ``"shuffle"`` (``epochs`` × ``⌈n/B⌉`` steps,
    calibrated as if Poisson — the customary claim — and held to its proven bound, ``epochs``
    Gaussian releases), calibrated to (``epsilon``, ``delta``) by dp-accounting's PLD accountant.
    ``mean_epsilon``: DPSGD-F's private mean first, one Gaussian release at its share ``ε_F``
    (:func:`analytic_gaussian_multiplier`), composed with the run. ``neighboring_relation``: the
    guarantee's relation, "add_remove" or "replace_one" (dp-accounting's ``REPLACE_ONE``: a record
    replaced by any other). Written from the samplers' definitions, not from
    :mod:`dpprep.sampling`, :mod:`dpprep.dpsgdf` or the plan."""
    from scipy import stats as sps

    if neighboring_relation not in NEIGHBORING_RELATIONS:
        raise ValueError(
            f"neighboring_relation must be one of {NEIGHBORING_RELATIONS}, got"
            f" {neighboring_relation!r}"
        )

    # before any accounting: a NaN epsilon read as "the overflow slack leaves nothing of delta",
    # a negative one never ended the bracket search, an infinite one exploded the PLD grid
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    n = check_positive_int(n, "n")
    if mean_epsilon is not None:
        mean_epsilon = check_epsilon(mean_epsilon, "mean_epsilon")
    if batch_size is not None and check_positive_int(batch_size, "batch_size") > n:
        raise ValueError(f"batch_size must be at most n = {n}, got {batch_size}")
    needed = {
        "full": ("steps",),
        "poisson": ("epochs", "batch_size"),
        "shuffle": ("epochs", "batch_size"),
    }
    if sampler not in needed:
        raise ValueError(
            f"no reference for sampler {sampler!r}: one of 'full', 'poisson', 'shuffle'"
        )
    given = {"steps": steps, "epochs": epochs, "batch_size": batch_size}
    missing = [name for name in needed[sampler] if given[name] is None]
    if missing:
        raise ValueError(f"the reference of sampler {sampler!r} needs {', '.join(missing)}")
    if sampler == "full":
        steps = check_positive_int(steps, "steps")
        q, calibrated, claimed_steps, releases, normalize_by, over = (
            1.0,
            "full",
            steps,
            steps,
            float(n),
            0.0,
        )
    elif sampler in ("poisson", "shuffle"):
        b, e = check_positive_int(batch_size, "batch_size"), check_positive_int(epochs, "epochs")
        q = b / n
        normalize_by = float(b)
        if sampler == "poisson":
            claimed_steps = releases = max(1, math.ceil(e * n / b - 1e-9))
            per_step = float(sps.binom.sf(pad, n, q)) if pad is not None and pad < n else 0.0
            over = -math.expm1(releases * math.log1p(-per_step)) if per_step < 1 else 1.0
            calibrated = "poisson"
        else:
            claimed_steps, releases, over, calibrated = e * -(-n // b), e, 0.0, "poisson"
    else:
        raise ValueError(
            f"no reference for sampler {sampler!r}: one of 'full', 'poisson', 'shuffle'"
        )
    mean = (
        None
        if mean_epsilon is None
        else analytic_gaussian_multiplier(float(mean_epsilon), float(delta))
    )
    z_ref = _reference_calibration(
        calibrated, q, claimed_steps, float(epsilon), float(delta), over, mean, neighboring_relation
    )
    proven = "full" if sampler in ("full", "shuffle") else "poisson"
    floor = (1.0 - YARDSTICK_TOLERANCE) * z_ref
    mean_floor = None if mean is None else (1.0 - YARDSTICK_TOLERANCE) * mean
    held_to = _reference_epsilon(
        proven, q, releases, floor, float(delta), over, mean_floor, neighboring_relation
    )
    return Yardstick(
        float(epsilon),
        float(delta),
        z_ref,
        floor,
        held_to,
        claimed_steps,
        releases,
        normalize_by,
        q,
        over,
        sampler,
        proven,
        mean,
        neighboring_relation,
    )


# --------------------------------------------------------------------------------------------------
# The noise test: a score that assumes nothing about the attack


#: The noise test's parts (:class:`NoiseTest`).
NOISE_PARTS = ("scale", "steps", "runs", "coordinates")


@dataclasses.dataclass(frozen=True)
class NoiseTest:
    """The noise test of an audit: the updates of coordinates no record touches, normalised by
    the least noise an honest learner adds (:attr:`Yardstick.floor`), are i.i.d. N(0, s²) with
    s ≥ 1 for every honest learner, whatever its sampler. Four exact tests of that, at a split
    significance (each at ``significance/4``, the two-sided ones split again):

    * ``scale``: on each coordinate, ``Σ z² < χ²_{N}`` quantile — less noise than the account
      charges there; the coordinates' p-values combined by Šidák's ``1 − (1 − p_min)^m`` (exact
      for the independent coordinates of an honest learner), so less noise on one coordinate class
      is not offset by more on another (CorrDP's sensitive and insensitive features).
    * ``steps``: within each run and coordinate, the part of the updates along the all-ones
      direction over steps against the rest, ``F(R·m, R·m·(T−1))`` two-sided — noise reused or
      cancelling across steps (e.g. a noise key that is not advanced).
    * ``runs``: the same across runs (``F(T·m, T·m·(R−1))``, upper) — noise shared by runs.
    * ``coordinates``: the same across the coordinates (``F(R·T, R·T·(m−1))``, two-sided) — one
      noise draw for several coordinates (an adversary subtracts a clean coordinate).

    Each F statistic is a ratio of independent χ² sums of orthogonal projections of i.i.d.
    Gaussians (scale-free: exact for any s). ``p_values`` per part; ``flagged`` the parts
    rejected."""

    p_values: dict[str, float]
    significance: float
    samples: int

    @property
    def flagged(self) -> tuple[str, ...]:
        return tuple(
            part for part, p in self.p_values.items() if p < self.significance / len(NOISE_PARTS)
        )


def _f_test(values: np.ndarray, axis: int, two_sided: bool) -> float:
    """p-value of the F test that ``values``' component along the all-ones direction of ``axis``
    has the same variance as the orthogonal rest (i.i.d. Gaussian entries)."""
    k = values.shape[axis]
    along = np.sum(values, axis=axis) ** 2 / k
    # no cancellation
    rest = np.sum((values - np.mean(values, axis=axis, keepdims=True)) ** 2, axis=axis)
    dfn, dfd = along.size, along.size * (k - 1)
    numerator, denominator = along.sum() / dfn, rest.sum() / dfd
    f = numerator / denominator if denominator > 0 else (math.inf if numerator > 0 else 1.0)
    upper = float(stats.f.sf(f, dfn, dfd))
    return min(1.0, 2 * min(upper, 1 - upper)) if two_sided else upper


def noise_test(null: ArrayLike, *, significance: float) -> NoiseTest:
    """:class:`NoiseTest` of ``null``: shape ``(runs, steps, coordinates)``, normalised so that an
    honest learner's entries are i.i.d. N(0, s²), s ≥ 1; a run with a NaN entry is left out (the
    target marks runs whose columns a record touches)."""
    z = np.asarray(null, np.float64)
    if z.ndim == 3:  # runs whose columns are NaN are not tested (the target says they are touched)
        z = z[~np.any(np.isnan(z), axis=(1, 2))]
    if z.ndim != 3 or min(z.shape) < 2:
        raise ValueError(
            "the noise test needs (runs, steps, coordinates) with each >= 2 (runs with NaN left"
            f" out), got shape {z.shape}"
        )
    per_coordinate = stats.chi2.cdf(np.sum(z**2, axis=(0, 1)), z.shape[0] * z.shape[1])
    smallest = float(np.min(per_coordinate))
    p = {
        # Šidák's 1 − (1 − p_min)^m (p_min = 1, far more noise than the floor: 1)
        "scale": 1.0 if smallest >= 1.0 else float(-np.expm1(z.shape[2] * np.log1p(-smallest))),
        "steps": _f_test(z, 1, True),
        "runs": _f_test(z, 0, False),
        "coordinates": _f_test(z, 2, True),
    }
    return NoiseTest(p, float(significance), int(z.size))


# --------------------------------------------------------------------------------------------------
# White-box trajectory audits of the SGD family: canaries that stress the rules, every path


@models.spec_factory
def two_leaf_linear_loss_model(w_features: int, v_features: int) -> models.Model:
    """:func:`linear_loss_model` over two parameter leaves (``w`` on the first ``w_features``
    columns, ``v`` on the rest) and without a ``residual``: its per-example gradients go through
    the general clipping path (layer taps, :mod:`dpprep.taps`), whose norm is taken over every
    leaf."""

    def init(key):
        del key
        return {
            "w": jnp.zeros((w_features, 1), jnp.float32),
            "v": jnp.zeros((v_features, 1), jnp.float32),
        }

    def apply(params, x):
        return x[:, :w_features] @ params["w"] + x[:, w_features:] @ params["v"]

    def per_example_loss(params, x, y):
        return -y * apply(params, x)[:, 0]

    return models.Model(
        "audit_two_leaf_linear_loss", init, apply, per_example_loss, None, task="regression"
    )


@models.spec_factory
def multi_leaf_linear_loss_model(columns: tuple[tuple[int, ...], ...]) -> models.Model:
    """:func:`linear_loss_model` over ``len(columns)`` parameter leaves: leaf ``w<i>`` weighs the
    feature columns ``columns[i]``. Without a ``residual``, its per-example gradients go through
    the general clipping path (layer taps, :mod:`dpprep.taps`), whose norm is taken over every
    leaf."""
    index = [jnp.asarray(c) for c in columns]

    def init(key):
        del key
        return {f"w{i}": jnp.zeros((len(c), 1), jnp.float32) for i, c in enumerate(columns)}

    def apply(params, x):
        return sum(x[:, cols] @ params[f"w{i}"] for i, cols in enumerate(index))

    def per_example_loss(params, x, y):
        return -y * apply(params, x)[:, 0]

    return models.Model(
        f"audit_{len(columns)}_leaf_linear_loss",
        init,
        apply,
        per_example_loss,
        None,
        task="regression",
    )


@functools.lru_cache(maxsize=None)
def example_dropout(model: models.Model, rate: float) -> models.Model:
    """``model`` made stochastic (:attr:`~dpprep.models.Model.stochastic`): given a key, each
    example's loss is dropped with probability ``rate`` and a kept one is scaled by
    ``1/(1 − rate)`` (inverted dropout of the whole example: its gradient is 0 or the model's own
    over ``1 − rate``, so clipping still bounds what it contributes by C); without a key, the
    model's own loss (evaluation). One object per ``(model, rate)``, so one compilation.

    >>> m = example_dropout(linear_loss_model(3), 0.5)
    >>> x, y = jnp.ones((4, 3)), jnp.ones(4)
    >>> params = m.init(None)
    >>> params = {"w": params["w"] + 1.0}
    >>> losses = m.per_example_loss(params, x, y, key=jax.random.key(1))
    >>> sorted(set(np.asarray(losses).tolist())) <= [-6.0, 0.0]
    True
    >>> m.per_example_loss(params, x, y).tolist()  # no key: the model's own
    [-3.0, -3.0, -3.0, -3.0]
    """
    if not 0 < rate < 1:
        raise ValueError(f"rate must be in (0, 1), got {rate!r}")
    keep = 1.0 - rate

    def apply(params, x, key=None):
        del key  # dropout acts on the loss; predictions are the model's own
        return model.apply(params, x)

    def per_example_loss(params, x, y, key=None):
        losses = model.per_example_loss(params, x, y)
        if key is None:
            return losses
        kept = jax.random.bernoulli(key, keep, losses.shape)
        return jnp.where(kept, losses / keep, 0.0)

    return models.Model(
        f"{model.name}_dropout",
        model.init,
        apply,
        per_example_loss,
        None,  # the loss depends on the key: no key-free residual, so the per-example path
        task=model.task,
        stochastic=True,
    )


class _Layout(NamedTuple):
    """Feature columns of a white-box audit: the canary's unit direction ``u`` (features), the
    columns no record touches (``null``), the model, and how a feature vector is the model's
    parameter tree (the linear loss's gradient in the parameters is −y times the features, leaf by
    leaf)."""

    model: models.Model
    features: int
    direction: np.ndarray
    null: tuple[int, ...]
    to_tree: Callable[[np.ndarray], dict]


def _layout(cfg: AuditConfig, path: str, leaves: int = 1) -> _Layout:
    if path == "vmap_clip":
        # w: background (dim), canary part, null | v: canary part, null. The canary spans both
        # leaves, so a rule that clips each leaf to C on its own releases √2·C for it.
        d = cfg.dim + 4
        u = np.zeros(d)
        u[[cfg.dim, cfg.dim + 2]] = 1 / math.sqrt(2)
        w_cols = cfg.dim + 2

        def two_leaves(features: np.ndarray) -> dict:
            return {"w": features[:w_cols, None], "v": features[w_cols:, None]}

        return _Layout(
            two_leaf_linear_loss_model(cfg.dim + 2, 2),
            d,
            u,
            (cfg.dim + 1, cfg.dim + 3),
            two_leaves,
        )
    if leaves > 1:
        # leaf 0: the background columns and the canary's first part; leaf i: the canary's part
        # i; the last leaf also holds the two null columns. The canary spans every leaf, so a
        # norm that leaves a leaf out (or clips leaves one by one) releases more than C for it.
        d = cfg.dim + leaves + 2
        columns = [list(range(cfg.dim + 1))] + [[cfg.dim + i] for i in range(1, leaves)]
        columns[-1] += [d - 2, d - 1]
        u = np.zeros(d)
        u[cfg.dim : cfg.dim + leaves] = 1 / math.sqrt(leaves)
        spec = tuple(tuple(c) for c in columns)

        def split(features: np.ndarray) -> dict:
            return {f"w{i}": features[list(cols), None] for i, cols in enumerate(spec)}

        return _Layout(multi_leaf_linear_loss_model(spec), d, u, (d - 2, d - 1), split)
    d = cfg.dim + 3
    u = np.zeros(d)
    u[cfg.dim] = 1.0
    return _Layout(
        linear_loss_model(d), d, u, (cfg.dim + 1, cfg.dim + 2), lambda f: {"w": f[:, None]}
    )


def _place(key: jax.Array, positions: tuple[str, ...], n: int) -> jax.Array:
    """A canary index drawn uniformly from ``positions`` (``"random"``: a uniform interior
    index)."""
    k_which, k_index = jax.random.split(key)
    choices = jnp.stack(
        [
            (
                jnp.asarray({"first": 0, "last": n - 1}.get(p, 0), jnp.int32)
                if p != "random"
                else jax.random.randint(k_index, (), 1, max(n - 1, 2), jnp.int32)
            )
            for p in positions
        ]
    )
    return choices[jax.random.randint(k_which, (), 0, len(positions))]


def _with_canary(background: jax.Array, row: jax.Array, index: jax.Array) -> jax.Array:
    """The ``n − 1`` background rows with ``row`` inserted at ``index`` (order otherwise kept)."""
    n = background.shape[0] + 1
    slots = jnp.arange(n)
    source = jnp.clip(slots - (slots > index), 0, n - 2)
    return jnp.where(
        (slots == index).reshape((n,) + (1,) * (background.ndim - 1)), row, background[source]
    )


def _poisson_opposed_log_lr(
    a: jax.Array, s: float, q: float, others: int, weight: float
) -> jax.Array:
    """Per-step log-likelihood ratio of the normalised update ``a = s·(b − w·K) + N(0, 1)`` (the
    canary's ``b`` ~ Bern(q); ``K`` ~ Bin(others, q) opposers of weight ``w``) against the out
    world's ``−s·w·K + N(0, 1)``."""
    counts = np.arange(others + 1)
    log_pk = jnp.asarray(stats.binom.logpmf(counts, others, q))
    base = -s * weight * jnp.asarray(counts, jnp.float32)  # (K,)

    def mixture(mean):
        return jax.nn.logsumexp(log_pk + mean * a[..., None] - 0.5 * mean**2, axis=-1)

    inside = jnp.logaddexp(math.log(q) + mixture(base + s), math.log1p(-q) + mixture(base))
    return inside - mixture(base)


def _shuffle_opposed_log_lr(
    a: jax.Array, s: float, n: int, sizes: np.ndarray, weight: float
) -> jax.Array:
    """Log-likelihood ratio of one epoch's normalised updates ``a`` (k batches): every record but
    the canary (or its zero record) moves its batch's update by ``−s·w``; the canary sits in batch
    i with probability ``sizes[i]/n`` and moves it by ``+s`` instead."""
    log_p = jnp.asarray(np.log(sizes / n))
    # the batches as if without that record's slot
    shifted = a + s * weight * jnp.asarray(sizes, jnp.float32)

    def mixture(mean):
        return jax.nn.logsumexp(log_p + mean * shifted - 0.5 * mean**2, axis=-1)

    return mixture(s * (1.0 + weight)) - mixture(s * weight)


class _Setting(NamedTuple):
    """A white-box DP-GD / DP-SGD audit's setting (:func:`_setting`): the plan the user states
    and its independent :class:`Yardstick`, the background records and the canary, and the attack
    (``score``: one run's iterates ``(T, P)``, flat, to its score and null updates)."""

    sampling: str
    dp_plan: DPPlan
    ref: Yardstick
    layout: _Layout
    params0: dict
    x_bg: np.ndarray
    y_bg: np.ndarray
    canary_x: np.ndarray
    out_x: np.ndarray
    score: Callable[[jax.Array], dict[str, jax.Array]]
    final_score: Callable[[jax.Array], jax.Array]

    def data(self, index: jax.Array, inside: jax.Array) -> tuple[jax.Array, jax.Array]:
        """The run's dataset (traceable): the canary (``inside``) or the out world's record (the
        zero record; for replace-one, the canary's opposite) at ``index``."""
        row = jnp.where(inside, jnp.asarray(self.canary_x), jnp.asarray(self.out_x))
        x = _with_canary(jnp.asarray(self.x_bg), row, index)
        y = _with_canary(jnp.asarray(self.y_bg), jnp.ones((), jnp.float32), index)
        return x, y

    def host_data(self, index: int, inside: bool) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`data` on the host, as a user hands a dataset to a driver."""
        row = self.canary_x if inside else self.out_x
        x = np.insert(self.x_bg, index, row, axis=0)
        return x, np.insert(self.y_bg, index, np.float32(1.0)).astype(np.float32)

    def target(self, cfg: AuditConfig, runner: Callable, *, host: bool = False) -> AuditTarget:
        """The :class:`AuditTarget` of ``runner`` on this setting, held to its yardstick (a
        final-model runner returns scores alone: no updates, so no release count to check)."""
        sampling = self.sampling
        details = {
            "noise_multiplier": float(self.dp_plan.noise_multiplier),
            "reference_noise_multiplier": float(self.ref.noise_multiplier),
            "steps": float(self.dp_plan.steps),
            "sampling_rate": float(self.ref.sampling_rate),
            "requested_epsilon": float(cfg.epsilon),
        }
        rigorous = _GAUSSIAN_RIGOROUS if sampling == "full" else ("clopper_pearson",)
        return AuditTarget(
            runner,
            float(self.ref.epsilon),
            float(self.dp_plan.epsilon),
            details,
            rigorous=rigorous + ("tradeoff",),
            profile=self.ref.profile(),
            releases=None if cfg.threat_model == "final_model" else self.ref.steps,
            checks=self.ref.checks(self.dp_plan),
            host=host,
        )


def _run_kwargs(cfg: AuditConfig, sampling: str) -> dict[str, int]:
    if sampling == "full":
        return {"steps": cfg.steps}
    return {"epochs": cfg.epochs, "batch_size": cfg.batch_size}


def _setting(
    cfg: AuditConfig, key: jax.Array, sampling: str, layout: _Layout, dp_plan: DPPlan
) -> _Setting:
    """The white-box canary setting of the run ``cfg`` states (``dp_plan``) on ``layout``.

    The canary (gradient ``−canary_norm·C·u``, clipped to ``−C·u`` by an honest learner) sits at a
    position drawn per run from ``cfg.canary_positions``. With ``cfg.opposer`` every other record
    opposes it: gradient ``+w·C·u`` with ``w = 1/(expected batch size)``, so each batch holds about
    C of opposition and any rule that treats a batch as a whole (clipping its sum, scaling it by
    its largest norm) changes what the canary's presence releases in *every* batch it joins;
    without it they have zero gradient. Scores: the log-likelihood ratio of what the honest learner
    releases along ``u`` (at the reference noise, after undoing SGD's learning rate), and the
    updates of two columns no record touches for the noise test (:class:`NoiseTest`)."""
    from jax.flatten_util import ravel_pytree

    clip = 1.0
    plan = dp_plan.execution
    ref = yardstick(
        sampling,
        cfg.n,
        epsilon=cfg.epsilon,
        delta=cfg.delta,
        pad=plan.pad,
        neighboring_relation=cfg.neighboring_relation,
        **_run_kwargs(cfg, sampling),
    )
    params0 = layout.model.init(None)
    flat0 = ravel_pytree(params0)[0]

    def to_flat(features: np.ndarray) -> np.ndarray:
        tree = jax.tree_util.tree_map(
            lambda a: jnp.asarray(a, jnp.float32), layout.to_tree(features)
        )
        return np.asarray(ravel_pytree(tree)[0])

    u_flat = jnp.asarray(to_flat(layout.direction))
    null_flat = jnp.asarray(
        [int(np.argmax(to_flat(np.eye(layout.features)[c]))) for c in layout.null]
    )
    x_bg, _ = background(cfg, key)
    x_bg = np.concatenate(
        [x_bg[:, : cfg.dim], np.zeros((cfg.n - 1, layout.features - cfg.dim))], axis=1
    )
    y_bg = np.zeros(cfg.n - 1, np.float32)
    expected_batch = {
        "full": cfg.n - 1,
        "poisson": ref.sampling_rate * (cfg.n - 1),
        "shuffle": cfg.batch_size,
    }[sampling]
    weight = 1.0 / expected_batch if cfg.opposer else 0.0
    if cfg.opposer:  # gradient −y·x = +w·C·u (y = 1, x = −w·C·u): no norm near C, never clipped
        x_bg = np.broadcast_to(-weight * clip * layout.direction, x_bg.shape).copy()
        y_bg[:] = 1.0
    canary_x = (clip * cfg.canary_norm * layout.direction).astype(np.float32)
    # replace-one: the canary replaced by its opposite (clipped gradient +C·u against −C·u)
    out_x = -canary_x if cfg.neighboring_relation == "replace_one" else np.zeros_like(canary_x)
    s = 1.0 / ref.noise_multiplier  # the canary's clipped shift over the reference noise std
    to_a = ref.normalize_by / (cfg.learning_rate * ref.noise_multiplier * clip)
    to_null = ref.normalize_by / (cfg.learning_rate * ref.floor * clip)
    sizes = np.minimum(
        plan.batch_size, cfg.n - plan.batch_size * np.arange(-(-cfg.n // plan.batch_size))
    )

    def score(trajectory: jax.Array) -> dict[str, jax.Array]:
        updates = trajectory - jnp.concatenate([flat0[None], trajectory[:-1]])
        a = (updates @ u_flat) * to_a
        if sampling == "full":
            value = jnp.sum(a)
        else:
            if sampling == "poisson":
                log_lr = _poisson_opposed_log_lr(a, s, ref.sampling_rate, cfg.n - 1, weight)
            else:
                per_epoch = a.reshape(-1, sizes.size)
                log_lr = _shuffle_opposed_log_lr(
                    per_epoch, s, cfg.n, sizes.astype(np.float64), weight
                )
            # Two attacks: the honest sampler's likelihood ratio (most powerful against the
            # learner as claimed; it saturates per step) and the canary direction's total shift
            # (sees a canary that joins the batches together, e.g. the same batch every step).
            value = jnp.stack([jnp.sum(log_lr), jnp.sum(a)])
        return {"score": value, "null": updates[:, null_flat] * to_null}

    def final_score(params: jax.Array) -> jax.Array:
        # The last iterate's shift along u (SGD: the sum of the white-box attack's a_t). For any
        # other optimizer a score like any other: the thresholds come from the pilot runs.
        return jnp.dot(params - flat0, u_flat) * to_a

    return _Setting(
        sampling,
        dp_plan,
        ref,
        layout,
        params0,
        x_bg.astype(np.float32),
        y_bg,
        canary_x,
        out_x,
        score,
        final_score,
    )


def _flat_iterates(params: Any) -> jax.Array:
    """Iterates with a leading step axis ``(T, …)`` per leaf as ``(T, P)``, in
    ``ravel_pytree``'s order."""
    leaves = jax.tree_util.tree_leaves(params)
    return jnp.concatenate([jnp.reshape(leaf, (leaf.shape[0], -1)) for leaf in leaves], axis=1)


def _trajectory_setup(
    cfg: AuditConfig, key: jax.Array, sampling: str, path: str = "train"
) -> AuditTarget:
    """White-box DP-GD / Poisson / shuffled DP-SGD on the engine's code path ``path``
    (:data:`PATHS`), held to the independent :class:`Yardstick` of the run ``cfg`` states, in
    the setting of :func:`_setting`; every run of a chunk is one vmapped, compiled call."""
    from dpprep import sweeps
    from dpprep.algorithms import static_config, with_values

    layout = _layout(cfg, path)
    clip = 1.0
    dp_plan = DPPlan.create(
        sampling,
        cfg.n,
        l2_clip_norm=clip,
        target_epsilon=cfg.epsilon,
        delta=cfg.delta,
        **_run_kwargs(cfg, sampling),
    )
    setting = _setting(cfg, key, sampling, layout, dp_plan)
    plan, z = dp_plan.execution, dp_plan.noise_multiplier
    tc = TrainConfig(layout.model, Hyper(cfg.learning_rate), dp_plan, track_params=True)
    params0 = setting.params0
    z_run = z * cfg.noise_factor

    if path == "sweep_point":
        # One point of a vmapped sweep over the noise multiplier: point 0 has half the noise, the
        # audited point 1 the plan's (a sweep that ran every point with another's values shows).
        names = ("noise_multiplier",)
        fn = sweeps._compiled(static_config(tc), plan, names, False, False, None, False, None, True)
        base = with_values(Traced(cfg.learning_rate, None, clip), {"noise_multiplier": None})
        values = (jnp.asarray([0.5 * z_run, z_run], jnp.float32),)

        def run(x, y, run_key):
            _, metrics, _ = fn(base, params0, x, y, run_key[None], values, None, None)
            return jax.tree_util.tree_map(lambda leaf: leaf[0, 1], metrics["params"])

    else:
        train_fn = engine_fn(tc)
        hyper = Traced(cfg.learning_rate, z_run, clip)

        def run(x, y, run_key):
            return train_fn(hyper, params0, x, y, run_key)[1]["params"]

    positions = tuple(cfg.canary_positions)

    def one(run_key, inside):
        k_place, k_run = jax.random.split(run_key)
        x, y = setting.data(_place(k_place, positions, cfg.n), inside)
        return setting.score(_flat_iterates(run(x, y, k_run)))

    return setting.target(cfg, jax.jit(jax.vmap(one)))


#: The public entries a user trains through, each audited as the learner of that name
#: (:func:`_driver_setup`): :func:`~dpprep.algorithms.train` and :func:`~dpprep.algorithms.fit`
#: called once per run, :func:`~dpprep.step.dp_step` in the user's own loop over the steps (the
#: runs of a chunk vmapped), and :func:`~dpprep.sweeps.sweep_points` called once per chunk and
#: world (each run a seed of the sweep).
DRIVERS = ("train", "fit", "dp_step", "sweep_points")
#: DPSGD-F through the engine, its grid path and its public ``fit``.
DPSGDF_LEARNERS = ("dpsgdf", "dpsgdf_grid", "dpsgdf_fit")
#: The optimizers a driver audit runs after the privatizer (:attr:`AuditConfig.optimizer`).
OPTIMIZERS = ("sgd", "adam")


@functools.partial(jax.jit, static_argnums=(1, 2))
def _placements(keys: jax.Array, positions: tuple[str, ...], n: int) -> tuple[jax.Array, jax.Array]:
    def one(run_key):
        k_place, k_run = jax.random.split(run_key)
        return _place(k_place, positions, n), k_run

    return jax.vmap(one)(keys)


def _split_runs(
    keys: jax.Array, positions: tuple[str, ...], n: int
) -> tuple[np.ndarray, jax.Array]:
    """Each run's canary index and training key, as the vmapped runners draw them (compiled once
    per chunk shape, not per chunk)."""
    index, run_keys = _placements(keys, positions, n)
    return np.asarray(index), run_keys


def _driver_setup(cfg: AuditConfig, key: jax.Array, driver: str) -> AuditTarget:
    """White-box DP-SGD (or DP-GD: ``cfg.sampling``) through the public entry ``driver``
    (:data:`DRIVERS`), with the canary inserted into the data the driver is given, so every host
    check and option on the driver's way runs: ``cfg.microbatch_size``, ``cfg.steps_per_call``,
    a model of ``cfg.leaves`` parameter leaves (the canary spans all of them), stochastic with
    ``cfg.dropout`` (:func:`example_dropout`), and ``cfg.optimizer`` at ``cfg.learning_rate``.
    The attack and the yardstick are those of :func:`_setting`; under
    ``threat_model="final_model"`` the driver runs as users run it (no iterates recorded) and
    the last iterate alone is scored."""
    import optax

    from dpprep.algorithms import fit, train
    from dpprep.step import dp_step
    from dpprep.sweeps import sweep_points

    sampling = cfg.sampling
    layout = _layout(cfg, "train", leaves=cfg.leaves)
    model = layout.model if cfg.dropout == 0 else example_dropout(layout.model, cfg.dropout)
    plan_args = dict(
        l2_clip_norm=1.0,
        target_epsilon=cfg.epsilon,
        delta=cfg.delta,
        neighboring_relation=cfg.neighboring_relation,
        **_run_kwargs(cfg, sampling),
    )
    final = cfg.threat_model == "final_model"
    options: dict[str, Any] = {} if final else {"track_params": True}
    if cfg.optimizer != "sgd":
        options["optimizer"] = cfg.optimizer
    if cfg.microbatch_size is not None:
        # the GLM fast path holds no per-example gradients: microbatches need the vmap path
        options.update(microbatch_size=cfg.microbatch_size, clip_method="vmap")
    if cfg.steps_per_call is not None:
        options["steps_per_call"] = cfg.steps_per_call
    if driver == "fit":
        # fit makes the plan itself: the setting is built on the plan fit ran (its checks too)
        background_x, background_y = (
            np.zeros((cfg.n, layout.features), np.float32),
            np.zeros(cfg.n, np.float32),
        )

        def call_fit(data, run_key):
            return fit(
                model,
                model.init(None),
                data,
                run_key,
                learning_rate=cfg.learning_rate,
                sampling=sampling,
                **plan_args,
                **options,
            )

        dp_plan = call_fit((background_x, background_y), jax.random.key(0)).plan
    else:
        dp_plan = DPPlan.create(sampling, cfg.n, **plan_args)
    setting = _setting(cfg, key, sampling, layout, dp_plan)
    positions = tuple(cfg.canary_positions)
    params0 = setting.params0
    if final:
        # the last iterate, flat (a leading axis of one: _flat_iterates' layout)
        final_all = jax.jit(jax.vmap(setting.final_score))
        score_all = lambda flat: final_all(flat[:, -1])  # noqa: E731
    else:
        score_all = jax.jit(jax.vmap(setting.score))
    tc = TrainConfig(model, Hyper(cfg.learning_rate), dp_plan, **options)

    def released(params: Any, metrics: dict) -> Any:
        """What the attacker sees, with a leading step axis: every iterate, or the last."""
        if final:
            return jax.tree_util.tree_map(lambda leaf: leaf[None], params)
        return metrics["params"]

    def per_run(call: Callable[[tuple, jax.Array], Any]) -> Callable:
        def runner(keys, inside):
            index, run_keys = _split_runs(keys, positions, cfg.n)
            iterates = []
            for i in range(index.shape[0]):
                data = setting.host_data(int(index[i]), bool(inside[i]))
                iterates.append(_flat_iterates(call(data, run_keys[i])))
            return score_all(jnp.stack(iterates))

        return runner

    if driver == "train":
        runner = per_run(lambda data, k: released(*train(tc, params0, data, k)))
    elif driver == "fit":

        def fitted(data: tuple, k: jax.Array) -> Any:
            out = call_fit(data, k)
            return released(out.params, out.metrics)

        runner = per_run(fitted)
    elif driver == "dp_step":
        generic = cfg.leaves > 1 or cfg.microbatch_size is not None
        if not generic:  # a Model: the GLM fast path, or a stochastic model's keyed path
            grad_fn = dp_plan.clipped_grad(model)
        elif cfg.dropout:  # the user's loss takes the step's key (split per example)
            grad_fn = dp_plan.clipped_grad(
                lambda p, batch, k: model.per_example_loss(p, batch[0], batch[1], key=k)[0],
                microbatch_size=cfg.microbatch_size,
                prng_argnum=2,
            )
        else:
            grad_fn = dp_plan.clipped_grad(
                lambda p, batch: model.per_example_loss(p, batch[0], batch[1])[0],
                microbatch_size=cfg.microbatch_size,
            )

        user_tx = {"sgd": optax.sgd, "adam": optax.adam}[cfg.optimizer](cfg.learning_rate)

        def tx_of(run_key):
            return dp_plan.optimizer(user_tx, key=run_key)

        def step(params, opt_state, x, y, run_key):
            out = dp_step(params, opt_state, (x, y), grad_fn=grad_fn, tx=tx_of(run_key))
            return out[0], out[1]

        step_all = jax.jit(jax.vmap(step))
        data_all = jax.jit(jax.vmap(setting.data))

        def runner(keys, inside):  # the user's loop, every run of the chunk at once
            index, run_keys = _split_runs(keys, positions, cfg.n)
            x, y = data_all(jnp.asarray(index), jnp.asarray(inside))
            params = jax.tree_util.tree_map(
                lambda leaf: jnp.broadcast_to(leaf, (index.shape[0],) + leaf.shape), params0
            )
            opt_state = jax.vmap(lambda k: tx_of(k).init(params0))(run_keys)
            iterates = []
            for _ in range(dp_plan.steps):
                params, opt_state = step_all(params, opt_state, x, y, run_keys)
                iterates.append(params)
            if final:
                iterates = iterates[-1:]
            trajectory = jax.tree_util.tree_map(lambda *ps: jnp.stack(ps, axis=1), *iterates)
            return score_all(jax.vmap(_flat_iterates)(trajectory))

    else:  # sweep_points: the runs of each world are the seeds of one call, on one dataset

        def runner(keys, inside):
            index, run_keys = _split_runs(keys, positions, cfg.n)
            inside = np.asarray(inside)
            out = None
            for world in (True, False):
                rows = np.flatnonzero(inside == world)
                if rows.size == 0:
                    continue
                data = setting.host_data(int(index[rows[0]]), world)
                result = sweep_points(
                    tc,
                    params0,
                    data,
                    run_keys[rows],
                    {"learning_rate": np.asarray([cfg.learning_rate], np.float32)},
                    return_params=final,
                )
                trajectory = jax.tree_util.tree_map(
                    lambda leaf: leaf[:, 0, None] if final else leaf[:, 0],
                    result.params if final else result.metrics["params"],
                )
                scores = score_all(jax.vmap(_flat_iterates)(trajectory))
                if final:
                    scores = {"score": scores}
                if out is None:
                    out = {
                        k: np.zeros((inside.size,) + v.shape[1:], v.dtype)
                        for k, v in scores.items()
                    }
                for k, v in scores.items():
                    out[k][rows] = np.asarray(v)
            assert out is not None
            return out["score"] if final else out

    return setting.target(cfg, runner, host=True)


for _name in ("dp_gd", "dp_sgd_poisson", "dp_sgd_shuffle"):
    register(_name, _sgd_setup, threat_models=THREAT_MODELS)
for _path in PATHS[1:]:
    register(
        f"dp_sgd_poisson_{_path}",
        functools.partial(_trajectory_setup, sampling="poisson", path=_path),
        why_not={
            "final_model": (
                f"the {_path} path is audited white-box (the final model is dp_sgd_poisson's)"
            )
        },
    )
register(
    "private_selection",
    _selection_setup,
    threat_models=("final_model",),
    why_not={
        "white_box": (
            "a selection releases one candidate's final model (its iterates and the others stay"
            " hidden)"
        )
    },
)
register(
    "selection_scores",
    _selection_scores_setup,
    threat_models=("final_model",),
    why_not={"white_box": "a selection releases one candidate's score and final model"},
)
register(
    "dp_sgd_iteration",
    _iteration_setup,
    threat_models=("final_model",),
    why_not={
        "white_box": "its amplification-by-iteration guarantee hides the intermediate iterates"
    },
)
for _name, _build in (
    ("dpsgdf", _dpsgdf_setup),
    ("dpsgdf_grid", _dpsgdf_grid_setup),
    ("dpsgdf_fit", _dpsgdf_fit_setup),
    ("corrdp_sgd", _corrdp_setup),
    ("corrdp_sgd_sensitive", functools.partial(_corrdp_setup, coordinate="sensitive")),
    ("impute_dp_gd", _impute_setup),
):
    register(
        _name,
        _build,
        why_not={
            "final_model": (
                "not implemented (the white-box audit scores the released mean and every update)"
                if _name.startswith("dpsgdf")
                else "not implemented (the white-box audit is the tight one for this pair)"
            )
        },
    )

register(
    "corrdp_points",
    _corrdp_points_setup,
    threat_models=("final_model",),
    why_not={
        "white_box": "corrdp.sgd.sweep_points returns the last iterate (no iterates to score)"
    },
)

for _driver in DRIVERS:
    register(_driver, functools.partial(_driver_setup, driver=_driver), threat_models=THREAT_MODELS)

#: dpprep's own learners (:data:`REGISTRY` also holds any registered later).
LEARNERS = tuple(REGISTRY)
#: Threat models each of dpprep's own learners is audited under.
SUPPORTED: dict[str, tuple[str, ...]] = {name: REGISTRY[name].threat_models for name in LEARNERS}


# --------------------------------------------------------------------------------------------------
# What an audit costs, before it runs

#: The time :func:`audit` allows an audit by default (seconds); raise it with
#: ``audit(cfg, max_seconds=...)`` (``math.inf``: no limit).
MAX_SECONDS = 3600.0
#: Copies of the runs' float32 outputs the host holds at once: the chunks and their concatenation,
#: then the statistics' float64 temporaries (measured: the noise test peaks at 6x its input, the
#: bounds at 8.5x the scores).
_RESULT_COPIES = 10
#: Learners whose runs take ``cfg.steps`` full-batch steps; one pass over the records for
#: DP-SGD by iteration; ``⌈epochs·n/batch_size⌉`` minibatch steps for the rest of dpprep's own.
_FULL_BATCH_LEARNERS = (
    "dp_gd",
    "corrdp_sgd",
    "corrdp_sgd_sensitive",
    "corrdp_points",
    "impute_dp_gd",
    "private_selection",
    "selection_scores",
)


@dataclasses.dataclass(frozen=True)
class AuditCost:
    """An audit's cost estimated from its :class:`AuditConfig` alone (:func:`audit_cost`), before
    anything is built or compiled. A model of dpprep's own learners, coarse by design (a
    registered learner may cost less or more):

    * memory: ``data_bytes + chunk_bytes + result_bytes``, the largest arrays an audit holds. The
      background records and their copies on the host, ``24·n·f`` bytes (``f = dim + 4`` columns,
      float64 and float32 copies); one chunk's working set, ``8·c·(n·f + T·f)`` (each of the
      chunk's ``c`` runs holds its own copy of the data with its canary, and its trajectory of
      ``T`` steps, float32, twice for the step's temporaries); the runs' outputs, ``4·R·(1 + 2T)``
      (a score and two untouched coordinates per step, float32, for all ``R`` runs) times
      :data:`_RESULT_COPIES`.
    * time: ``chunks × (seconds of one compiled chunk)``, the chunk measured on the machine
      (:meth:`seconds`): :func:`audit` times its first chunk and extrapolates, so a run that would
      take hours is refused after seconds.

    Attributes:
      runs: ``R``, the trainings in all (both worlds, pilot runs included).
      chunk: ``c``, runs per compiled call; ``chunks``: the calls.
      steps: ``T``, noisy updates per run.
    """

    runs: int
    chunk: int
    chunks: int
    steps: int
    data_bytes: int
    chunk_bytes: int
    result_bytes: int

    @property
    def bytes(self) -> int:
        return self.data_bytes + self.chunk_bytes + self.result_bytes

    def seconds(self, chunk_seconds: float) -> float:
        """The audit's time if each chunk takes ``chunk_seconds`` (statistics not counted)."""
        return self.chunks * chunk_seconds

    def describe(self) -> str:
        return (
            f"{_gb(self.bytes)} (data {_gb(self.data_bytes)}, a chunk of {self.chunk} runs"
            f" {_gb(self.chunk_bytes)}, outputs of {self.runs:,} runs {_gb(self.result_bytes)})"
        )


def _gb(size: float) -> str:
    return f"{size / 1e9:.3g} GB"


def audit_cost(cfg: AuditConfig) -> AuditCost:
    """The :class:`AuditCost` of ``cfg``: memory from its sizes, chunks from its run counts."""
    if not isinstance(cfg, AuditConfig):
        raise TypeError(f"audit_cost takes an AuditConfig, got {type(cfg).__name__}")
    minibatch_steps = math.ceil(cfg.epochs * cfg.n / cfg.batch_size)
    if cfg.learner in _FULL_BATCH_LEARNERS or (cfg.learner in DRIVERS and cfg.sampling == "full"):
        steps = cfg.steps
    elif cfg.learner == "dp_sgd_iteration":
        steps = cfg.n
    elif cfg.learner in LEARNERS:
        steps = minibatch_steps
    else:  # a registered learner: the longer of the two readings of its config
        steps = max(cfg.steps, minibatch_steps)
    chunk = min(cfg.chunk, 2 * cfg.pilot_runs)
    runs = 2 * (cfg.runs + cfg.pilot_runs)
    columns = cfg.dim + 4
    return AuditCost(
        runs=runs,
        chunk=chunk,
        chunks=-(-2 * cfg.pilot_runs // chunk) - (-2 * cfg.runs // chunk),
        steps=steps,
        data_bytes=24 * cfg.n * columns,
        chunk_bytes=8 * chunk * (cfg.n * columns + steps * columns),
        result_bytes=4 * runs * (1 + 2 * steps) * _RESULT_COPIES,
    )


def available_memory() -> int | None:
    """Bytes of memory the machine has available now: Linux's ``MemAvailable`` (free memory plus
    what the page cache can give back), else the free physical pages (``os.sysconf``); None where
    neither is known."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


# --------------------------------------------------------------------------------------------------
# The audit


#: AuditConfig fields added after the digest of :func:`audit_key` was fixed: left out of it at their
#: defaults, so an audit that does not set a new option keeps its key, and its runs (every audit
#: measured before the option existed reproduces). A field added to AuditConfig goes here.
_ADDED_FIELDS = ("neighboring_relation", "optimizer", "dropout")
_DEFAULT_CONFIG_VALUES = {
    f.name: f.default for f in dataclasses.fields(AuditConfig) if f.name in _ADDED_FIELDS
}


def audit_key(cfg: AuditConfig) -> jax.Array:
    """The audit's own PRNG key: its ``seed`` folded with a digest of its whole config, so audits
    that differ in anything draw independent runs (two learners audited at seed 0 are independent
    trials, not the same noise twice) and the same config draws the same runs on every machine."""
    if not isinstance(cfg, AuditConfig):
        raise TypeError(f"audit_key takes an AuditConfig, got {type(cfg).__name__}")
    fields = dataclasses.asdict(cfg)
    for name in _ADDED_FIELDS:
        if fields[name] == _DEFAULT_CONFIG_VALUES[name]:
            del fields[name]
    fields = json.dumps(fields, sort_keys=True, default=repr)
    digest = hashlib.sha256(fields.encode()).digest()
    key = jax.random.key(0)
    for i in range(0, 16, 4):  # 4 × 31 bits of the digest (fold_in takes a 32-bit word)
        key = jax.random.fold_in(key, int.from_bytes(digest[i : i + 4], "little") & 0x7FFFFFFF)
    return key


def _fired(
    bounds: Bounds, noise: NoiseTest | None, rigorous: tuple[str, ...], theoretical: float
) -> tuple[str, ...]:
    """The statistical tests of one stage that refute the claim: the rigorous ε bounds above the
    theoretical ε, the trade-off test, and the noise test's parts."""
    values = {"gdp": bounds.epsilon_gdp, "clopper_pearson": bounds.epsilon_cp}
    out = [
        name
        for name in ("clopper_pearson", "gdp")
        if name in rigorous and values[name] > theoretical
    ]
    if "tradeoff" in rigorous and bounds.delta_excess > 0:
        out.append("tradeoff")
    if noise is not None:
        out += [f"noise:{part}" for part in noise.flagged]
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage of an audit: its evaluation runs' bounds and noise test at the stage's
    ``significance`` (family-wise over its tests), the tests that ``fired``, the bounds' point
    ``estimate`` (at :data:`ESTIMATE_SIGNIFICANCE`) and the stage's ``seconds``."""

    bounds: Bounds
    noise: NoiseTest | None
    fired: tuple[str, ...]
    significance: float
    estimate: Bounds
    seconds: float


#: The level of :attr:`AuditResult.estimate`'s bounds: about 50 % confidence (jax-privacy's
#: Clopper–Pearson bound takes significance < 0.5), a rough point estimate beside the bound.
ESTIMATE_SIGNIFICANCE = 0.4999

#: What to suspect when a test fires (:meth:`AuditResult.verdict`), by test.
SUSPECTS = {
    "clopper_pearson": (
        "what the canary's presence changes in the release: clipping (the bound, per-example"
        " norms over every parameter leaf, microbatches), the sampler (its rate, padding slots),"
        " the updates released against those charged, the neighbouring relation"
    ),
    "noise:scale": (
        "the noise's scale: the noise multiplier the run adds (a calibration, a per-coordinate"
        " noise factor, the optimizer applied before the noise)"
    ),
    "noise:steps": "the noise key: the same noise drawn at several steps",
    "noise:runs": "the noise key: the same noise drawn in several runs (a fixed seed)",
    "noise:coordinates": "the noise key: the same noise drawn on several coordinates",
    "check:calibration": "the plan's calibration against the independent yardstick",
    "check:plan_account": "the plan's account against the independent yardstick",
    "check:releases": "the number of noisy updates a run releases against the steps charged",
}
SUSPECTS["gdp"] = SUSPECTS["tradeoff"] = SUSPECTS["clopper_pearson"]


@dataclasses.dataclass(frozen=True)
class AuditResult:
    """``theoretical``: the ε the audit holds the learner to (for DP-GD and DP-SGD the independent
    :class:`Yardstick`'s, i.e. the requested ε up to its tolerance; else the learner's guarantee for
    this canary pair); ``claimed``: what a user would be told (differs for shuffled DP-SGD — the
    as-if-Poisson number —, CorrDP — the nominal ε — and the pipeline — DP-GD's ε ignoring
    pre-processing); ``bounds``: the lower bounds of the first stage's runs; ``runs_per_second``:
    every run (both worlds, pilot and confirmation runs included) over the wall time of the
    compiled calls (compilation excluded); ``rigorous``: which bounds are valid for this learner
    whatever its implementation does (:attr:`AuditTarget.rigorous`) — the others hold only under
    the assumption that its trade-off curve is Gaussian-shaped; ``noise``: the noise test (None
    where the target has no untouched coordinates); ``checks``: the deterministic checks
    (:attr:`AuditTarget.checks`, and ``releases``: the run released as many updates as its
    account charges); ``estimate``: the first stage's bounds at about 50 % confidence
    (:data:`ESTIMATE_SIGNIFICANCE`: rough point estimates); ``confirmation``: the second stage,
    run on fresh, independent runs when the first one suspected a violation
    (:attr:`AuditConfig.significance`)."""

    config: AuditConfig
    theoretical: float
    claimed: float
    bounds: Bounds
    runs_per_second: float
    seconds: float
    details: dict[str, float]
    rigorous: tuple[str, ...] = ("clopper_pearson",)
    noise: NoiseTest | None = None
    checks: dict[str, bool] = dataclasses.field(default_factory=dict)
    estimate: Bounds | None = None
    confirmation: Stage | None = None

    @property
    def ratio(self) -> float:
        """GDP lower bound over the theoretical ε (rigorous only where ``"gdp"`` is in
        ``rigorous``)."""
        return self.bounds.epsilon_gdp / self.theoretical

    def _rigorous_of(self, bounds: Bounds) -> float:
        values = {"gdp": bounds.epsilon_gdp, "clopper_pearson": bounds.epsilon_cp}
        return max(values[name] for name in self.rigorous if name in values)

    @property
    def rigorous_epsilon(self) -> float:
        """The largest of the bounds that are rigorous for this learner (``rigorous``)."""
        return self._rigorous_of(self.bounds)

    @property
    def suspected_by(self) -> tuple[str, ...]:
        """The statistical tests that fired on the first stage's runs (each at
        ``config.screen / k``): an honest learner is suspected with probability at most
        ``config.screen``."""
        return _fired(self.bounds, self.noise, self.rigorous, self.theoretical)

    @property
    def suspected(self) -> bool:
        return bool(self.suspected_by)

    @property
    def confirmed_by(self) -> tuple[str, ...]:
        """The statistical tests that fired on the confirmation's fresh runs (a one-stage audit:
        the first stage's)."""
        if not self.config.confirms:
            return self.suspected_by
        return () if self.confirmation is None else self.confirmation.fired

    @property
    def caught_by(self) -> tuple[str, ...]:
        """Every test that refutes the learner's claim: the confirmed statistical tests
        (:attr:`confirmed_by`: rigorous ε bounds above the theoretical ε — ``"clopper_pearson"``,
        ``"gdp"`` —, the trade-off test ``"tradeoff"``, the noise test's parts ``"noise:<part>"``)
        and the failed deterministic checks (``"check:<name>"``)."""
        return self.confirmed_by + tuple(
            f"check:{name}" for name, ok in self.checks.items() if not ok
        )

    @property
    def violation(self) -> bool:
        """True when any test refutes the claim (:attr:`caught_by`): a confirmed statistical test
        or a failed deterministic check. An honest learner is reported so with probability at most
        ``config.significance`` (the family-wise error rate: :attr:`AuditConfig.significance`)."""
        return bool(self.caught_by)

    def verdict(self) -> str:
        """What the audit found and what to do next, in a few lines a researcher can act on: the
        tests that fired, the ε lower bound with its point estimate, the chance an honest learner
        is flagged at this level, and what to suspect or try."""
        c = self.config
        bound, estimate = (
            self.rigorous_epsilon,
            (self._rigorous_of(self.estimate) if self.estimate is not None else math.nan),
        )
        first = (
            f"rigorous ε lower bound {bound:.3g} ({100 * (1 - c.stage_levels[0]):.3g} % confidence"
            f" for the verdict's tests together; point estimate {estimate:.3g}), against the ε of"
            f" {self.theoretical:.4g} the learner is held to"
        )
        failed = [f"check:{name}" for name, ok in self.checks.items() if not ok]
        lines = []
        if self.violation:
            lines.append(f"VIOLATION of {c.learner} ({c.threat_model}, ε {c.epsilon:g}):")
            if self.confirmed_by:
                confirmation = self.confirmation
                again = (
                    f"; on {2 * (c.runs + c.pilot_runs):,} fresh runs: rigorous ε lower bound"
                    f" {self._rigorous_of(confirmation.bounds):.3g}"
                    if confirmation is not None
                    else ""
                )
                lines.append(
                    f"- {', '.join(self.suspected_by)} fired, then {', '.join(self.confirmed_by)}"
                    f" again on independent runs{again}; an honest learner is reported so with"
                    f" probability at most {c.significance:g}"
                )
            if failed:
                lines.append(f"- deterministic checks failed: {', '.join(failed)} (no chance)")
            lines.append(f"- {first}")
            lines.append("- suspect: " + "; ".join(_suspects(self.caught_by)))
            lines.append("- next: " + "; ".join(_next_steps(self.caught_by)))
        elif self.suspected:
            lines.append(
                f"SUSPECTED, not confirmed: {c.learner} ({c.threat_model}, ε {c.epsilon:g}):"
            )
            lines.append(
                f"- {', '.join(self.suspected_by)} fired on the first runs: an honest learner does"
                f" so with probability at most {c.screen:g}"
            )
            if self.confirmation is not None:
                lines.append(
                    f"- none fired again on {2 * (c.runs + c.pilot_runs):,} fresh, independent runs"
                    f" (at {c.stage_levels[1]:.3g}): most likely a false alarm"
                )
            lines.append(f"- {first}")
            lines.append(
                f"- next: rerun with another seed (seed={c.seed + 1}) and twice the runs"
                f" (runs={2 * c.runs}); if it fires again, suspect "
                + "; ".join(_suspects(self.suspected_by))
            )
        else:
            lines.append(f"no violation found: {c.learner} ({c.threat_model}, ε {c.epsilon:g}):")
            lines.append(f"- {first}")
            lines.append(
                "- a lower bound is evidence, not a certificate: a stronger attack, canary or"
                " dataset may reach higher"
            )
        # lines of a terminal's (and a docs page's) width, each item's continuation indented
        return "\n".join(textwrap.fill(line, width=88, subsequent_indent="  ") for line in lines)

    def row(self) -> dict[str, Any]:
        c = self.config
        tests = self.rigorous + (("noise",) if self.noise is not None else ())
        return {
            "learner": c.learner,
            "threat_model": c.threat_model,
            "epsilon_target": c.epsilon,
            "delta": c.delta,
            "runs_per_world": c.runs,
            "theoretical_epsilon": self.theoretical,
            "claimed_epsilon": self.claimed,
            "epsilon_lb_gdp": self.bounds.epsilon_gdp,
            "mu_lb_gdp": self.bounds.mu_gdp,
            "epsilon_lb_cp": self.bounds.epsilon_cp,
            "tradeoff_delta_excess": self.bounds.delta_excess,
            "tradeoff_epsilon": self.bounds.epsilon_at_excess,
            "auroc": self.bounds.auroc,
            "ratio_gdp": self.ratio,
            "rigorous_bounds": "+".join(self.rigorous),
            "epsilon_lb_rigorous": self.rigorous_epsilon,
            "noise_p_min": (
                min(self.noise.p_values.values()) if self.noise is not None else math.nan
            ),
            "caught_by": "+".join(self.caught_by),
            "suspected_by": "+".join(self.suspected_by),
            "confirmed_by": "+".join(self.confirmed_by),
            "suspected": self.suspected,
            "violation": self.violation,
            "epsilon_estimate_rigorous": (
                self._rigorous_of(self.estimate) if self.estimate is not None else math.nan
            ),
            "confirmation_epsilon_lb_rigorous": (
                self._rigorous_of(self.confirmation.bounds)
                if self.confirmation is not None
                else math.nan
            ),
            "significance": c.significance,
            "screen": c.screen,
            "significance_per_test": test_significance(c.stage_levels[0], tests),
            "canary_norm": c.canary_norm,
            "runs_per_second": self.runs_per_second,
            "seconds": self.seconds,
            "noise_factor": c.noise_factor,
            "seed": c.seed,
            **{f"detail_{k}": v for k, v in self.details.items()},
        }


def _attack_bounds(
    pilot: tuple[np.ndarray, np.ndarray],
    eval_in: np.ndarray,
    eval_out: np.ndarray,
    cfg: AuditConfig,
    profile: Callable[[np.ndarray], np.ndarray] | None,
    *,
    significance: float,
) -> Bounds:
    """The bounds of one stage's runs. Scores ``(runs,)`` are one attack; ``(runs, a)`` are ``a``
    attacks, each with its own thresholds (quantiles of its pilot scores) and bounds at
    ``significance / a``, and each bound is the largest of the attacks': each is valid with
    probability ``1 − significance / a``, so their maximum is valid with ``1 − significance``
    (a union bound)."""
    columns = eval_in.reshape(eval_in.shape[0], -1).shape[1]
    level = significance / columns
    best: Bounds | None = None
    for j in range(columns):
        column = [np.reshape(a, (a.shape[0], -1))[:, j] for a in (*pilot, eval_in, eval_out)]
        thresholds = np.unique(
            np.quantile(np.concatenate(column[:2]), np.linspace(0, 1, cfg.levels + 2)[1:-1])
        )
        d_in, d_out = discretise(column[2], thresholds), discretise(column[3], thresholds)
        bounds = lower_bounds(d_in, d_out, delta=cfg.delta, significance=level)
        if profile is not None:
            excess, at = tradeoff_excess(d_in, d_out, profile, significance=level)
            bounds = dataclasses.replace(bounds, delta_excess=excess, epsilon_at_excess=at)
        if best is None:
            best = bounds
            continue
        larger_excess = not bounds.delta_excess <= best.delta_excess  # NaN: no curve
        best = Bounds(
            max(best.epsilon_gdp, bounds.epsilon_gdp),
            max(best.mu_gdp, bounds.mu_gdp),
            max(best.epsilon_cp, bounds.epsilon_cp),
            max(best.auroc, bounds.auroc),
            bounds.delta_excess if larger_excess else best.delta_excess,
            bounds.epsilon_at_excess if larger_excess else best.epsilon_at_excess,
        )
    assert best is not None
    return best


def _next_steps(tests: tuple[str, ...]) -> list[str]:
    """What to try once a violation is confirmed, for the tests that fired."""
    steps = []
    if any(t.startswith("check:") for t in tests):
        steps.append(
            "compare the plan's noise and account (details) with the yardstick's: the checks"
            " need no runs"
        )
    if any(t.startswith("noise:") for t in tests):
        steps.append(
            "read the noise test's p-values (result.noise) for the part that failed: scale is"
            " the noise's size, steps/runs/coordinates its key"
        )
    if any(t in ("clopper_pearson", "gdp", "tradeoff") for t in tests):
        steps.append(
            "rerun with canary_positions=('first',), ('last',) or opposer=False to see which"
            " canary the bug needs, and through dp_step with the same options to tell the"
            " driver's host code from the step"
        )
    return steps + ["write the suspected rule down as a one-step unit test that fails"]


def _suspects(tests: tuple[str, ...]) -> list[str]:
    """The components to suspect for the tests that fired (:data:`SUSPECTS`), each once."""
    out: list[str] = []
    for test in tests:
        hint = SUSPECTS.get(test, f"what {test} measures")
        if hint not in out:
            out.append(hint)
    return out


def _dtype(value: Any) -> np.dtype:
    dtype = getattr(value, "dtype", None)
    return np.asarray(value).dtype if dtype is None else np.dtype(dtype)


def _check_outputs(learner: str, out: Any, runs: int) -> None:
    """ValueError unless a runner's output over ``runs`` runs is ``(runs,)`` scores or the dict
    ``{"score": (runs,), "null": (runs, T, m)}`` (:class:`AuditTarget`); TypeError unless the
    scores are real numbers (float or integer: a boolean guess has no threshold to vary) and the
    ``null`` updates floats."""
    scores = out.get("score") if isinstance(out, dict) else out
    if scores is not None and _dtype(scores).kind not in "fiu":
        raise TypeError(
            f"learner {learner!r}: the runner's scores must be real numbers, oriented so that"
            f" in-canary runs score high (e.g. float32 log-likelihood ratios), got dtype"
            f" {_dtype(scores)}"
            + (
                "; a boolean guess is a score of 0 or 1: return it as float"
                if _dtype(scores).kind == "b"
                else ""
            )
        )
    if isinstance(out, dict) and "null" in out and _dtype(out["null"]).kind != "f":
        raise TypeError(
            f"learner {learner!r}: the runner's 'null' output must be floats (the normalised"
            f" updates of untouched coordinates), got dtype {_dtype(out['null'])}"
        )
    if isinstance(out, dict):
        shape = {k: tuple(np.shape(v)) for k, v in out.items()}
        if (
            set(shape) != {"score", "null"}
            or not _score_shape(shape["score"], runs)
            or len(shape["null"]) != 3
            or shape["null"][0] != runs
            or min(shape["null"][1:]) < 2
        ):
            raise ValueError(
                f"learner {learner!r}: a runner returning a dict returns {{'score': ({runs},) or"
                f" ({runs}, a), 'null': ({runs}, T, m)}} with T, m >= 2 and a <= {MAX_ATTACKS},"
                f" got {shape}"
            )
    elif not _score_shape(tuple(np.shape(out)), runs):
        raise ValueError(
            f"learner {learner!r}: the runner must return ({runs},) scores (or ({runs}, a) for a"
            f" <= {MAX_ATTACKS} attacks), got shape {np.shape(out)}"
        )


#: The most attacks (score columns) a runner may return: each costs the attacks' bounds a share
#: of the significance (:func:`_attack_bounds`).
MAX_ATTACKS = 4


def _score_shape(shape: tuple[int, ...], runs: int) -> bool:
    return shape == (runs,) or (
        len(shape) == 2 and shape[0] == runs and 1 <= shape[1] <= MAX_ATTACKS
    )


def audit(
    cfg: AuditConfig,
    *,
    progress: Callable[[str], None] | None = None,
    max_seconds: float = MAX_SECONDS,
    max_bytes: int | None = None,
) -> AuditResult:
    """Runs ``pilot_runs`` + ``runs`` trainings per world as vmapped chunks of one compiled
    function, fixes ``levels`` thresholds on the pilot scores and returns the lower bounds of the
    evaluation scores.

    An audit beyond the machine is refused with its estimate (:class:`AuditCost`): before anything
    is built, when its memory estimate is above ``max_bytes`` (default: the memory available now,
    :func:`available_memory`); after its first compiled chunk, when that chunk's time times the
    chunks is above ``max_seconds`` (default :data:`MAX_SECONDS`; ``math.inf``: no limit)."""
    if not isinstance(cfg, AuditConfig):
        raise TypeError(
            f"audit takes an AuditConfig, got {type(cfg).__name__} (e.g. AuditConfig('dp_gd'))"
        )
    if not (isinstance(max_seconds, (int, float)) and max_seconds > 0):  # NaN fails too
        raise ValueError(
            f"max_seconds must be a number > 0 (math.inf: no limit), got {max_seconds!r}"
        )
    if max_bytes is not None:
        max_bytes = check_positive_int(max_bytes, "max_bytes")
    cost = audit_cost(cfg)
    limit = available_memory() if max_bytes is None else max_bytes
    if limit is not None and cost.bytes > limit:
        source = "max_bytes" if max_bytes is not None else "the memory available now"
        raise ValueError(
            f"audit of {cfg.learner!r} would need about {cost.describe()}, above {source}"
            f" ({_gb(limit)}): lower n or dim (every run of a chunk holds its own copy of the"
            " data), chunk, or runs; or pass audit(..., max_bytes=...) if your learner needs"
            " less than this estimate"
        )
    k_data, k_pilot, k_eval, k_confirm = jax.random.split(audit_key(cfg), 4)
    setup = REGISTRY[cfg.learner].build(cfg, k_data)
    if not isinstance(setup, AuditTarget):
        raise TypeError(
            f"learner {cfg.learner!r}: build must return an AuditTarget, got {type(setup).__name__}"
        )
    unknown = sorted(set(setup.rigorous) - set(BOUND_NAMES))
    if unknown or not set(setup.rigorous) & {"gdp", "clopper_pearson"}:
        raise ValueError(
            f"learner {cfg.learner!r}: AuditTarget.rigorous must be a subset of {BOUND_NAMES} with "
            f"'gdp' or 'clopper_pearson' in it, got {setup.rigorous!r}"
        )
    if "tradeoff" in setup.rigorous and setup.profile is None:
        raise ValueError(
            f"learner {cfg.learner!r}: a trade-off test needs AuditTarget.profile (the claimed"
            " privacy profile ε ↦ δ(ε)); dpprep's learners with one: dp_gd, dp_sgd_poisson,"
            " dp_sgd_shuffle, dpsgdf"
        )

    def scores(run_key, runs):
        keys = jax.random.split(run_key, 2 * runs)
        inside = jnp.concatenate([jnp.ones(runs, bool), jnp.zeros(runs, bool)])
        out = _chunked(compiled, keys, inside, chunk, after=within_time)
        values, null = (out["score"], out["null"]) if isinstance(out, dict) else (out, None)
        values = np.asarray(values)
        if not np.all(np.isfinite(values)) or (null is not None and np.any(np.isinf(null))):
            raise FloatingPointError(
                f"{cfg.learner}: non-finite attack scores (an overflowing run?)"
            )
        return out, values[:runs], values[runs:], null

    chunk = cost.chunk
    # The chunk timed: the first (compiled ahead), or a host runner's second (its first compiles).
    timed = 1 if setup.host and cost.chunks > 1 else 0
    done = [0]

    def within_time(seconds: float) -> None:
        if done[0] == timed and cost.seconds(seconds) > max_seconds:
            raise ValueError(
                f"audit of {cfg.learner!r} would take about {cost.seconds(seconds):.3g} s"
                f" ({cost.chunks:,} chunks of {chunk} runs; one took {seconds:.3g} s here; twice"
                f" that if a suspicion is confirmed on fresh runs), above"
                f" max_seconds={max_seconds:g}: lower runs or pilot_runs, or raise the limit with"
                " audit(..., max_seconds=...) (math.inf: none)"
            )
        done[0] += 1

    shapes: Any = None
    if setup.host:  # the runner calls compiled code itself (e.g. a public driver per chunk of runs)
        compiled = setup.runner
    else:
        # Compiled ahead of the timed runs (without running a chunk twice); every chunk has this
        # shape.
        runner = setup.runner if hasattr(setup.runner, "lower") else jax.jit(setup.runner)
        try:
            lowered = runner.lower(jax.random.split(k_pilot, chunk), jnp.ones(chunk, bool))
            compiled = lowered.compile()
        except Exception as err:  # a user's runner: say what the protocol needs
            raise ValueError(
                f"learner {cfg.learner!r}: AuditTarget.runner(keys, inside) must be jittable and"
                f" vmapped over runs (keys: ({chunk},) PRNG keys, inside: ({chunk},) bool)"
                f" returning ({chunk},) scores (or give AuditTarget(host=True)); tracing it failed:"
                f" {type(err).__name__}: {err}"
            ) from err
        shapes = lowered.out_info
        _check_outputs(cfg.learner, shapes, chunk)
    start = time.perf_counter()
    pilot_tree, pilot_in, pilot_out, _ = scores(k_pilot, cfg.pilot_runs)
    if shapes is None:
        shapes = pilot_tree
        _check_outputs(cfg.learner, shapes, 2 * cfg.pilot_runs)
    with_null = isinstance(shapes, dict)
    checks = dict(setup.checks)
    if setup.releases is not None:
        if not with_null:
            raise ValueError(
                f"learner {cfg.learner!r}: AuditTarget.releases is checked against the runner's"
                " 'null' output, which it does not return"
            )
        checks["releases"] = bool(np.shape(shapes["null"])[1] == setup.releases)
    # The verdict is the union of the statistical tests: each runs at level / k (Bonferroni).
    tests = tuple(setup.rigorous) + (("noise",) if with_null else ())

    def measure(pilot: tuple[np.ndarray, np.ndarray], k_runs: jax.Array, level: float) -> Stage:
        t0 = time.perf_counter()
        _, eval_in, eval_out, null = scores(k_runs, cfg.runs)
        per_test = test_significance(level, tests)
        bounds = _attack_bounds(pilot, eval_in, eval_out, cfg, setup.profile, significance=per_test)
        noise = noise_test(null, significance=per_test) if with_null else None
        # the same bounds at (almost) 50 % confidence: a rough point estimate beside the bound
        estimate = _attack_bounds(
            pilot, eval_in, eval_out, cfg, None, significance=ESTIMATE_SIGNIFICANCE
        )
        fired = _fired(bounds, noise, tuple(setup.rigorous), setup.theoretical)
        return Stage(bounds, noise, fired, level, estimate, time.perf_counter() - t0)

    if progress:
        progress(
            f"{cfg.learner}/{cfg.threat_model} eps={cfg.epsilon}: pilot done, {2 * cfg.runs} runs"
            " to go"
        )
    first = measure((pilot_in, pilot_out), k_eval, cfg.stage_levels[0])
    confirmation = None
    if first.fired and cfg.confirms:
        if progress:
            progress(
                f"{cfg.learner}/{cfg.threat_model} eps={cfg.epsilon}: suspected"
                f" ({', '.join(first.fired)}); confirming on"
                f" {2 * (cfg.runs + cfg.pilot_runs)} fresh runs"
            )
        k_confirm_pilot, k_confirm_eval = jax.random.split(k_confirm)
        _, again_in, again_out, _ = scores(k_confirm_pilot, cfg.pilot_runs)
        confirmation = measure((again_in, again_out), k_confirm_eval, cfg.stage_levels[1])
    seconds = time.perf_counter() - start
    total = 2 * (cfg.runs + cfg.pilot_runs) * (1 if confirmation is None else 2)
    return AuditResult(
        cfg,
        setup.theoretical,
        setup.claimed,
        first.bounds,
        total / seconds,
        seconds,
        setup.details,
        tuple(setup.rigorous),
        first.noise,
        checks,
        estimate=first.estimate,
        confirmation=confirmation,
    )


__all__ = [
    "AuditConfig",
    "AuditCost",
    "AuditResult",
    "AuditTarget",
    "BOUND_NAMES",
    "ESTIMATE_SIGNIFICANCE",
    "SUSPECTS",
    "Stage",
    "audit_key",
    "Bounds",
    "CANARY_POSITIONS",
    "DRIVERS",
    "LEARNERS",
    "Learner",
    "NOISE_PARTS",
    "NoiseTest",
    "PATHS",
    "YARDSTICK_TOLERANCE",
    "Yardstick",
    "noise_test",
    "two_leaf_linear_loss_model",
    "yardstick",
    "REGISTRY",
    "SUPPORTED",
    "THREAT_MODELS",
    "MAX_SECONDS",
    "audit",
    "audit_cost",
    "available_memory",
    "check_learner",
    "discretise",
    "gdp_epsilon",
    "gdp_lower_bound",
    "impute_canary_datasets",
    "example_dropout",
    "selection_reference_multiplier",
    "selection_scores_epsilon",
    "linear_loss_model",
    "multi_leaf_linear_loss_model",
    "lower_bounds",
    "privacy_profile",
    "register",
    "required_runs",
    "tradeoff_excess",
]
