"""The cost model of ``hu2024_fig2`` for ``run_all --plan`` and ``--validate``: a pure function of
the profile that reads the experiment's own grid. It never feeds a unit (outside the units'
digest).
"""

from __future__ import annotations


from experiments.planning.flops import Cost, accounting_only


def cost(profile: str) -> Cost:
    from experiments.hu2024_fig2 import PROFILE_GRID_POINTS

    return accounting_only(
        None, f"closed-form SRDP vs group privacy, {PROFILE_GRID_POINTS[profile]} grid points"
    )
