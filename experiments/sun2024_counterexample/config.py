"""Sun, Suresh & Menon (2024) §4's counter-example: the grids of E1 (Algorithm 1 as printed) and
E2 (DPSGD vs DPSGD-F vs an Algorithm-3-like arm) per profile (spec §3.5; the acceptance
thresholds are in ``targets.csv``)."""

from __future__ import annotations

import dataclasses

from dpprep.dpsgdf import theory as th

DELTA = 1e-5


@dataclasses.dataclass(frozen=True)
class Cfg:
    e1_n: tuple = (1000, 10000)
    e1_eps: tuple = (0.5, 1.0, 2.0)
    e1_mu: tuple = (1e2, 1e3, 1e4, 1e5)
    e1_lr: tuple = (0.01, 0.1, 1.0, 10.0)
    e1_T: tuple = (10, 100, 1000)
    e1_reps: int = 2000
    e2_n: tuple = (1000, 10000)
    e2_mu: tuple = (1e1, 1e2, 1e3, 1e4, 1e5, 1e6)
    e2_eps: tuple = (1.0,)
    e2_lr: tuple = (0.01, 0.1, 1.0, 10.0, 100.0)
    e2_T: tuple = (100, 1000)
    e2_q: tuple = (0.1, 1.0)
    e2_seeds: int = 20
    grid_points: int = th.GRID_POINTS


CFGS = {
    "smoke": Cfg(
        e1_n=(1000,),
        e1_eps=(1.0,),
        e1_mu=(1e3,),
        e1_lr=(0.1,),
        e1_T=(10,),
        e1_reps=200,
        e2_n=(10000,),
        e2_mu=(1e4,),
        e2_lr=(1.0,),
        e2_T=(100,),
        e2_q=(1.0,),
        e2_seeds=3,
        grid_points=2001,
    ),
    "quick": Cfg(),
    "paper": Cfg(e2_n=(1000, 10000, 100000), e2_eps=(0.5, 1.0, 2.0), e2_T=(100, 1000, 10000)),
}
