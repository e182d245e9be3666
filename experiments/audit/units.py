"""The audit's units: the plan of audits a profile runs, and what one unit computes.

Each unit is one :func:`dpprep.auditing.audit`, run through
:func:`experiments.audit.inject.audit_with_bug` (which plants a catalogue bug for the ``bug:<name>``
roles) and keyed on its role and its whole :class:`~dpprep.auditing.AuditConfig`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from dpprep.auditing import AuditConfig
from experiments import RunContext

from .bugs import BUGS
from .inject import audit_with_bug
from .config import DRIVER_PATHS, FINAL_MODEL_ONLY, SHAPES, Profile
from .paths import learner_of


def configs(profile: Profile) -> list[tuple[str, AuditConfig]]:
    """(role, config) of every audit: ``honest`` ones are held to their theoretical ε, ``broken``
    ones must be caught, and ``bug:<name>`` ones run the catalogue's bug ``<name>``."""
    out = []
    for path, shape in SHAPES.items():
        learner = learner_of(path)
        threats = ["final_model"] if learner in FINAL_MODEL_ONLY else ["white_box"]
        if learner in profile.final_model and learner not in FINAL_MODEL_ONLY:
            threats.append("final_model")
        if "threat_model" in shape:  # a driver path audited under one threat model
            threats = [shape["threat_model"]]
        eps_list = profile.pipeline_epsilons if learner == "impute_dp_gd" else profile.epsilons
        if path in DRIVER_PATHS:  # one ε: a driver's audit checks its path, not the accountant
            eps_list = eps_list[:1]
        for threat in threats:
            for eps in eps_list:
                runs = (
                    profile.runs_eps1_dp_gd
                    if (learner, threat, eps) == ("dp_gd", "white_box", 1.0)
                    else profile.runs
                )
                # Seeds beyond 0 repeat the honest audits for the false-alarm count only.
                for seed in profile.honest_seeds:
                    sizes = _sizes(shape, runs, profile.pilot_runs)
                    out.append(
                        ("honest", AuditConfig(learner, threat, epsilon=eps, seed=seed, **sizes))
                    )
    # Broken: the learner adds half the noise its accountant assumes. For Poisson only the
    # Clopper–Pearson bound is rigorous, and it needs ~1e5 runs per world to resolve the gap at ε =
    # 2.
    for learner, eps in (("dp_gd", 1.0), ("dp_sgd_poisson", 2.0)):
        out.append(
            (
                "broken",
                AuditConfig(
                    learner,
                    "white_box",
                    epsilon=eps,
                    runs=profile.runs_broken,
                    pilot_runs=profile.pilot_runs,
                    noise_factor=0.5,
                    **SHAPES[learner],
                ),
            )
        )
    for path, bug in profile.catalogue:
        if bug not in BUGS:
            raise ValueError(f"catalogue bug {bug!r} is unknown; available: {', '.join(BUGS)}")
        learner = learner_of(path)
        threat = "final_model" if learner in FINAL_MODEL_ONLY else "white_box"
        threat = SHAPES[path].get("threat_model", threat)
        eps = 0.25 if learner == "impute_dp_gd" else 1.0
        sizes = _sizes(SHAPES[path], profile.runs_catalogue, profile.pilot_runs)
        out.append((f"bug:{bug}", AuditConfig(learner, threat, epsilon=eps, **sizes)))
    return out


#: From these runs per world on (quick, paper) a shape's own run count holds; below (smoke) it
#: scales down.
_FULL_PROFILE_RUNS = 20_000


def _sizes(shape: dict[str, Any], runs: int, pilot_runs: int) -> dict[str, Any]:
    """A learner's audit sizes: the profile's run counts unless its shape sets its own (the
    selection's host loop), which a small profile scales down (smoke: a tenth of its runs)."""
    sizes = {"runs": runs, "pilot_runs": pilot_runs, **shape}
    sizes.pop("learner", None)
    sizes.pop("threat_model", None)  # the config's second argument
    if "runs" in shape and runs < _FULL_PROFILE_RUNS:
        sizes["runs"] = min(shape["runs"], runs // 10)
        # ≥ the 32 thresholds
        sizes["pilot_runs"] = max(32, min(shape["pilot_runs"], sizes["runs"] // 4))
        sizes["chunk"] = min(shape["chunk"], 2 * sizes["pilot_runs"])
    return sizes


def bug_of(role: str) -> str | None:
    """The catalogue bug of a unit's role (None for honest and broken units)."""
    return role.split(":", 1)[1] if role.startswith("bug:") else None


def unit_key(role: str, cfg: AuditConfig) -> str:
    """A unit's key: its role and its audit's whole config."""
    fields = dataclasses.asdict(cfg)
    return f"{role}:" + json.dumps(fields, sort_keys=True)


def run_unit(ctx: RunContext, cfg: AuditConfig, bug: str | None = None) -> dict:
    """One unit: the audit of ``cfg`` with catalogue bug ``bug`` planted (None: honest), as the
    result's row plus its bug."""
    result = audit_with_bug(bug, cfg, progress=ctx.progress)
    return {**result.row(), "bug": bug or ""}
