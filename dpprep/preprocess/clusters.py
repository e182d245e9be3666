"""Good clusters (Hu et al. 2024, §4.1 / App. C.1), shared by deduplication and quantization.

``x`` is the *center of a good cluster* iff ``B(x, η; S) = B(x, 3η; S)`` — no point of ``S`` at
distance in ``(η, 3η]``. Two good clusters are identical or disjoint (a consequence of the
definition that the paper does not state), so the good clusters partition the clustered points and
are computed once, on the input dataset.

Representative [our choice; the paper keeps "the center" of each good cluster without saying which
one]: the smallest-index member that lies within η of every member. Every center qualifies, so a
representative exists; unlike "the smallest-index center", the choice depends only on the cluster's
member set, so a neighbour that leaves a cluster's members unchanged (e.g. a new point within 3η
of one of its centers but not of another) cannot change its representative.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.spatial import cKDTree

from dpprep.preprocess.unit_ball import check_unit_ball
from dpprep.validation import check_positive


@dataclasses.dataclass(frozen=True, eq=False)
class GoodClusters:
    """The good-cluster partition of one dataset.

    ``cluster_id[i]``: id of the good cluster holding row ``i`` (its smallest member index) or -1;
    ``representative[i]``: index of that cluster's representative or -1; ``is_center[i]``: whether
    row ``i`` is a center of a good cluster; ``sizes``: cluster id -> number of members.
    """

    eta: float
    cluster_id: np.ndarray
    representative: np.ndarray
    is_center: np.ndarray
    sizes: dict[int, int]

    @property
    def max_size(self) -> int:
        """Largest good-cluster size (0 when no point is in a good cluster)."""
        return max(self.sizes.values(), default=0)

    @property
    def in_cluster(self) -> np.ndarray:
        return self.cluster_id >= 0


def good_clusters(x, eta: float) -> GoodClusters:
    """Finds every good cluster of the rows of ``x`` (unit-ball rows) at radius ``eta``."""
    eta = check_positive(eta, "eta")
    arr = check_unit_ball(x, "x")
    n = arr.shape[0]
    tree = cKDTree(arr)
    count_1 = np.asarray(tree.query_ball_point(arr, eta, return_length=True), dtype=np.int64)
    count_3 = np.asarray(tree.query_ball_point(arr, 3.0 * eta, return_length=True), dtype=np.int64)
    is_center = count_1 == count_3

    cluster_id = np.full(n, -1, dtype=np.int64)
    representative = np.full(n, -1, dtype=np.int64)
    sizes: dict[int, int] = {}
    singles = np.flatnonzero(is_center & (count_1 == 1))
    cluster_id[singles] = singles
    representative[singles] = singles
    sizes.update({int(i): 1 for i in singles})
    for c in np.flatnonzero(is_center & (count_1 > 1)):
        if cluster_id[c] >= 0:  # another center of the same cluster got there first
            continue
        members = np.sort(np.asarray(tree.query_ball_point(arr[c], eta), dtype=np.int64))
        key = int(members[0])
        # Members within η of all members are exactly those whose η-ball is the whole cluster
        # (non-members are > 2η from every member).
        rep = int(members[np.argmax(count_1[members] == members.size)])
        cluster_id[members] = key
        representative[members] = rep
        sizes[key] = int(members.size)
    return GoodClusters(float(eta), cluster_id, representative, is_center, sizes)
