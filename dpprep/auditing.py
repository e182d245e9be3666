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
  score is the final model's margin ``⟨θ_T, x_c⟩``. DP-SGD by iteration is audited only here: its amplification-by-iteration
  guarantee hides the intermediate iterates (white-box is outside its threat model and refused).

Learners (:data:`LEARNERS`) and the ε each audit is held against (``AuditResult.theoretical``):
DP-GD, Poisson DP-SGD (plan accounting, overflow slack included), shuffled DP-SGD (the rigorous
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
It is the union of k ≤ 3 tests, so each bound is computed at ``significance / k`` (Bonferroni,
:func:`test_significance`): an honest learner is flagged with probability at most
``significance`` (5 % by default), not k times it.

**Bug catalogue.** The catalogue of planted privacy bugs the audit is tested against lives outside
the library (``experiments.bug_catalogue``), so nothing in dpprep can switch a bug on. The audit's
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
import math
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from dp_accounting import dp_event as dp_event_lib
from jax_privacy import auditing as jp_auditing
from scipy import stats

from dpprep import models
from dpprep.accounting import dp
from dpprep.algorithms import Hyper, Traced, TrainConfig, engine_fn
from dpprep.plan import DPPlan
from dpprep.validation import check_delta, check_epsilon, check_positive, check_positive_int, check_probability

THREAT_MODELS = ("white_box", "final_model")
#: The lower bounds an audit reports (:class:`Bounds`): ``"gdp"`` (``epsilon_gdp``),
#: ``"clopper_pearson"`` (``epsilon_cp``) and ``"tradeoff"`` (``delta_excess``: the claimed
#: privacy profile tested point by point, :func:`tradeoff_excess`).
BOUND_NAMES = ("gdp", "clopper_pearson", "tradeoff")
#: Rigorous bounds of a full-batch Gaussian learner (see :attr:`AuditTarget.rigorous`).
_GAUSSIAN_RIGOROUS = ("clopper_pearson", "gdp")


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
    """

    runner: Callable[[jax.Array, jax.Array], jax.Array]
    theoretical: float
    claimed: float
    details: dict[str, float] = dataclasses.field(default_factory=dict)
    rigorous: tuple[str, ...] = ("clopper_pearson",)
    profile: Callable[[np.ndarray], np.ndarray] | None = None

    def __post_init__(self) -> None:
        if not callable(self.runner):
            raise TypeError(f"runner must be a callable runner(keys, inside) -> scores, got {type(self.runner).__name__}")
        for name in ("theoretical", "claimed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                raise TypeError(f"{name} must be a number (an epsilon), got {type(value).__name__}")
            if math.isnan(value) or value <= 0:
                raise ValueError(f"{name} must be an epsilon > 0 (inf allowed: no guarantee), got {value!r}: a NaN "
                                 "yardstick would make every bound compare False and every audit pass")


@dataclasses.dataclass(frozen=True)
class Learner:
    """A registered learner: ``build(cfg, key) -> AuditTarget`` for an :class:`AuditConfig`, the
    threat models it is audited under, and why it is not audited under the others."""

    build: Callable[[Any, jax.Array], AuditTarget]
    threat_models: tuple[str, ...]
    why_not: dict[str, str] = dataclasses.field(default_factory=dict)


#: Every auditable learner by name (dpprep's own, below, and any :func:`register`\ ed one).
REGISTRY: dict[str, Learner] = {}


def register(name: str, build: Callable[[Any, jax.Array], AuditTarget], *,
             threat_models: tuple[str, ...] = ("white_box",), why_not: dict[str, str] | None = None) -> None:
    """Makes ``AuditConfig(name, …)`` audit a learner of your own: ``build(cfg, key)`` returns its
    :class:`AuditTarget` (a runner of in/out trainings and the ε it claims) for the config's ε, δ,
    sizes and ``noise_factor``; :func:`audit` then runs pilot and evaluation runs and bounds ε."""
    if not isinstance(name, str) or not name:
        raise ValueError("name must be a non-empty string")
    if not callable(build):
        raise ValueError("build must be callable: build(cfg, key) -> AuditTarget")
    unknown = sorted(set(threat_models) - set(THREAT_MODELS))
    if unknown or not threat_models:
        raise ValueError(f"threat_models must be a non-empty subset of {THREAT_MODELS}, got {threat_models!r}")
    REGISTRY[name] = Learner(build, tuple(threat_models), dict(why_not or {}))


@dataclasses.dataclass(frozen=True)
class AuditConfig:
    """One audit: a learner calibrated to ``epsilon`` at ``delta``, attacked ``runs`` times per world.

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
      significance: probability that the audit's verdict (:attr:`AuditResult.violation`) flags an
        honest learner: each of its k rigorous bounds is computed at ``significance / k``.
      noise_factor: the learner's real noise over what its accountant assumes (1: honest; < 1: a
        deliberately broken learner, for tests that the audit catches it).
      tv: CorrDP's correlation weight of the audited insensitive feature.
      eps_f: DPSGD-F's share of ε for the private mean.
      missing_fraction: the share of rows whose imputed feature is missing (``impute_dp_gd``).
      canary_norm: the canary's gradient (white-box) or feature (final-model) norm in units of
        the clip bound, >= 1. Above 1 clipping binds on the canary, so a learner that clips too
        little (to 2C, or not at all) releases a larger shift than an honest one and is caught;
        at 1 such bugs leave the outputs unchanged. The attack scores what the *honest* learner
        releases for it (``C`` times its direction), so the bound stays valid at any value.
      chunk: runs per compiled chunk (memory); ``seed``: the audit's randomness.
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
    significance: float = 0.05
    noise_factor: float = 1.0
    learning_rate: float = 1.0
    tv: float = 0.25
    eps_f: float = 0.2
    missing_fraction: float = 0.5
    canary_norm: float = 4.0
    chunk: int = 4096
    seed: int = 0

    def __post_init__(self) -> None:
        check_learner(self.learner, self.threat_model)
        check_epsilon(self.epsilon)
        check_delta(self.delta)
        # Whole numbers, stored as ints (a float like 100.0 is normalised, 2000.5 refused).
        minimums = {"n": 4, "dim": 1, "steps": 1, "epochs": 1, "batch_size": 1, "levels": 2, "chunk": 1, "runs": 1}
        for name, minimum in minimums.items():
            object.__setattr__(self, name, check_positive_int(getattr(self, name), name, minimum=minimum))
        object.__setattr__(self, "pilot_runs", check_positive_int(self.pilot_runs, "pilot_runs", minimum=self.levels))
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or not 0 <= self.seed < 2**63:
            raise ValueError(f"seed must be an integer in [0, 2**63), got {self.seed!r}")
        check_positive(self.noise_factor, "noise_factor")
        check_positive(self.learning_rate, "learning_rate")
        if not (isinstance(self.canary_norm, (int, float, np.floating)) and math.isfinite(self.canary_norm)
                and self.canary_norm >= 1.0):
            raise ValueError(f"canary_norm must be a finite number >= 1 (units of the clip bound), got {self.canary_norm!r}")
        check_probability(self.tv, "tv")
        if not 0 < self.significance < 0.5:
            raise ValueError(f"significance must be in (0, 0.5), got {self.significance!r}")
        if not 0 < self.missing_fraction < 1:
            raise ValueError(f"missing_fraction must be in (0, 1), got {self.missing_fraction!r}")
        if self.learner == "dpsgdf" and not 0 < self.eps_f < self.epsilon:
            raise ValueError(f"eps_f must be in (0, epsilon={self.epsilon}), got {self.eps_f!r}")
        if self.learner in ("dp_sgd_poisson", "dp_sgd_shuffle", "dpsgdf") and self.batch_size >= self.n:
            raise ValueError(f"batch_size must be < n = {self.n} for a minibatch learner, got {self.batch_size}")
        # Each bound runs at significance / k for the k rigorous tests of the verdict (at most
        # len(BOUND_NAMES); the learner, hence k, is known only when it is built): the worst case.
        needed = required_runs(self.epsilon_to_certify, self.delta, significance=self.significance / len(BOUND_NAMES),
                               levels=self.levels)
        if self.runs < needed:
            raise ValueError(
                f"runs={self.runs} per world is too few: even a perfect attack's Clopper-Pearson bound "
                f"cannot reach epsilon={self.epsilon_to_certify:.3g} at delta={self.delta} with fewer than "
                f"{needed} runs per world (significance {self.significance} split over up to "
                f"{len(BOUND_NAMES)} rigorous tests, {self.levels} thresholds)")

    @property
    def epsilon_to_certify(self) -> float:
        """The ε a perfect attack must be able to reach with ``runs``: the calibration target,
        capped at 8 (a large-ε audit is still worth running for its lower bound)."""
        return min(self.epsilon, 8.0)


