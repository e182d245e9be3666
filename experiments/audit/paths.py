"""The audits through dpprep's public drivers: each path a driver and the options a user sets, and
how an audit's config names its path."""

from __future__ import annotations

from typing import Any

#: Audits through the public drivers (dpprep.auditing.DRIVERS), by path name: the driver
#: (``learner``) and the options a user sets, the canary inserted into the data the driver is
#: given. ``train`` and ``fit`` run one call per run (host checks included, ~5 ms each), so they
#: get fewer runs; ``dp_step`` in the user's loop and ``sweep_points`` run a chunk at once.
DRIVER_PATHS: dict[str, dict[str, Any]] = {
    # Poisson DP-SGD: three leaves, microbatches of 4, calls of 7 steps (25 = 3·7 + 4), SGD at η 4
    "train_options": {
        "learner": "train",
        "epochs": 5,
        "batch_size": 20,
        "leaves": 3,
        "microbatch_size": 4,
        "steps_per_call": 7,
        "learning_rate": 4.0,
        "runs": 5_000,
        "pilot_runs": 500,
        "chunk": 1_000,
    },
    # DP-GD through fit (fit makes the plan)
    "fit_full": {
        "learner": "fit",
        "sampling": "full",
        "steps": 10,
        "runs": 5_000,
        "pilot_runs": 500,
        "chunk": 1_000,
    },
    "dp_step_microbatch": {
        "learner": "dp_step",
        "epochs": 5,
        "batch_size": 20,
        "microbatch_size": 4,
    },
    "dp_step_full_leaves": {"learner": "dp_step", "sampling": "full", "steps": 10, "leaves": 3},
    # shuffled batches, each run a seed of the sweep, SGD at η 4
    "sweep_points_shuffle": {
        "learner": "sweep_points",
        "sampling": "shuffle",
        "epochs": 5,
        "batch_size": 20,
        "learning_rate": 4.0,
        "runs": 10_000,
        "pilot_runs": 1_000,
        "chunk": 2_000,
    },
    # a replace-one plan: the canary against its opposite (the worlds' sums differ by 2C)
    "dp_step_replace_one": {
        "learner": "dp_step",
        "epochs": 5,
        "batch_size": 20,
        "neighboring_relation": "replace_one",
    },
    # DPSGD-F through dpsgdf.fit, one call per run (~20 ms each: its checks, normalisation,
    # private mean, plan and run)
    "dpsgdf_fit": {
        "learner": "dpsgdf_fit",
        "epochs": 5,
        "batch_size": 20,
        "runs": 2_000,
        "pilot_runs": 200,
        "chunk": 500,
    },
    # DP-GD's last iterate alone (the final-model threat model), with SGD and with Adam at η 0.1
    "dp_step_full_final": {
        "learner": "dp_step",
        "threat_model": "final_model",
        "sampling": "full",
        "steps": 10,
    },
    # a stochastic model (example dropout at p = 0.1): train through the engine's keyed path
    # (the step key split per example by a Model's clipping), dp_step with a loss taking the key
    "train_dropout": {
        "learner": "train",
        "sampling": "full",
        "steps": 10,
        "dropout": 0.1,
        "runs": 5_000,
        "pilot_runs": 500,
        "chunk": 1_000,
    },
    "dp_step_dropout": {
        "learner": "dp_step",
        "epochs": 5,
        "batch_size": 20,
        "leaves": 3,
        "dropout": 0.1,
    },
    "dp_step_adam_final": {
        "learner": "dp_step",
        "threat_model": "final_model",
        "sampling": "full",
        "steps": 10,
        "optimizer": "adam",
        "learning_rate": 0.1,
    },
}
#: Each driver path's title in the report.
DRIVER_TITLES = {
    "train_options": "train(): Poisson, 3 leaves, microbatches, steps_per_call 7, η 4",
    "fit_full": "fit(): DP-GD",
    "dp_step_microbatch": "dp_step loop: Poisson, microbatches",
    "dp_step_full_leaves": "dp_step loop: DP-GD, 3 leaves",
    "sweep_points_shuffle": "sweep_points(): shuffled, η 4",
    "dp_step_replace_one": "dp_step loop: Poisson, replace-one plan",
    "dp_step_full_final": "dp_step loop: DP-GD, last iterate only",
    "dpsgdf_fit": "dpsgdf.fit(): DPSGD-F end to end",
    "dp_step_adam_final": "dp_step loop: DP-GD with Adam η 0.1, last iterate only",
    "train_dropout": "train(): DP-GD, dropout 0.1",
    "dp_step_dropout": "dp_step loop: Poisson, 3 leaves, dropout 0.1",
}
#: The options that tell two audits of one driver apart (:func:`path_of`).
_PATH_OPTIONS = (
    "sampling",
    "microbatch_size",
    "steps_per_call",
    "leaves",
    "learning_rate",
    "neighboring_relation",
    "optimizer",
    "dropout",
    "threat_model",
)


def learner_of(path: str) -> str:
    """The registered learner a path audits (a driver path's driver, else the path itself)."""
    return str(DRIVER_PATHS.get(path, {}).get("learner", path))


def path_of(cfg: Any) -> str:
    """The path of :data:`SHAPES` an :class:`~dpprep.auditing.AuditConfig` audits: its learner,
    or for a driver the :data:`DRIVER_PATHS` entry whose options it has."""
    for name, shape in DRIVER_PATHS.items():
        if shape["learner"] == cfg.learner and all(
            getattr(cfg, option) == shape.get(option, _DEFAULTS[option]) for option in _PATH_OPTIONS
        ):
            return name
    return str(cfg.learner)


_DEFAULTS = {
    "sampling": "poisson",
    "microbatch_size": None,
    "steps_per_call": None,
    "leaves": 1,
    "learning_rate": 1.0,
    "neighboring_relation": "add_remove",
    "optimizer": "sgd",
    "dropout": 0.0,
    "threat_model": "white_box",
}
