"""The audit's settings: the learners' audited shapes, the bug catalogue's (learner, bug) pairs,
the profiles' run counts, and the measured reasons why some catalogue rows cannot be caught.

Each learner is audited at a target ε (δ = 1e-5) under its threat models; :data:`PROFILES` sets
the runs per world of the honest, broken and catalogue audits and the seeds the honest audits are
repeated at. The measured reasons for the catalogue's missed rows are in
:mod:`experiments.audit.notes`.
"""

from __future__ import annotations

import dataclasses

from .paths import DRIVER_PATHS, DRIVER_TITLES

EPSILONS = (1.0, 2.0, 4.0)
PIPELINE_EPSILONS = (0.1, 0.25, 0.5)  # DP-GD's own ε parameter (Hu et al.'s σ = L√T/(εn))
# Per-learner shape of the audited run (the rest are AuditConfig defaults: n = 100, dim = 4).
SHAPES = {
    "dp_gd": {"steps": 10},
    "dp_sgd_poisson": {"epochs": 5, "batch_size": 20},
    "dp_sgd_shuffle": {"epochs": 5, "batch_size": 20},
    "dp_sgd_iteration": {"n": 10},
    "dpsgdf": {"epochs": 5, "batch_size": 20},
    "corrdp_sgd": {"steps": 10},
    "impute_dp_gd": {"steps": 10},
    "dp_sgd_poisson_vmap_clip": {"epochs": 5, "batch_size": 20},
    "dp_sgd_poisson_sweep_point": {"epochs": 5, "batch_size": 20},
    "dpsgdf_grid": {"epochs": 5, "batch_size": 20},
    "corrdp_sgd_sensitive": {"steps": 10},
    # CorrDP through its public corrdp.sgd.sweep_points (one call per chunk and world)
    "corrdp_points": {"steps": 10},
    # A host loop of select() calls: its own (small) size and run count at every profile.
    "private_selection": {
        "n": 40,
        "dim": 3,
        "steps": 4,
        "runs": 600,
        "pilot_runs": 150,
        "chunk": 150,
    },
    # search_many's searches, the runs of a world packed into one call (~8 ms a run)
    "selection_scores": {
        "n": 40,
        "dim": 3,
        "steps": 4,
        "runs": 5_000,
        "pilot_runs": 1_000,
        "chunk": 2_500,
    },
}
SHAPES.update(DRIVER_PATHS)
#: Learners audited under the final-model threat model only.
FINAL_MODEL_ONLY = ("dp_sgd_iteration", "private_selection", "selection_scores", "corrdp_points")
TITLES = {
    "dp_gd": "DP-GD",
    "dp_sgd_poisson": "DP-SGD (Poisson)",
    "dp_sgd_shuffle": "DP-SGD (shuffled)",
    "dp_sgd_iteration": "DP-SGD by iteration",
    "dpsgdf": "DPSGD-F",
    "corrdp_sgd": "CorrDP-SGD",
    "impute_dp_gd": "mean imputation → DP-GD",
    "dp_sgd_poisson_vmap_clip": "DP-SGD (Poisson), vmap clipping of two leaves",
    "dp_sgd_poisson_sweep_point": "DP-SGD (Poisson), one point of a vmapped sweep",
    "dpsgdf_grid": "DPSGD-F, grid path (grid_group + sweep_points)",
    "corrdp_sgd_sensitive": "CorrDP-SGD, sensitive-feature canary",
    "corrdp_points": "CorrDP-SGD through corrdp.sgd.sweep_points (last iterate)",
    "private_selection": "private selection (end to end)",
    "selection_scores": "private selection's noisy scores (search_many, canary in validation)",
    **DRIVER_TITLES,
}