def check_learner(learner: str, threat_model: str) -> None:
    """ValueError naming what is known, for an unknown learner or a threat model it is not audited
    under."""
    if learner not in REGISTRY:
        raise ValueError(f"unknown learner {learner!r}; known: {', '.join(REGISTRY)} (or auditing.register your own)")
    if threat_model not in THREAT_MODELS:
        raise ValueError(f"unknown threat_model {threat_model!r}; known: {', '.join(THREAT_MODELS)}")
    entry = REGISTRY[learner]
    if threat_model not in entry.threat_models:
        why = entry.why_not.get(threat_model, "")
        raise ValueError(f"learner {learner!r} is audited under {', '.join(entry.threat_models)} only, not "
                         f"{threat_model!r}" + (f": {why}" if why else ""))


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


def gdp_lower_bound(in_scores: Any, out_scores: Any, *, significance: float, delta: float) -> tuple[float, float]:
    """``(μ_lb, ε_lb)``: the Gaussian-DP lower bound of Nasr et al. (2023) for scores oriented so
    that in-canary runs score high: at every threshold ``t`` of the test "in iff score ≥ t",
    Clopper–Pearson upper bounds ``FPR⁺``, ``FNR⁺`` (Bonferroni over all ``2·#thresholds``) give
    ``μ_t = Φ⁻¹(1 − FPR⁺) − Φ⁻¹(FNR⁺)``; ``μ_lb = max(0, max_t μ_t)`` and ε is its GDP conversion.
    jax-privacy's ``epsilon_from_gdp`` is the same estimator with ``|μ_t|`` (module docstring)."""
    inside, outside = np.sort(np.asarray(in_scores, np.float64)), np.sort(np.asarray(out_scores, np.float64))
    thresholds = np.unique(np.concatenate([inside, outside]))
    fn = np.searchsorted(inside, thresholds, side="left")            # in-runs below t
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


