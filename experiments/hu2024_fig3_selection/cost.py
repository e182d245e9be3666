"""The cost model of ``hu2024_fig3_selection`` for ``run_all --plan`` and ``--validate``: a pure
function of the profile that reads the experiment's own grid. It never feeds a unit (outside the
units' digest).
"""

from __future__ import annotations


from experiments.planning.flops import GIB, Cost, glm_flops


def cost(profile: str) -> Cost:
    from experiments.hu2024_fig3_selection import PROFILES

    cfg = PROFILES[profile].fig3
    flops = 0.0
    for n, d in cfg.cases:
        runs = len(cfg.epsilons) * cfg.seeds * len(cfg.learning_rates)
        flops += glm_flops(d, 1, runs * cfg.steps * n) + glm_flops(d, 1, cfg.optimum_steps * n)
    peak = max(4 * 2 * n * d for n, d in cfg.cases) + 2 * GIB
    return Cost(
        len(cfg.cases),
        flops,
        peak,
        floor=True,
        basis=(
            "analytic: per case ε × seeds × η DP-GD runs × steps·n × (6d + 8) + θ* (calibrations"
            " and selection not counted); peak = data + sweep budget (est.)"
        ),
    )
