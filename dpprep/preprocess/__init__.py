"""Hu, Sanyal & Schölkopf (ICML 2024), *Provable Privacy with Non-Private Pre-Processing*: the
pre-processing steps with their sensitivities (this package's top level), the overall privacy of
a private learner run on pre-processed data (:mod:`dpprep.preprocess.privacy`), PTR
(:mod:`dpprep.preprocess.ptr`, their Algorithm 1) and the DP-PCA of Figure 3
(:mod:`dpprep.preprocess.dp_pca`).

Every pre-processing function takes a dataset with rows in the unit L2 ball
(``scale_into_unit_ball`` /
``project_to_unit_ball`` get there without looking at the data), returns the processed data and
the data-dependent quantities its sensitivity needs, and a ``.sensitivity``
(``dpprep.preprocess.Sensitivity``: ``linf`` = Δ∞, ``l2`` = Δ2, ``tau`` = Δ2·Δ∞) ready for
``dpprep.preprocess.privacy.meta.overall_privacy``:

- ``deduplicate(x, eta)`` / ``quantize(x, eta)`` — η-approximate deduplication / quantization over
  good clusters (Prop. 3); removed records become zero (null) records, ``n`` stays fixed.
- ``impute_mean`` / ``impute_median`` / ``impute_trimmed_mean`` / ``impute_regression`` — NaN
  entries filled by a model of the observed data (Cor. 4, Prop. 15, Table 3).
- ``pca_reduce(x, k, mode="rank"|"dim")`` — PCA rank / dimension reduction (Prop. 5).
- ``Pipeline`` (``dpprep.preprocess.pipeline``) — chains of steps (e.g. impute → quantize → PCA)
  with their composed (Δ∞, Δ2), or a ValueError naming the pair of steps where no bound is known.

``dpprep.preprocess.sensitivity`` has the closed forms in terms of ``n``, ``p``, ``η`` and
eigen-gaps.

Importing this package loads only the pre-processing steps (NumPy); :mod:`.ptr` and :mod:`.dp_pca`
load JAX and the engine when imported.
"""

from typing import TYPE_CHECKING

from dpprep.renames import module_renames
from dpprep.preprocess.clusters import GoodClusters, good_clusters
from dpprep.preprocess.dedup import DedupResult, deduplicate
from dpprep.preprocess.impute import (
    ImputeResult,
    impute_mean,
    impute_median,
    impute_regression,
    impute_trimmed_mean,
)
from dpprep.preprocess.pca import PCAResult, pca_reduce, sign_normalize
from dpprep.preprocess.pipeline import Pipeline, PipelineResult, Step
from dpprep.preprocess.quantize import QuantizeResult, quantize
from dpprep.preprocess.sensitivity import Sensitivity
from dpprep.preprocess.unit_ball import check_unit_ball, project_to_unit_ball, scale_into_unit_ball

__all__ = [
    "Sensitivity",
    "GoodClusters",
    "good_clusters",
    "DedupResult",
    "deduplicate",
    "QuantizeResult",
    "quantize",
    "ImputeResult",
    "impute_mean",
    "impute_median",
    "impute_trimmed_mean",
    "impute_regression",
    "PCAResult",
    "pca_reduce",
    "sign_normalize",
    "Pipeline",
    "PipelineResult",
    "Step",
    "check_unit_ball",
    "project_to_unit_ball",
    "scale_into_unit_ball",
]


if not TYPE_CHECKING:  # old names, for users' code (they warn)
    __getattr__ = module_renames(globals(), {"sign_normalise": "sign_normalize"})