def required_runs(epsilon: float, delta: float, *, significance: float = 0.05, levels: int = 32) -> int:
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


def lower_bounds(in_scores: Any, out_scores: Any, *, delta: float, significance: float) -> Bounds:
    """Gaussian-DP (:func:`gdp_lower_bound`) and Clopper–Pearson (jax-privacy) lower bounds."""
    auditor = jp_auditing.CanaryScoreAuditor(np.asarray(in_scores), np.asarray(out_scores))
    mu, eps_gdp = gdp_lower_bound(in_scores, out_scores, significance=significance, delta=delta)
    eps_cp = float(auditor.epsilon_clopper_pearson(significance, delta))
    return Bounds(float(eps_gdp), float(mu), eps_cp, float(auditor.attack_auroc()))


#: ε grid of the trade-off test (the claimed δ(ε) is compared with the empirical one at each).
TRADEOFF_EPSILONS = np.linspace(0.02, 10.0, 500)


def tradeoff_excess(in_scores: Any, out_scores: Any, profile: Callable[[np.ndarray], np.ndarray], *,
                    significance: float, epsilons: np.ndarray = TRADEOFF_EPSILONS) -> tuple[float, float]:
    """``(excess, ε*)``: the trade-off test of a claimed privacy profile ``δ(ε)`` (issue 19).

    (ε, δ)-DP forces every test to satisfy ``e^ε·FPR + FNR ≥ 1 − δ`` and ``e^ε·FNR + FPR ≥ 1 − δ``.
    With Clopper–Pearson upper bounds ``FPR⁺``, ``FNR⁺`` at every threshold of "in iff score ≥ t"
    (Bonferroni over all ``2·#thresholds``, as :func:`gdp_lower_bound`), the empirical
    ``δ_lb(ε) = max_t max(1 − e^ε FPR⁺ − FNR⁺, 1 − e^ε FNR⁺ − FPR⁺)`` is, with probability at least
    ``1 − significance``, below the true δ(ε) at *every* ε at once. ``excess = max_ε δ_lb(ε) −
    δ(ε)`` > 0 therefore refutes the claimed profile for any mechanism — rigorous like Clopper–
    Pearson, but it tests the whole curve the accountant claims instead of its one (ε, δ) point,
    which is where a subsampled learner's bugs show. ``ε*`` is where the excess is largest."""
    inside, outside = np.sort(np.asarray(in_scores, np.float64)), np.sort(np.asarray(out_scores, np.float64))
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


def privacy_profile(event: Any, *, overflow_prob: float = 0.0, discretization: float = 1e-4
                    ) -> Callable[[np.ndarray], np.ndarray]:
    """``ε ↦ δ(ε)`` of a dp-accounting event under add/remove neighbours (PLD, pessimistic, so
    the claimed curve is never below the true one and the trade-off test stays valid), plus the
    Poisson overflow slack ``(1 + e^ε)·overflow_prob`` the plan charges."""
    from dp_accounting import privacy_accountant
    from dp_accounting.pld import pld_privacy_accountant

    from dpprep import sampling

    accountant = pld_privacy_accountant.PLDAccountant(privacy_accountant.NeighboringRelation.ADD_OR_REMOVE_ONE,
                                                      value_discretization_interval=discretization)
    accountant.compose(event)

    def profile(epsilons: np.ndarray) -> np.ndarray:
        return np.array([min(1.0, accountant.get_delta(float(e)) + sampling.overflow_delta(float(e), overflow_prob))
                         for e in np.atleast_1d(epsilons)])

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

    return models.Model("audit_linear_loss", init, apply, per_example_loss, residual, task="regression")


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


