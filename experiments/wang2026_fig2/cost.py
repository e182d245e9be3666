"""The cost model of ``wang2026_fig2`` for ``run_all --plan`` and ``--validate``: a pure function of
the profile that reads the experiment's own grid. It never feeds a unit (outside the units'
digest).
"""

from __future__ import annotations


from experiments.planning.flops import Cost, corrdp_dims, corrdp_panels


def cost(profile: str) -> Cost:
    from experiments.wang2026_fig2 import panels, profile_for

    pns = panels()
    units, flops, _ = corrdp_panels(pns, profile_for(profile), {pn.key for pn in pns})
    n, d = corrdp_dims(pns[0])
    return Cost(
        units,
        flops,
        None,
        basis=(
            "analytic: one synthetic ridge unit per m_s: seeds × 4 methods × ε runs × T × (4d + 5)"
            f" on the d + 1 = {d + 1} sketch rows (n = {n}), + the non-private and Partial"
            " references and in-sample scoring"
        ),
    )
