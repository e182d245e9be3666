"""Sun, Suresh, Menon (2024) Table 1's configuration: the profiles' grids and the constants.

The paper's §6.4 grid (C_F, B, η, E, ε_F; 10 runs per number) is the ``paper`` profile; ``quick``
and ``smoke`` are reduced grids. :class:`Grid` also fixes the search protocol (``full``: the
paper's; ``staged``: seed 0 first, then the top k at all seeds) and the C16 spread rerun's seeds;
:func:`grid_for` picks the protocol from the environment (:data:`SEARCH_ENV`).
"""

from __future__ import annotations

import dataclasses
import os


DELTA = 1e-5
DATASETS = ("mnist", "fashion_mnist", "cifar100_features")
LABEL = {"mnist": "MNIST", "fashion_mnist": "FMNIST", "cifar100_features": "CIFAR-100"}
SELECTION_RULE = (
    "best mean test accuracy (last iterate) over all seeds of the profile, over the whole grid; std"
    " ddof=1"
)


SEARCHES = ("full", "staged")
#: Environment variable that switches any profile to a search protocol (``full`` or ``staged``)
#: without a new profile: ``DPPREP_SUN2024_TABLE1_SEARCH=staged run_all.py --profile paper``.
SEARCH_ENV = "DPPREP_SUN2024_TABLE1_SEARCH"


@dataclasses.dataclass(frozen=True)
class Grid:
    datasets: tuple[str, ...]
    epsilons: tuple[float, ...]
    seeds: int
    private_groups: tuple[tuple[int, float], ...]  # (B, E)
    feature_norms: tuple[float, ...]
    learning_rates: tuple[float, ...]
    eps_fs: tuple[float, ...]
    np_groups: tuple[tuple[int, float], ...]
    np_feature_norms: tuple[float, ...]
    np_learning_rates: tuple[float, ...]
    sensitivity_seeds: int = 0  # 0: no A15 sensitivity variants
    sens_learning_rates_raw: tuple[float, ...] = (0.125, 0.5, 2.0)
    subset: int | None = None
    matmul_precision: str | None = None
    memory_budget: float = 2 * 2**30
    search: str = "full"  # "full": every configuration at every seed; "staged": see run_grid
    top_k: int = 5  # staged search: configurations per (dataset, ε, method) rerun at all seeds
    # C16: the selected configurations rerun at this many seeds for the spread test (spread_units);
    # at most ``seeds`` (0 included): no rerun, the spread is the search's own seeds'.
    spread_seeds: int = 0

    def __post_init__(self) -> None:
        if self.search not in SEARCHES:
            raise ValueError(f"search must be one of {SEARCHES}, got {self.search!r}")
        if not (isinstance(self.top_k, int) and self.top_k >= 1):
            raise ValueError(f"top_k must be an integer >= 1, got {self.top_k!r}")
        if not (isinstance(self.spread_seeds, int) and self.spread_seeds >= 0):
            raise ValueError(f"spread_seeds must be an integer >= 0, got {self.spread_seeds!r}")

    @property
    def rerun_spread(self) -> bool:
        """Whether the selected configurations are rerun at ``spread_seeds`` seeds (more than the
        search's)."""
        return self.spread_seeds > self.seeds


PAPER_B = (256, 512, 1024, 2048, 4096, 8192, 16384)
PAPER_E = (20, 40, 80, 160, 320)
#: Runs per Table 1 number in the paper ("an average over 10 independent runs"): its s.d.s are
#: 10-run ones.
PAPER_SEEDS = 10
PAPER_LR = (0.03125, 0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
GRIDS = {
    "smoke": Grid(
        ("mnist",),
        (1.0,),
        2,
        ((512, 1),),
        (10.0,),
        (1.0,),
        (0.05,),
        ((512, 1),),
        (1.0,),
        (2.0,),
        subset=3000,
        top_k=1,
    ),
    "quick": Grid(
        ("mnist", "fashion_mnist", "cifar100_features"),
        (1.0, 2.0),
        3,
        ((4096, 40),),
        (10.0, 100.0),
        (0.5, 2.0),
        (0.02, 0.05),
        ((1024, 80),),
        (10.0,),
        (0.0625, 0.25, 1.0),
        sensitivity_seeds=2,
        top_k=2,
        spread_seeds=PAPER_SEEDS,
    ),
    "paper": Grid(
        DATASETS,
        (1.0, 2.0),
        10,
        tuple((b, e) for b in PAPER_B for e in PAPER_E),
        (1.0, 10.0, 100.0, 1000.0),
        PAPER_LR,
        (0.02, 0.05, 0.1, 0.15, 0.2),
        tuple((b, e) for b in PAPER_B for e in PAPER_E),
        (1.0, 10.0, 100.0, 1000.0),
        PAPER_LR,
        sensitivity_seeds=0,
        matmul_precision="float32",
        memory_budget=16 * 2**30,
        spread_seeds=PAPER_SEEDS,
    ),
}


CONFIG = [
    "B",
    "E",
    "C_F",
    "lr",
    "eps_F",
]  # what a configuration is, within (dataset, variant, method, ε)
CELL = ["dataset", "variant", "method", "epsilon"]  # what selection picks one configuration for


NAMES = {
    "dpsgd": "DPSGD",
    "dpsgdf": "DPSGD-F",
    "nonprivate": "non-private SGD",
}  # the paper's names


def grid_for(profile: str, search: str | None = None) -> Grid:
    """The grid of ``profile`` under ``search`` (``"full"`` or ``"staged"``; default: the
    environment variable :data:`SEARCH_ENV` if set, else the profile's own, ``"full"``)."""
    grid = GRIDS[profile]
    search = search or os.environ.get(SEARCH_ENV) or grid.search
    return dataclasses.replace(grid, search=search)