@dataclasses.dataclass(frozen=True)
class Profile:
    """How many audits a profile runs, and how many runs per world each gets."""

    runs: int  # evaluation runs per world
    runs_eps1_dp_gd: int  # DP-GD at ε = 1 needs more for its 0.8 target
    runs_broken: int  # the broken learners (Clopper–Pearson must resolve Poisson's gap)
    pilot_runs: int
    epsilons: tuple[float, ...]
    pipeline_epsilons: tuple[float, ...]
    final_model: tuple[str, ...]  # learners also audited under the final-model threat model
    catalogue: tuple[tuple[str, str], ...] = ()  # (learner, bug) pairs of the bug catalogue
    # The catalogue's runs per world: the learners' default audit settings.
    runs_catalogue: int = 20_000
    # Every honest audit is repeated at these seeds (the false-alarm count).
    honest_seeds: tuple[int, ...] = (0,)


#: Every bug class of :data:`experiments.audit.bugs.BUGS` on every learner whose code path it
#: reaches (ε = 1; the pipeline at its own ε of 0.25). ``one_unclipped`` leaves the last *real* row
#: (per the mask) of each batch unclipped: the canary whenever it is sampled (full batch, Poisson);
#: see experiments.audit.notes.NOT_CATCHABLE for the rows that no rigorous test can catch at
#: these settings, and why.
CATALOGUE: tuple[tuple[str, str], ...] = (
    ("dp_gd", "noise_0.7x"),
    ("dp_gd", "clip_2c"),
    ("dp_gd", "one_unclipped"),
    ("dp_gd", "double_releases"),
    ("dp_sgd_poisson", "noise_0.7x"),
    ("dp_sgd_poisson", "clip_2c"),
    ("dp_sgd_poisson", "one_unclipped"),
    ("dp_sgd_poisson", "poisson_2q"),
    ("dp_sgd_poisson", "double_releases"),
    ("dp_sgd_shuffle", "noise_0.7x"),
    ("dp_sgd_shuffle", "clip_2c"),
    ("dp_sgd_iteration", "noise_0.7x"),
    ("dp_sgd_iteration", "clip_2c"),
    ("dpsgdf", "noise_0.7x"),
    ("dpsgdf", "clip_2c"),
    ("dpsgdf", "poisson_2q"),
    ("dpsgdf", "mean_noiseless"),
    ("corrdp_sgd", "noise_0.7x"),
    ("corrdp_sgd", "clip_2c"),
    ("corrdp_sgd", "corrdp_factors_halved"),
    ("impute_dp_gd", "noise_0.7x"),
    ("impute_dp_gd", "clip_2c"),
    # Bugs in the plan's calibration and account, the noise's structure, batch-level
    # clipping rules, slots, multi-leaf norms, and the paths (vmap clipping, a sweep's point).
    ("dp_gd", "calibration_0.7x"),
    ("dp_sgd_poisson", "calibration_0.7x"),
    ("dp_sgd_shuffle", "calibration_0.7x"),
    ("dp_sgd_iteration", "calibration_0.7x"),
    ("dpsgdf", "calibration_0.7x"),
    ("dp_gd", "half_steps_charged"),
    ("dp_sgd_poisson", "half_steps_charged"),
    ("dp_sgd_shuffle", "half_steps_charged"),
    ("dpsgdf", "half_steps_charged"),
    ("dp_gd", "noise_key_frozen"),
    ("dp_sgd_poisson", "noise_key_frozen"),
    ("dp_sgd_shuffle", "noise_key_frozen"),
    ("dpsgdf", "noise_key_frozen"),
    ("dp_sgd_poisson_sweep_point", "noise_key_frozen"),
    ("dp_gd", "batch_max_scaling"),
    ("dp_sgd_poisson", "batch_max_scaling"),
    ("dp_sgd_shuffle", "batch_max_scaling"),
    ("dp_sgd_poisson_vmap_clip", "batch_max_scaling"),
    ("dp_sgd_poisson", "padding_slots_real"),
    ("dp_sgd_poisson_sweep_point", "padding_slots_real"),
    ("dpsgdf", "padding_slots_real"),
    ("dp_sgd_poisson", "first_record_always"),
    ("dp_sgd_poisson_vmap_clip", "per_leaf_norms"),
    ("dp_sgd_poisson_vmap_clip", "noise_0.7x"),
    ("dp_sgd_poisson_vmap_clip", "clip_2c"),
    ("dp_sgd_poisson_sweep_point", "noise_0.7x"),
    ("dp_sgd_poisson_sweep_point", "clip_2c"),
    ("dpsgdf_grid", "noise_0.7x"),
    ("dpsgdf_grid", "mean_noiseless"),
    ("dpsgdf_grid", "half_steps_charged"),
    ("dpsgdf_grid", "padding_slots_real"),
    ("dpsgdf", "mean_sigma_halved"),
    ("dpsgdf_grid", "mean_sigma_halved"),
    ("dpsgdf_grid", "noise_key_frozen"),
    ("dpsgdf", "first_record_always"),
    ("dpsgdf_grid", "first_record_always"),
    ("corrdp_sgd_sensitive", "noise_0.7x"),
    ("corrdp_sgd_sensitive", "corrdp_sensitive_factors_halved"),
    ("corrdp_sgd", "corrdp_sensitive_factors_halved"),
    # Through the public drivers, with the options a user sets (DRIVER_PATHS).
    ("train_options", "calls_restart_at_zero"),
    ("train_options", "noise_after_learning_rate"),
    ("train_options", "first_microbatch_twice"),
    ("train_options", "leaves_after_two_unnormed"),
    ("train_options", "noise_0.7x"),
    ("fit_full", "fit_delta_tenfold"),
    ("fit_full", "clip_2c"),
    ("dp_step_microbatch", "first_microbatch_twice"),
    ("dp_step_microbatch", "step_counter_stuck"),
    ("dp_step_microbatch", "noise_key_frozen"),
    ("dp_step_full_leaves", "leaves_after_two_unnormed"),
    ("dp_step_full_leaves", "clip_2c"),
    ("sweep_points_shuffle", "seeds_share_first_key"),
    ("sweep_points_shuffle", "noise_after_learning_rate"),
    ("dp_step_replace_one", "relation_dropped"),
    ("dp_step_full_final", "clip_2c"),
    ("dp_step_full_final", "batch_max_scaling"),
    ("dp_step_adam_final", "clip_2c"),
    ("dp_step_adam_final", "noise_0.7x"),
    ("train_dropout", "keyed_loss_unclipped"),
    ("dp_step_dropout", "keyed_loss_unclipped"),
    ("dpsgdf", "batch_max_scaling"),
    ("private_selection", "selection_unrepeated"),
    ("selection_scores", "score_noise_per_accuracy"),
    ("dpsgdf", "mean_of_sum"),
    ("dpsgdf_fit", "mean_of_sum"),
    ("dpsgdf_fit", "mean_noiseless"),
    ("corrdp_points", "corrdp_factors_halved"),
    ("corrdp_points", "noise_0.7x"),
)


PROFILES = {
    "smoke": Profile(
        1_000,
        1_000,
        1_000,
        200,
        (2.0,),
        (0.25,),
        ("dp_gd", "dp_sgd_iteration"),
        catalogue=(("dp_gd", "clip_2c"),),
        runs_catalogue=1_000,
    ),
    "quick": Profile(
        20_000,
        60_000,
        100_000,
        2_000,
        EPSILONS,
        PIPELINE_EPSILONS,
        ("dp_gd", "dp_sgd_poisson", "dp_sgd_shuffle", "dp_sgd_iteration"),
        catalogue=CATALOGUE,
        # 15 audited (learner, threat model) pairs × 3 ε × 5 seeds = 225 honest audits: the
        # false-alarm rates of alarms.md
        honest_seeds=(0, 1, 2, 3, 4),
    ),
    "paper": Profile(
        100_000,
        300_000,
        300_000,
        10_000,
        EPSILONS,
        PIPELINE_EPSILONS,
        ("dp_gd", "dp_sgd_poisson", "dp_sgd_shuffle", "dp_sgd_iteration"),
        catalogue=CATALOGUE,
        runs_catalogue=100_000,
        honest_seeds=(0, 1),
    ),
}