def _chunked(fn: Callable, keys: jax.Array, inside: jax.Array, chunk: int) -> np.ndarray:
    """``fn`` over fixed-size chunks (the last one padded by repeating runs), so one compilation."""
    total = keys.shape[0]
    pad = -total % chunk
    if pad:
        keys = jnp.concatenate([keys, keys[:pad]])
        inside = jnp.concatenate([inside, inside[:pad]])
    out = [np.asarray(fn(keys[i:i + chunk], inside[i:i + chunk])) for i in range(0, total + pad, chunk)]
    return np.concatenate(out)[:total]


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
    """DP-GD, Poisson / shuffled DP-SGD under either threat model (zero-out neighbours)."""
    sampling = {"dp_gd": "full", "dp_sgd_poisson": "poisson", "dp_sgd_shuffle": "shuffle"}[cfg.learner]
    d = cfg.dim + 1
    white = cfg.threat_model == "white_box"
    model = _model("linear" if white else "logistic", d)
    x_bg, y_bg = background(cfg, key)
    if white:
        y_bg = np.zeros_like(y_bg)  # zero gradients: the canary is the only signal (module docstring)
    clip = 1.0
    kwargs = ({"steps": cfg.steps} if sampling == "full" else {"epochs": cfg.epochs, "batch_size": cfg.batch_size})
    dp_plan = DPPlan.create(sampling, cfg.n, l2_clip_norm=clip, target_epsilon=cfg.epsilon, delta=cfg.delta, **kwargs)
    plan, z, claimed = dp_plan.execution, dp_plan.noise_multiplier, dp_plan.epsilon
    # Shuffle: the plan reports the customary as-if-Poisson number; hold it to the proven bound.
    theoretical = (dataclasses.replace(plan, shuffle_bound="no_amplification").epsilon(z, cfg.delta)
                   if sampling == "shuffle" else claimed)
    tc = TrainConfig(model, Hyper(cfg.learning_rate), dp_plan, track_params=white)
    hyper = Traced(cfg.learning_rate, z * cfg.noise_factor, clip)
    train_fn = engine_fn(tc)
    # Gradient (white-box) or feature (final-model) norm canary_norm·C: clipping binds on it, and an
    # honest learner releases C·e_d for it, the shift the scores below are built on.
    canary_x = _canary(cfg, clip * cfg.canary_norm)
    params0 = model.init(None)
    x_bg, y_bg = jnp.asarray(x_bg), jnp.asarray(y_bg)
    signal = 1.0 / z  # the canary's (clipped) step shift over the (claimed) noise std
    q = plan.batch_size / plan.n
    k = -(-plan.n // plan.batch_size)

    def one(run_key, inside):
        row = jnp.where(inside, canary_x, 0.0)  # out: the zero record (zero-out)
        x = jnp.concatenate([x_bg, row[None]])
        y = jnp.concatenate([y_bg, jnp.ones((1,), jnp.float32)])
        params, metrics = train_fn(hyper, params0, x, y, run_key)
        if not white:
            return (params["w"][:, 0] @ canary_x) / clip
        a = _updates(metrics["params"], params0)[:, cfg.dim] * plan.normaliser / (cfg.learning_rate * z * clip)
        if sampling == "full":
            return jnp.sum(a)
        if sampling == "poisson":
            return jnp.sum(_poisson_log_lr(a, signal, q))
        # Shuffle: in exactly one batch per epoch, batch b with probability (its real size)/n.
        sizes = np.minimum(plan.batch_size, plan.n - plan.batch_size * np.arange(k)) / plan.n
        per_epoch = a.reshape(plan.epochs, k) * signal - 0.5 * signal**2 + jnp.log(jnp.asarray(sizes))
        return jnp.sum(jax.nn.logsumexp(per_epoch, axis=1))

    details = {"noise_multiplier": float(z), "steps": float(plan.steps), "sampling_rate": float(q)}
    # The trade-off test needs the accountant's whole curve. Shuffle: the proven no-amplification
    # bound (``epochs`` Gaussian releases of sensitivity C) is a dp-accounting event, so the curve
    # the shuffled learner is held to is its PLD profile (the as-if-Poisson claim is not tested).
    proven = dataclasses.replace(plan, shuffle_bound="no_amplification") if sampling == "shuffle" else plan
    profile = privacy_profile(proven.dp_event(z), overflow_prob=plan.overflow_probability())
    rigorous = _GAUSSIAN_RIGOROUS if sampling == "full" else ("clopper_pearson",)
    return AuditTarget(jax.jit(jax.vmap(one)), float(theoretical), float(claimed), details,
                       rigorous=rigorous + ("tradeoff",), profile=profile)


def _iteration_setup(cfg: AuditConfig, key: jax.Array) -> AuditTarget:
    """DP-SGD by iteration (fixed order, random stop), final model, replace-one canary at record 0."""
    d = cfg.dim + 1
    model = _model("linear", d)
    x_bg, _ = background(cfg, key)
    y_bg = np.zeros(cfg.n - 1, np.float32)
    clip = 1.0
    # The linear loss is 0-smooth: amplification by iteration holds at every learning rate.
    dp_plan = DPPlan.create("fixed_order", cfg.n, l2_clip_norm=clip, target_epsilon=cfg.epsilon, delta=cfg.delta,
                            smoothness=0.0)
    z, theoretical = dp_plan.noise_multiplier, dp_plan.epsilon
    tc = TrainConfig(model, Hyper(cfg.learning_rate), dp_plan)
    hyper = Traced(cfg.learning_rate, z * cfg.noise_factor, clip)
    train_fn = engine_fn(tc)
    canary_x = _canary(cfg, clip * cfg.canary_norm)  # clipped to C·e_d by an honest learner
    params0 = model.init(None)
    x_bg, y_bg = jnp.asarray(x_bg), jnp.asarray(y_bg)

    def one(run_key, inside):
        # Replace-one: the canary (clipped gradient −C·e_d) or its mirror (+C·e_d), first in the order.
        label = jnp.where(inside, 1.0, -1.0)
        x = jnp.concatenate([canary_x[None], x_bg])
        y = jnp.concatenate([label[None], y_bg])
        params, _ = train_fn(hyper, params0, x, y, run_key)
        return params["w"][cfg.dim, 0]

    return AuditTarget(jax.jit(jax.vmap(one)), float(theoretical), float(theoretical),
                  {"noise_multiplier": float(z), "steps": float(cfg.n)})


def _dpsgdf_setup(cfg: AuditConfig, key: jax.Array) -> AuditTarget:
    """DPSGD-F (Algorithm 3): the canary ``x̃ = e_d`` enters the private mean and, centred, the
    gradients; the attack scores the released mean and every update (zero-out neighbours). The
    mean is released by :func:`dpprep.dpsgdf.mean_from_parts`, the code :func:`dpprep.dpsgdf.fit`
    runs, so a bug there shows in the audit. The canary's centred gradient ``C_F e_d − μ̂`` has
    norm about ``C_F = 2 > C``: clipping binds on it."""
    from dpprep import dpsgdf

    d = cfg.dim + 1
    model = _model("linear", d)
    x_bg, _ = background(cfg, key)
    unit_bg = dpsgdf.unit_normalize(x_bg)
    feature_norm, clip = 2.0, 1.0
    run = dpsgdf.DpsgdfConfig(method="dpsgdf", epsilon=cfg.epsilon, delta=cfg.delta, eps_F=cfg.eps_f,
                              feature_norm=feature_norm, batch_size=cfg.batch_size, epochs=cfg.epochs,
                              learning_rate=cfg.learning_rate, clip_norm=clip, iterates="last")
    dp_plan = dpsgdf.plan(run, cfg.n)  # z calibrated for [mean, DP-SGD] at (ε, δ)
    calibration = dpsgdf.calibrate(run, cfg.n)
    z, s = dp_plan.noise_multiplier, calibration.mean_multiplier
    assert s is not None
    tc = dataclasses.replace(dpsgdf.train_config(run, dp_plan, d, 1, model=model), track_params=True)
    plan = dp_plan.execution
    theoretical = dp_plan.epsilon
    train_fn = engine_fn(tc)
    params0 = model.init(None)
    e_d = _canary(cfg, 1.0)
    bg_sum = jnp.asarray(unit_bg.sum(axis=0))
    y = jnp.concatenate([jnp.zeros(cfg.n - 1, jnp.float32), jnp.ones((1,), jnp.float32)])
    unit_bg = jnp.asarray(unit_bg)
    q = plan.batch_size / plan.n
    mean_noise_sd = s * cfg.noise_factor

    def one(run_key, inside):
        row = jnp.where(inside, e_d, 0.0)
        x = jnp.concatenate([unit_bg, row[None]])
        xi = dpsgdf.mean_noise(run_key, d)
        mu_hat = dpsgdf.mean_from_parts((bg_sum + row) / cfg.n, cfg.n, feature_norm, mean_noise_sd, xi)
        hyper = Traced(cfg.learning_rate, z * cfg.noise_factor, clip,
                       extra={"feature_scale": jnp.float32(feature_norm), "feature_shift": mu_hat})
        _, metrics = train_fn(hyper, params0, x, y, run_key)
        # The canary's clipped gradient −C·v, v = unit(C_F e_d − μ̂), is known from the released μ̂.
        v = feature_norm * e_d - mu_hat
        v = v / jnp.linalg.norm(v)
        a = (_updates(metrics["params"], params0) @ v) * plan.normaliser / (cfg.learning_rate * z * clip)
        m = (mu_hat[cfg.dim] * cfg.n / feature_norm) / s  # N(b/s, 1): the mean's evidence
        score = m / s - 0.5 / s**2 + jnp.sum(_poisson_log_lr(a, 1.0 / z, q))
        # Exact-release check: without the canary the noiseless mean's coordinate is exactly 0 (no
        # background record uses it). A Gaussian release hits it with probability 0, so this never
        # moves an honest run's score, but a mean released without its noise is then separated
        # perfectly (any fixed score keeps Clopper–Pearson valid; this one also has power there).
        return jnp.where(mu_hat[cfg.dim] == 0.0, -_EXACT_RELEASE, score)

    details = {"noise_multiplier": float(z), "mean_multiplier": float(s), "steps": float(plan.steps)}
    profile = privacy_profile(dp_event_lib.ComposedDpEvent([plan.dp_event(z), dp.gaussian_event(s)]),
                              overflow_prob=plan.overflow_probability())
    return AuditTarget(jax.jit(jax.vmap(one)), float(theoretical), float(theoretical), details,
                       rigorous=("clopper_pearson", "tradeoff"), profile=profile)


def _corrdp_setup(cfg: AuditConfig, key: jax.Array) -> AuditTarget:
    """CorrDP-SGD (full batch, per-example clipping at L, the theory constant): replace-one canary
    that differs from its neighbour only in the insensitive coordinate ``dim``.

    The reference ε is derived here from the paper's Eq. 4 — ``σ_u² = K_δ L² T/(n² ε²)·max{TV,
    m_s²/m²}`` — and the closed form of T Gaussian releases of a ``2L/n`` shift, not from
    :func:`dpprep.corrdp.noise.corrdp_factors` or the accountant the learner uses: a bug in the
    learner's noise factors must not move the yardstick it is measured against."""
    from dpprep.corrdp import noise as corr_noise
    from dpprep.corrdp import sgd as corr_sgd

    d = cfg.dim + 1
    model = _model("linear", d)
    lipschitz = 1.0
    run = corr_sgd.CorrDPSGD(model, steps=cfg.steps, learning_rate=cfg.learning_rate, delta=cfg.delta,
                             clip_mode="per_example", clip_norm=lipschitz)
    sensitive = list(range(cfg.dim))
    factors = corr_noise.corrdp_factors(d, sensitive, cfg.tv)
    params0 = model.init(None)
    point = corr_sgd.Point("corrdp", cfg.epsilon, corr_noise.theory_constant(lipschitz, cfg.steps, cfg.n),
                           corr_noise.param_factors(params0, factors))
    values = corr_sgd.point_values(run, params0, cfg.n, [point])
    # Eq. 4 written out (K_δ = log(1/δ) + 1; the floor m_s²/m² with m_s = dim sensitive of m = d).
    weight_u = max(cfg.tv, (cfg.dim / d) ** 2)
    sigma_u = math.sqrt((math.log(1.0 / cfg.delta) + 1.0) * lipschitz**2 * cfg.steps / (cfg.n**2 * cfg.epsilon**2)
                        * weight_u)  # noise std of coordinate u of the mean gradient
    # T full-batch Gaussian releases, each shifted by 2L/n (replace-one): one of μ = 2L√T/(n σ_u).
    theoretical = gdp_epsilon(2.0 * lipschitz * math.sqrt(cfg.steps) / (cfg.n * sigma_u), cfg.delta)
    tc = dataclasses.replace(run.train_config(cfg.n), track_params=True)
    hyper = Traced(cfg.learning_rate, 0.0, lipschitz, extra={
        "noise_std": jnp.float32(values["noise_std"][0] * cfg.noise_factor),
        "noise_scales": jax.tree_util.tree_map(lambda v: jnp.asarray(v[0]), values["noise_scales"])})
    train_fn = engine_fn(tc)
    x_bg, _ = background(cfg, key)
    x_bg, y_bg = jnp.asarray(x_bg), jnp.zeros(cfg.n - 1, jnp.float32)
    canary = _canary(cfg, lipschitz * cfg.canary_norm)  # clipped to L·e_u by an honest learner

    def one(run_key, inside):
        # Same record up to its insensitive feature: +a·e_u (in) or −a·e_u (out), label 1, a = canary_norm·L.
        row = jnp.where(inside, 1.0, -1.0) * canary
        x = jnp.concatenate([x_bg, row[None]])
        y = jnp.concatenate([y_bg, jnp.ones((1,), jnp.float32)])
        _, metrics = train_fn(hyper, params0, x, y, run_key)
        return jnp.sum(_updates(metrics["params"], params0)[:, cfg.dim]) / (cfg.learning_rate * sigma_u)

    details = {"nominal_epsilon": float(cfg.epsilon), "sigma_insensitive": float(sigma_u),
               "factor_insensitive": float(weight_u), "factor_insensitive_library": float(factors[cfg.dim])}
    return AuditTarget(jax.jit(jax.vmap(one)), float(theoretical), float(cfg.epsilon), details,
                       rigorous=_GAUSSIAN_RIGOROUS)


def impute_canary_datasets(cfg: AuditConfig, key: jax.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
    """The pipeline audit's two raw datasets, mean-imputed: column 0 is missing in a share
    ``missing_fraction`` of the rows (label 1: their imputed value enters the gradients), observed in
    the others (label 0: they only set the mean), and the canary (label 1) has column 0 = +1 (in)
    or −1 (out). Returns ``(x_in, x_out, y, sensitivity)``; the sensitivity is the larger of the two
    datasets' (Cor. 4 depends on n and p only, which they share)."""
    from dpprep.preprocess import impute_mean

    n, p = cfg.n, int(round(cfg.missing_fraction * (cfg.n - 1)))
    observed = np.asarray(jax.random.uniform(key, (n - 1 - p,), minval=-0.5, maxval=0.5), np.float64)
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
    from dpprep.accounting import meta, table1

    x_in, x_out, y, sens = impute_canary_datasets(cfg, key)
    mechanism = table1.dp_gd(epsilon=cfg.epsilon, lipschitz=1.0, smoothness=1.0)
    overall = meta.overall_privacy(mechanism, sens, delta=cfg.delta)
    candidates = [overall.epsilon] + ([overall.group_epsilon] if overall.group_epsilon is not None else [])
    theoretical = float(min(candidates))
    alone = gdp_epsilon(2.0 * cfg.epsilon, cfg.delta)  # DP-GD's own RDP 2αε² is 2ε-GDP
    model = _model("linear", 2)
    z = math.sqrt(cfg.steps) / cfg.epsilon  # noise std L√T/ε on the gradient sum (L = C = 1)
    dp_plan = DPPlan.create("full", cfg.n, steps=cfg.steps, l2_clip_norm=1.0, noise_multiplier=z, delta=cfg.delta,
                            neighbouring="replace_one")
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
        sums = -_updates(metrics["params"], params0) * cfg.n / cfg.learning_rate  # noisy gradient sums
        return jnp.sum((sums - g_out) @ direction) / z

    details = {"mechanism_epsilon_alone": float(alone), "theorem2_epsilon": float(overall.epsilon),
               "group_epsilon": float(overall.group_epsilon or math.nan),
               "linf": float(sens.linf), "l2": float(sens.l2),
               "gradient_shift": float(np.linalg.norm(delta_vec))}
    return AuditTarget(jax.jit(jax.vmap(one)), theoretical, float(alone), details, rigorous=_GAUSSIAN_RIGOROUS)


for _name in ("dp_gd", "dp_sgd_poisson", "dp_sgd_shuffle"):
    register(_name, _sgd_setup, threat_models=THREAT_MODELS)
register("dp_sgd_iteration", _iteration_setup, threat_models=("final_model",), why_not={
    "white_box": "its amplification-by-iteration guarantee hides the intermediate iterates"})
for _name, _build in (("dpsgdf", _dpsgdf_setup), ("corrdp_sgd", _corrdp_setup), ("impute_dp_gd", _impute_setup)):
    register(_name, _build, why_not={"final_model": (
        "not implemented (the white-box audit scores the released mean and every update)" if _name == "dpsgdf"
        else "not implemented (the white-box audit is the tight one for this pair)")})

#: dpprep's own learners (:data:`REGISTRY` also holds any registered later).
LEARNERS = tuple(REGISTRY)
#: Threat models each of dpprep's own learners is audited under.
SUPPORTED: dict[str, tuple[str, ...]] = {name: REGISTRY[name].threat_models for name in LEARNERS}


# --------------------------------------------------------------------------------------------------
# The audit


@dataclasses.dataclass(frozen=True)
class AuditResult:
    """``theoretical``: the ε the learner's guarantee gives this canary pair (the bound an audit
    must never exceed); ``claimed``: what a user would be told (differs for shuffled DP-SGD — the
    as-if-Poisson number —, CorrDP — the nominal ε — and the pipeline — DP-GD's ε ignoring
    pre-processing); ``bounds``: the lower bounds; ``runs_per_second``: evaluation + pilot runs
    (both worlds) over the wall time of the compiled calls (compilation excluded); ``rigorous``:
    which bounds are valid for this learner whatever its implementation does
    (:attr:`AuditTarget.rigorous`) — the others hold only under the assumption that its trade-off
    curve is Gaussian-shaped."""

    config: AuditConfig
    theoretical: float
    claimed: float
    bounds: Bounds
    runs_per_second: float
    seconds: float
    details: dict[str, float]
    rigorous: tuple[str, ...] = ("clopper_pearson",)

    @property
    def ratio(self) -> float:
        """GDP lower bound over the theoretical ε (rigorous only where ``"gdp"`` is in ``rigorous``)."""
        return self.bounds.epsilon_gdp / self.theoretical

    @property
    def rigorous_epsilon(self) -> float:
        """The largest of the bounds that are rigorous for this learner (``rigorous``)."""
        values = {"gdp": self.bounds.epsilon_gdp, "clopper_pearson": self.bounds.epsilon_cp}
        return max(values[name] for name in self.rigorous if name in values)

    @property
    def violation(self) -> bool:
        """True when a rigorous ε bound exceeds the theoretical ε, or the rigorous trade-off test
        refutes the claimed privacy profile: the implementation does not give the guarantee its
        accounting states. The verdict is the union of ``len(rigorous)`` tests, so each was run at
        ``config.significance / len(rigorous)`` (Bonferroni, :func:`test_significance`): an honest
        learner is flagged with probability at most ``config.significance``."""
        refuted = "tradeoff" in self.rigorous and self.bounds.delta_excess > 0
        return self.rigorous_epsilon > self.theoretical or bool(refuted)

    def row(self) -> dict[str, Any]:
        c = self.config
        return {"learner": c.learner, "threat_model": c.threat_model, "epsilon_target": c.epsilon,
                "delta": c.delta, "runs_per_world": c.runs, "theoretical_epsilon": self.theoretical,
                "claimed_epsilon": self.claimed, "epsilon_lb_gdp": self.bounds.epsilon_gdp,
                "mu_lb_gdp": self.bounds.mu_gdp, "epsilon_lb_cp": self.bounds.epsilon_cp,
                "tradeoff_delta_excess": self.bounds.delta_excess,
                "tradeoff_epsilon": self.bounds.epsilon_at_excess,
                "auroc": self.bounds.auroc, "ratio_gdp": self.ratio,
                "rigorous_bounds": "+".join(self.rigorous), "epsilon_lb_rigorous": self.rigorous_epsilon,
                "violation": self.violation, "significance": c.significance,
                "significance_per_test": test_significance(c.significance, self.rigorous), "canary_norm": c.canary_norm,
                "runs_per_second": self.runs_per_second, "seconds": self.seconds,
                "noise_factor": c.noise_factor, "seed": c.seed,
                **{f"detail_{k}": v for k, v in self.details.items()}}


def audit(cfg: AuditConfig, *, progress: Callable[[str], None] | None = None) -> AuditResult:
    """Runs ``pilot_runs`` + ``runs`` trainings per world as vmapped chunks of one compiled
    function, fixes ``levels`` thresholds on the pilot scores and returns the lower bounds of the
    evaluation scores."""
    if not isinstance(cfg, AuditConfig):
        raise ValueError(f"audit takes an AuditConfig, got {type(cfg).__name__} (e.g. AuditConfig('dp_gd'))")
    key = jax.random.key(int(cfg.seed))
    k_data, k_pilot, k_eval = jax.random.split(key, 3)
    setup = REGISTRY[cfg.learner].build(cfg, k_data)
    if not isinstance(setup, AuditTarget):
        raise ValueError(f"learner {cfg.learner!r}: build must return an AuditTarget, got {type(setup).__name__}")
    unknown = sorted(set(setup.rigorous) - set(BOUND_NAMES))
    if unknown or not set(setup.rigorous) & {"gdp", "clopper_pearson"}:
        raise ValueError(f"learner {cfg.learner!r}: AuditTarget.rigorous must be a subset of {BOUND_NAMES} with "
                         f"'gdp' or 'clopper_pearson' in it, got {setup.rigorous!r}")
    if "tradeoff" in setup.rigorous and setup.profile is None:
        raise ValueError(f"learner {cfg.learner!r}: a trade-off test needs AuditTarget.profile (the claimed "
                         "privacy profile ε ↦ δ(ε)); dpprep's learners with one: dp_gd, dp_sgd_poisson, dp_sgd_shuffle, dpsgdf")

    def scores(run_key, runs):
        keys = jax.random.split(run_key, 2 * runs)
        inside = jnp.concatenate([jnp.ones(runs, bool), jnp.zeros(runs, bool)])
        values = _chunked(compiled, keys, inside, chunk)
        if not np.all(np.isfinite(values)):
            raise FloatingPointError(f"{cfg.learner}: non-finite attack scores (an overflowing run?)")
        return values[:runs], values[runs:]

    chunk = min(cfg.chunk, 2 * cfg.pilot_runs)
    # Compiled ahead of the timed runs (without running a chunk twice); every chunk has this shape.
    runner = setup.runner if hasattr(setup.runner, "lower") else jax.jit(setup.runner)
    try:
        compiled = runner.lower(jax.random.split(k_pilot, chunk), jnp.ones(chunk, bool)).compile()
    except Exception as err:  # a user's runner: say what the protocol needs
        raise ValueError(f"learner {cfg.learner!r}: AuditTarget.runner(keys, inside) must be jittable and vmapped over "
                         f"runs (keys: ({chunk},) PRNG keys, inside: ({chunk},) bool) returning ({chunk},) scores; "
                         f"tracing it failed: {type(err).__name__}: {err}") from err
    start = time.perf_counter()
    pilot_in, pilot_out = scores(k_pilot, cfg.pilot_runs)
    if progress:
        progress(f"{cfg.learner}/{cfg.threat_model} eps={cfg.epsilon}: pilot done, {2 * cfg.runs} runs to go")
    eval_in, eval_out = scores(k_eval, cfg.runs)
    seconds = time.perf_counter() - start
    pilot = np.concatenate([pilot_in, pilot_out])
    thresholds = np.unique(np.quantile(pilot, np.linspace(0, 1, cfg.levels + 2)[1:-1]))
    d_in, d_out = discretise(eval_in, thresholds), discretise(eval_out, thresholds)
    # The verdict is the union of the rigorous tests: each runs at significance / k (Bonferroni).
    per_test = test_significance(cfg.significance, tuple(setup.rigorous))
    bounds = lower_bounds(d_in, d_out, delta=cfg.delta, significance=per_test)
    if setup.profile is not None:
        excess, at = tradeoff_excess(d_in, d_out, setup.profile, significance=per_test)
        bounds = dataclasses.replace(bounds, delta_excess=excess, epsilon_at_excess=at)
    total = 2 * (cfg.runs + cfg.pilot_runs)
    return AuditResult(cfg, setup.theoretical, setup.claimed, bounds, total / seconds, seconds, setup.details,
                       tuple(setup.rigorous))


__all__ = ["AuditConfig", "AuditResult", "AuditTarget", "BOUND_NAMES", "Bounds", "LEARNERS", "Learner",
           "REGISTRY", "SUPPORTED", "THREAT_MODELS", "audit", "check_learner", "discretise",
           "gdp_epsilon", "gdp_lower_bound", "impute_canary_datasets", "linear_loss_model", "lower_bounds",
           "privacy_profile", "register", "required_runs", "tradeoff_excess"]
