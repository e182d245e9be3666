"""dpprep: differentially private learning where pre-processing is part of the privacy story.

The core is model-agnostic and small (the papers' modules extend it):

* :class:`DPPlan` — the one owner of a run's guarantee: sampler, ``n``, batch size, steps, clip
  bound ``C``, noise (given, or calibrated once for a target ``(ε, δ)``), δ and the ε spent; it
  hands out the clipped-gradient function, the privatizer before an optimizer, the batches and
  the ``dp_event`` (:meth:`DPPlan.non_private` for a run that claims nothing);
* :func:`clipped_grad` — the sum of per-example gradients clipped to ``C``, for any loss over any
  batch pytree (``has_aux``, a per-example PRNG key, state passed through), or a model (with the
  GLM fast path);
* :func:`gaussian_privatizer` — the Gaussian noise on that sum as an optax transformation;
* :func:`dp_step` — one private update composing a plan's pieces (call it from your own loop);
* :func:`fit` — ask for ``(ε, δ)``, get a trained model and the ε spent, in one call;
* :func:`train` / :func:`sweep_points` / :func:`sweep` — drivers over the step: a jitted scan,
  and seeds × hyperparameter points as one compiled, vmapped call, each run's ε reported;
* :mod:`dpprep.frameworks` — flax.nnx, flax.linen, equinox and ``(init, apply)`` models;
  :mod:`dpprep.models` — dpprep's own GLMs (with the fast clipping path) and MLPs;
  :mod:`dpprep.optimizers` — standard optax optimizers by name, one object per configuration
  (equal configs then share a compilation), and the projection and iterate-averaging wrappers;
* :mod:`dpprep.extensions` — how a learner extends the step without the engine knowing it (own
  traced hyperparameters, model view, clipped sum, privatizer, update wrapper);
  :mod:`dpprep.features` — per-point feature transforms on one shared batch, an extension;
* :mod:`dpprep.selection` — private hyperparameter selection (a random number of candidates,
  noisy validation scores) and the end-to-end account of a whole procedure.

Each paper is a package that extends this core: :mod:`dpprep.preprocess` (Hu et al.:
pre-processing, its Smooth-RDP accounting, PTR, DP-PCA), :mod:`dpprep.dpsgdf` (Sun et al.) and
:mod:`dpprep.corrdp` (Wang et al.).
"""

import importlib
from typing import Any

__version__ = "0.1.0"

# Loaded on first use (PEP 562), so that ``import dpprep.data`` or ``dpprep.preprocess`` does not
# pull in JAX's engine and the accountant.
_EXPORTS = {
    "ClippedGrad": "dpprep.clipping",
    "DPPlan": "dpprep.plan",
    "ExecutionPlan": "dpprep.plan",
    "Hyper": "dpprep.algorithms",
    "TrainConfig": "dpprep.algorithms",
    "clipped_grad": "dpprep.clipping",
    "dp_step": "dpprep.step",
    "fit": "dpprep.algorithms",
    "gaussian_privatizer": "dpprep.noise",
    "sweep": "dpprep.sweeps",
    "sweep_points": "dpprep.sweeps",
    "train": "dpprep.algorithms",
}
_SUBMODULES = (
    "extensions",
    "features",
    "frameworks",
    "models",
    "optimizers",
    "sampling",
    "selection",
    "streams",
)

__all__ = sorted([*_EXPORTS, *_SUBMODULES])  # noqa: PLE0605 (sorted() returns a list)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"dpprep.{name}")
    raise AttributeError(f"module 'dpprep' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
