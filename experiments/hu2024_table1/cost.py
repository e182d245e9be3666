"""The cost model of ``hu2024_table1`` for ``run_all --plan`` and ``--validate``: accounting work,
seconds at any profile. It never feeds a unit (outside the units' digest).
"""

from __future__ import annotations

from experiments.planning.flops import Cost, accounting_only


def cost(profile: str) -> Cost:
    """Seconds at every profile: closed form; every profile the same."""
    return accounting_only(None, "closed form; every profile the same")
