"""The experiments' infrastructure: resumable units, provenance, progress and paper comparisons.

Every experiment writes through this package so that (i) an interrupted run never leaves a
half-written file (:mod:`.output`), (ii) a re-run skips units of work already finished by the same
code (:mod:`.store`, keyed through :mod:`.identity`), and (iii) every result row records the
seed, config and provenance (source digest, package versions, time) of the computation that
produced it. :mod:`.progress` draws the bar, :mod:`.report` holds the paper-vs-ours rows and
:mod:`.sweep_units` runs grids of ``dpprep.sweeps`` groups as units. :mod:`.calibrations` is the
on-disk cache of noise calibrations that the runner installs around each experiment; it is not
re-exported here, so that only the runner imports it: every value it serves is verified by the
accountant, so like the runner it decides no unit's value and stays out of the units' digest.
"""

from dpprep.files import atomic_write_bytes, atomic_write_text
from experiments.results.output import save_figure, write_csv
from experiments.results.progress import Progress
from experiments.results.identity import (
    NOT_KEYED,
    code_identity,
    config_json,
    data_identity,
    experiment_digest,
    experiment_sources,
    module_file,
    package_versions,
    provenance,
    provenance_json,
    source_digest,
    tree_digest,
)
from experiments.results.report import Comparison, comparisons_frame, pair_rows
from experiments.results.store import (
    CorruptUnit,
    MissingUnits,
    UnitsElsewhere,
    UnitStore,
    parse_shard,
    read_unit,
)
from experiments.results.sweep_units import SweepUnit, group_cost, run_groups

__all__ = [
    "NOT_KEYED",
    "Comparison",
    "CorruptUnit",
    "MissingUnits",
    "Progress",
    "SweepUnit",
    "UnitStore",
    "UnitsElsewhere",
    "atomic_write_bytes",
    "atomic_write_text",
    "code_identity",
    "comparisons_frame",
    "config_json",
    "data_identity",
    "experiment_digest",
    "experiment_sources",
    "group_cost",
    "module_file",
    "package_versions",
    "pair_rows",
    "parse_shard",
    "provenance",
    "provenance_json",
    "read_unit",
    "run_groups",
    "save_figure",
    "source_digest",
    "tree_digest",
    "write_csv",
]
