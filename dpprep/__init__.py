"""dpprep: differentially private learning where pre-processing is part of the privacy story.

The core is model-agnostic and small (the papers' modules extend it):

* :func:`clipped_grad` — the sum of per-example gradients clipped to ``C``, for any loss over any
  batch pytree (``has_aux``, a per-example PRNG key, state passed through);
* :func:`gaussian_privatizer` — the Gaussian noise on that sum as an optax transformation;
* :func:`dp_step` — one private update composing them (call it from your own loop);
* :class:`ExecutionPlan` — a run's sampler, steps and batch layout, its ``dp_event`` and the
  calibration ``plan.calibrate(ε, δ)``;
* :func:`train` / :func:`sweep_points` / :func:`sweep` — drivers over the step: a jitted scan,
  and seeds × hyperparameter points as one compiled, vmapped call;
* :mod:`dpprep.frameworks` — flax.nnx, flax.linen, equinox and ``(init, apply)`` models;
  :mod:`dpprep.models` — dpprep's own GLMs (with the fast clipping path) and MLPs.
"""

from dpprep import frameworks, models, sampling, streams
from dpprep.algorithms import Hyper, TrainConfig, make_plan, train
from dpprep.clipping import ClippedGrad, clipped_grad
from dpprep.noise import gaussian_privatizer
from dpprep.plan import ExecutionPlan
from dpprep.step import dp_step
from dpprep.sweeps import sweep, sweep_points

__version__ = "0.1.0"

__all__ = [
    "ClippedGrad",
    "ExecutionPlan",
    "Hyper",
    "TrainConfig",
    "clipped_grad",
    "dp_step",
    "frameworks",
    "gaussian_privatizer",
    "make_plan",
    "models",
    "sampling",
    "streams",
    "sweep",
    "sweep_points",
    "train",
]
