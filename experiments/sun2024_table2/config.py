"""Sun, Suresh & Menon (2024) Table 2's settings: the datasets, the block size of the exact
diameter and the smoke profile's subsample (the paper's numbers are in ``targets.csv``)."""

from __future__ import annotations

# Table 2's rows, in the paper's order; cifar100_features runs only when the user supplies it.
DATASETS = ("mnist", "fashion_mnist", "cifar100_features")
# rows per Gram-matrix block of the exact diameter
BLOCK = 4096
# rows the diameter is taken over, per profile (absent: all of them); smoke keeps it to seconds
DIAM_ROWS = {"smoke": 4000}
