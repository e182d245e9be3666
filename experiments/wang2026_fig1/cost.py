"""The cost model of ``wang2026_fig1`` for ``run_all --plan`` and ``--validate``: a pure function of
the profile that reads the experiment's own grid. It never feeds a unit (outside the units'
digest).
"""

from __future__ import annotations


from experiments.planning.flops import Cost, corrdp_runs_flops, corrdp_panels, CORRDP_BASIS


def cost(profile: str) -> Cost:
    """Every (panel, C) unit of :data:`experiments.wang2026_fig1.ALL_PANELS` and the 4 mechanism
    units (Standard and CorrDP at one ε and C, per network panel and its plain-SGD variant)."""
    from experiments.wang2026_fig1 import ALL_PANELS, PANELS, PROFILES, VARIANT_OF, VARIANTS

    p = PROFILES[profile]
    units, flops, exact = corrdp_panels(list(ALL_PANELS.values()), p, {"a"})
    for variant, base in VARIANT_OF.items():
        for panel in (PANELS[base], VARIANTS[variant]):
            flops += corrdp_runs_flops(
                panel, 2 * p.seeds[panel.key], max(1, round(panel.steps * p.step_fraction))
            )
            units += 1
    bound = "" if exact else " (≤: a GLM's C_theory, read from its data, counted as distinct)"
    return Cost(
        units,
        flops,
        None,
        floor=True,
        basis=(
            "analytic: Σ (panel, C) units seeds × (3 methods × ε [+ population CorrDP on a]) runs"
            f" × T × per example-step FLOPs, + GLM references, + 4 mechanism units; {CORRDP_BASIS};"
            f" shapes CORRDP_SHAPES{bound}; the network panels and the 10-row OLS sketch (tiny"
            " steps: per-step overhead, compilation) run far below the GLM-sweep rate"
        ),
    )
