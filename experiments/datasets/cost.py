"""The cost model of ``datasets`` for ``run_all --plan`` and ``--validate``: accounting work,
seconds at any profile. It never feeds a unit (outside the units' digest).
"""

from __future__ import annotations

from experiments.planning.flops import Cost, accounting_only


def cost(profile: str) -> Cost:
    """Seconds at every profile: loads and summarises each dataset."""
    return accounting_only(None, "loads and summarises each dataset")
