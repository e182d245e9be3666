"""The catalogue of planted privacy bugs that dpprep's audit is tested against (test-only).

It lives outside the library on purpose: nothing in ``dpprep`` can switch a bug on.
:func:`experiments.audit.inject.inject` rebinds a library attribute (the privatizer's noise, the
clip factors, the Poisson sampler, the engine's step, DPSGD-F's private mean, CorrDP's noise
factors, the drivers' option paths) to its broken version (:mod:`experiments.audit.patches`,
:mod:`experiments.audit.driver_patches`) for the duration of a ``with`` block — never the audit's
bookkeeping: the accountant, the canary and the attack stay honest.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from . import driver_patches, patches


@dataclasses.dataclass(frozen=True)
class Bug:
    """A class of privacy bug that :func:`inject` plants in dpprep's own code (never in the
    audit's bookkeeping: the accountant, the canary and the attack stay honest).

    Attributes:
      description: what the broken code does.
      patches: ``(module, attribute, wrap)`` triples: while injected, ``module.attribute`` is
        ``wrap(original)`` (``attribute`` may be ``"Class.method"``). Library code looks these
        names up when the audit traces the learner, so every learner built and compiled inside
        :func:`inject` runs the broken code.
      learners: dpprep learners whose code path the patch reaches.
    """

    description: str
    patches: tuple[tuple[str, str, Callable[[Callable], Callable]], ...]
    learners: tuple[str, ...]


# The public drivers (dpprep.auditing.DRIVERS) run DP-GD / DP-SGD through the same pieces.
_DRIVERS = ("train", "fit", "dp_step", "sweep_points")
_ENGINE_PATHS = ("dp_sgd_poisson_vmap_clip", "dp_sgd_poisson_sweep_point", "dpsgdf_grid")
_PATHS = _ENGINE_PATHS + ("dpsgdf_fit",) + _DRIVERS
_DPSGDF = ("dpsgdf", "dpsgdf_grid", "dpsgdf_fit")
_CORRDP = ("corrdp_sgd", "corrdp_sgd_sensitive", "corrdp_points")
_SGD = ("dp_gd", "dp_sgd_poisson", "dp_sgd_shuffle", "dp_sgd_iteration", "dpsgdf")
_GAUSSIAN_NOISE_LEARNERS = _SGD + _CORRDP + ("impute_dp_gd",) + _PATHS
#: Learners whose noise the plan calibrates (through dpprep.plan and the DP-SGD event).
_PLAN_CALIBRATED = _SGD + _PATHS
_POISSON = ("dp_sgd_poisson", "dpsgdf") + _PATHS

#: The catalogue by name (:func:`inject`): every bug class the audit is tested against.
BUGS: dict[str, Bug] = {
    "noise_0.7x": Bug(
        "the Gaussian noise is 0.7× the std the accountant assumes (dpprep.noise.add_noise)",
        (("dpprep.noise", "add_noise", patches.scaled_noise(0.7)),),
        _GAUSSIAN_NOISE_LEARNERS,
    ),
    "clip_2c": Bug(
        "per-example gradients are clipped to 2C instead of C (dpprep.clipping.clip_factors)",
        (("dpprep.clipping", "clip_factors", patches.clip_to(2.0)),),
        _GAUSSIAN_NOISE_LEARNERS,
    ),
    "one_unclipped": Bug(
        "the last real example (per the mask) of each batch is not clipped"
        " (dpprep.clipping.clip_factors)",
        (("dpprep.clipping", "clip_factors", patches.last_row_unclipped),),
        _GAUSSIAN_NOISE_LEARNERS,
    ),
    "calibration_0.7x": Bug(
        "the plan's calibration returns 0.7x the multiplier its accountant needs"
        " (dpprep.plan._calibrate)",
        (("dpprep.plan", "_calibrate", patches.calibrated_low),),
        _PLAN_CALIBRATED,
    ),
    "half_steps_charged": Bug(
        "the accountant's DP-SGD event composes half the steps the run takes "
        "(dpprep.accounting.dp.dpsgd_event)",
        (("dpprep.accounting.dp", "dpsgd_event", patches.half_steps_charged),),
        tuple(name for name in _PLAN_CALIBRATED if name != "dp_sgd_iteration"),
    ),
    "noise_key_frozen": Bug(
        "every step of a run draws the same noise (the privatizer's counter does not reach its "
        "key; dpprep.noise.privatizer)",
        (("dpprep.noise", "privatizer", patches.frozen_noise_key),),
        ("dp_gd", "dp_sgd_poisson", "dp_sgd_shuffle", "dp_sgd_iteration", "dpsgdf") + _PATHS,
    ),
    "batch_max_scaling": Bug(
        "a batch is scaled by C over its largest gradient norm instead of clipping each example "
        "(dpprep.clipping.clip_factors)",
        (("dpprep.clipping", "clip_factors", patches.batch_max_scaling),),
        _GAUSSIAN_NOISE_LEARNERS,
    ),
    "padding_slots_real": Bug(
        "the padded slots of a Poisson batch (index 0) keep weight 1"
        " (dpprep.sampling.poisson_batch)",
        (("dpprep.sampling", "poisson_batch", patches.padding_slots_real),),
        _POISSON,
    ),
    "first_record_always": Bug(
        "record 0 joins every Poisson batch that missed it (dpprep.sampling.poisson_batch)",
        (("dpprep.sampling", "poisson_batch", patches.first_record_always),),
        _POISSON,
    ),
    "per_leaf_norms": Bug(
        "the clipping norm of a multi-leaf gradient is its largest leaf's"
        " (dpprep.clipping._global_norms)",
        (("dpprep.clipping", "_global_norms", patches.per_leaf_norms),),
        ("dp_sgd_poisson_vmap_clip",),
    ),
    "poisson_2q": Bug(
        "the Poisson sampler includes each record at rate 2q, the accountant charges q "
        "(dpprep.sampling.poisson_batch, poisson_pad_size)",
        (
            ("dpprep.sampling", "poisson_batch", patches.doubled_batch_rate),
            ("dpprep.sampling", "poisson_pad_size", patches.doubled_pad_rate),
        ),
        _POISSON,
    ),
    "double_releases": Bug(
        "every accounted step releases two noisy updates (dpprep.algorithms' apply_step runs"
        " twice)",
        (("dpprep.algorithms", "apply_step", patches.twice),),
        _GAUSSIAN_NOISE_LEARNERS,
    ),
    "mean_noiseless": Bug(
        "DPSGD-F's private mean is released without its noise (dpprep.dpsgdf.mean_from_parts)",
        (("dpprep.dpsgdf", "mean_from_parts", patches.noiseless_mean),),
        _DPSGDF,
    ),
    "mean_of_sum": Bug(
        "DPSGD-F's private mean is formed from the rows' sum where their mean belongs: its noise,"
        " scaled for a mean, is n times too small (dpprep.dpsgdf.mean_from_parts)",
        (("dpprep.dpsgdf", "mean_from_parts", patches.mean_of_sum),),
        _DPSGDF,
    ),
    "mean_sigma_halved": Bug(
        "DPSGD-F's private-mean multiplier σ_F is half what (ε_F, δ) needs, and the run is "
        "calibrated around it (dpprep.dpsgdf.mean_sigma)",
        (("dpprep.dpsgdf", "mean_sigma", patches.mean_sigma_halved),),
        _DPSGDF,
    ),
    "corrdp_factors_halved": Bug(
        "CorrDP's insensitive-feature noise variance factors are halved "
        "(dpprep.corrdp.noise.corrdp_factors)",
        (("dpprep.corrdp.noise", "corrdp_factors", patches.halved_factors),),
        _CORRDP,
    ),
    "corrdp_sensitive_factors_halved": Bug(
        "CorrDP's sensitive-feature noise variance factors are halved "
        "(dpprep.corrdp.noise.corrdp_factors)",
        (("dpprep.corrdp.noise", "corrdp_factors", patches.halved_sensitive),),
        _CORRDP,
    ),
    # Bugs on the paths a user's options take, audited through the public drivers (DRIVERS).
    "first_microbatch_twice": Bug(
        "the microbatch scan adds its first microbatch's clipped sum twice"
        " (dpprep.clipping._microbatched)",
        (("dpprep.clipping", "_microbatched", driver_patches.first_microbatch_twice),),
        _DRIVERS,
    ),
    "calls_restart_at_zero": Bug(
        "train's host loop over compiled calls (steps_per_call) starts every call at step 0:"
        " each call redraws the first call's batches and noise (dpprep.algorithms.run_in_calls)",
        (("dpprep.algorithms", "run_in_calls", driver_patches.calls_restart_at_zero),),
        ("train", "fit"),
    ),
    "leaves_after_two_unnormed": Bug(
        "the per-example norm covers the first two parameter leaves only"
        " (dpprep.clipping._global_norms)",
        (("dpprep.clipping", "_global_norms", driver_patches.leaves_after_two_unnormed),),
        _DRIVERS,
    ),
    "noise_after_learning_rate": Bug(
        "the run's noise is added after the learning rate scales the update: z/η relative to the"
        " gradient (dpprep.algorithms.update_transform)",
        (("dpprep.algorithms", "update_transform", driver_patches.noise_after_learning_rate),),
        ("train", "fit", "sweep_points"),
    ),
    "step_counter_stuck": Bug(
        "dp_step reads a stale step counter (0): every step draws step 0's batch"
        " (dpprep.step._privatizer_state)",
        (("dpprep.step", "_privatizer_state", driver_patches.step_counter_stuck),),
        ("dp_step",),
    ),
    "seeds_share_first_key": Bug(
        "sweep_points runs every seed with the first seed's key (dpprep.sweeps.sweep_points)",
        (("dpprep.sweeps", "sweep_points", driver_patches.seeds_share_first_key),),
        ("sweep_points",),
    ),
    "fit_delta_tenfold": Bug(
        "fit calibrates its plan at 10·δ (dpprep.algorithms.fit)",
        (("dpprep.algorithms", "fit", driver_patches.fit_delta_tenfold),),
        ("fit",),
    ),
    "relation_dropped": Bug(
        "the plan accounts every run as add/remove, whatever relation it states: a replace-one"
        " plan's noise is calibrated for C, not 2C (dpprep.plan.ExecutionPlan._options)",
        (("dpprep.plan", "ExecutionPlan._options", driver_patches.relation_dropped),),
        _DRIVERS,
    ),
    "keyed_loss_unclipped": Bug(
        "a loss that takes a PRNG key (dropout) is summed without clipping"
        " (dpprep.clipping.clipped_grad with prng_argnum)",
        (("dpprep.clipping", "clipped_grad", driver_patches.keyed_loss_unclipped),),
        _DRIVERS,
    ),
    "selection_unrepeated": Bug(
        "the private selection's accountant charges the best of K candidates as one"
        " (dpprep.selection.PrivateSelection._selected)",
        (("dpprep.selection", "PrivateSelection._selected", driver_patches.selection_unrepeated),),
        ("private_selection",),
    ),
    "score_noise_per_accuracy": Bug(
        "the selection's score noise is scaled for the accuracy, not the count: std σ/v"
        " (dpprep.selection._run_searches)",
        (("dpprep.selection", "_run_searches", driver_patches.score_noise_per_accuracy),),
        ("private_selection", "selection_scores"),
    ),
}


def check_bug(name: str) -> Bug:
    """The catalogue entry ``name``; ValueError naming the available ones otherwise."""
    if not isinstance(name, str) or name not in BUGS:
        raise ValueError(f"unknown bug {name!r}; available: {', '.join(BUGS)}")
    return BUGS[name]


__all__ = ["BUGS", "Bug", "check_bug"]
