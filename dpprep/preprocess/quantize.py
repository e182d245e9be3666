"""η-quantization ``π_η^q`` (Hu et al. 2024, §4.1, Prop. 3).

Every member of a good cluster is replaced by the cluster's representative (a member within η of
all members, see ``dpprep.preprocess.clusters``); other points are unchanged. Each record moves by
at most η.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dpprep.preprocess.clusters import GoodClusters, good_clusters
from dpprep.preprocess.sensitivity import Sensitivity, quantization_sensitivity


@dataclasses.dataclass(frozen=True, eq=False)
class QuantizeResult:
    """Output of ``quantize``.

    ``data``: quantized rows; ``changed_mask``: rows moved to a different point;
    ``max_cluster_size`` and ``p = 2 · max_cluster_size`` as for deduplication (Prop. 3; same
    caveat about crafted neighbours, see ``DedupResult``); ``sensitivity = (p, η)`` or ``(p, 2η)``
    with ``conservative`` (default): a common record whose cluster representative differs between
    the two neighbours moves by up to 2η (a case the proof of Prop. 3 does not cover).
    """

    data: np.ndarray
    changed_mask: np.ndarray
    clusters: GoodClusters
    max_cluster_size: int
    p: int
    eta: float
    conservative: bool
    sensitivity: Sensitivity


def quantize(x, eta: float, *, conservative: bool = True) -> QuantizeResult:
    """Snaps every good-cluster member of the unit-ball rows of ``x`` to its representative."""
    clusters = good_clusters(x, eta)
    arr = np.asarray(x, dtype=np.float64)
    source = np.where(clusters.in_cluster, clusters.representative, np.arange(arr.shape[0]))
    data = arr[source]
    changed = np.any(data != arr, axis=1)
    size = max(clusters.max_size, 1)
    p = 2 * size
    sens = quantization_sensitivity(p, clusters.eta, conservative=conservative)
    return QuantizeResult(data, changed, clusters, size, p, clusters.eta, bool(conservative), sens)
