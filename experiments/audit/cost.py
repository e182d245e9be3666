"""The cost model of ``audit`` for ``run_all --plan`` and ``--validate``: a pure function of the
profile that reads the experiment's own grid. It never feeds a unit (outside the units' digest).
"""

from __future__ import annotations


from experiments.planning.flops import Cost, glm_flops


def cost(profile: str) -> Cost:
    """Every audit of :func:`experiments.audit.configs`: 2 worlds × (runs + pilot runs) × the
    examples one run passes (steps × batch, or epochs × n) × 6·(dim + 1) (a 1-output GLM; the
    canary adds a feature). Learners' own overheads (imputation, CorrDP factors) not counted."""
    from experiments.audit import PROFILES, configs

    plan = configs(PROFILES[profile])
    flops = 0.0
    for _, cfg in plan:
        per_run = (cfg.steps * (cfg.batch_size or cfg.n) if cfg.steps else 0) + (
            cfg.epochs or 0
        ) * cfg.n
        flops += glm_flops(cfg.dim + 1, 1, 2 * (cfg.runs + cfg.pilot_runs) * per_run)
    return Cost(
        len(plan),
        flops,
        None,
        floor=True,
        basis=(
            "analytic approx: Σ audits 2 worlds × (runs + pilot) × examples/run × (6(dim+1) + 8)"
            " (tiny models: per-run overheads, not counted, dominate); peak not estimated (runs go"
            " in vmapped chunks)"
        ),
    )
