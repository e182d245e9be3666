"""Knowing a profile's cost before running it (``run_all --plan``) and checking that it runs
(``run_all --validate``), without computing or saving any unit of it.

**Plan** (:mod:`.plan`). Every experiment keeps its cost model beside it, in
``experiments/<id>/cost.py``: ``cost(profile)``, a pure function of the profile name that reads the
experiment's own grid (``PROFILES``/``GRIDS``), so the plan follows an edit to a profile and cannot
drift from it. It returns a :class:`~.flops.Cost`: units, an analytic FLOP count (or ``None`` where
no model exists yet), an estimated peak memory and the formula it used (a random number of
candidates, as in the private selections, enters at its mean). Cost models are outside the units'
digest (``experiments.results.NOT_KEYED``), so editing one leaves the experiment's cached units
valid. Shared counts and the dataset shapes the models need are in :mod:`.flops`
(:data:`~.flops.DATA_SHAPES`, :data:`~.flops.CORRDP_SHAPES`), checked against the loaders by the
tests. An experiment without a ``cost.py`` gets a "no cost model" row.

Time: FLOPs are turned into seconds by a rate MEASURED now on this machine — a softmax-regression
sweep through :func:`dpprep.sweeps.sweep_points` (the engine every GLM grid uses), counted with the
same 4dk + 2d + 8k FLOPs per example-step — and by the stated GPU rate (``--gpu-flops``). Both are
PROJECTIONS (every row says so); the CPU one assumes the experiment's kernels run at the measured
GLM-sweep rate, which favours work the engine does not batch (eigendecompositions, Python loops).

**Validate** (:mod:`.validate`). The experiment's own ``run(ctx)`` runs with a
:class:`~.validate.ValidateStore` in a throw-away directory: every grid unit that is a
:class:`experiments.results.SweepUnit` (every :func:`experiments.results.run_groups` unit) runs at
``max_steps`` steps, first chunk only, once per distinct compiled shape (:attr:`SweepUnit.shape`);
nothing is saved. The validation mode is passed explicitly: the store holds it and hands it to each
unit as arguments (no global state). Experiments that :func:`~.validate.runs_whole` calls short
(cheap, or projected under :data:`~.validate.CHEAP_SECONDS` by a count that is not a floor) run
whole instead when they have no sweep units (timed, not saved); the others say "not validated" and
why.
"""

from experiments.planning.flops import Cost, glm_flops
from experiments.planning.plan import (
    cost,
    measured_note,
    measured_sweep_rate,
    measured_units,
    plan_report,
    plan_rows,
)
from experiments.planning.validate import (
    NotValidated,
    ValidateStore,
    runs_whole,
    should_validate,
    summary_line,
    validate_experiment,
)

__all__ = [
    "Cost",
    "NotValidated",
    "ValidateStore",
    "cost",
    "glm_flops",
    "measured_note",
    "measured_sweep_rate",
    "measured_units",
    "plan_report",
    "plan_rows",
    "runs_whole",
    "should_validate",
    "summary_line",
    "validate_experiment",
]
