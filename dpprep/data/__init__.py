"""Real and synthetic datasets: ``load(name, data_dir=None)`` returns an immutable ``Dataset``.

Names: ``mnist``, ``fashion_mnist``, ``adult``, ``sepsis``, ``credit_default``, ``insurance``,
``cifar100_features``; synthetic sets live in ``dpprep.data.synthetic`` (``corrdp_synthetic``).

A ``Dataset`` holds read-only numpy arrays ``x_train, y_train, x_test, y_test`` (float32 features;
int32 class ids for classification, float32 targets for regression; the test arrays have 0 rows
where a dataset has no split — adult, sepsis, credit_default and insurance — and
``dataset.with_test_split(0.2, seed=0)`` makes one; evaluating on 0 rows is refused, not NaN),
``feature_names`` (encoded columns), ``task``
("classification"/"regression"), ``num_classes`` (None for regression), ``feature_groups`` (raw
feature -> the encoded column indices it produced; every column in exactly one group, so one-hot
levels can be treated together) and ``feature_types`` (raw feature -> "continuous"/"discrete").

Where files come from
---------------------
A dataset's files are ``<dir>/<dataset>/<file>`` (the layout of the offline copy, e.g.
``mnist/train-images-idx3-ubyte.gz``). Each is looked up in, in order:

1. the ``data_dir`` argument;
2. ``$DPPREP_DATA_DIR``;
3. the cache, ``$DPPREP_CACHE_DIR`` (default ``~/.cache/dpprep``).

A file found nowhere is downloaded from its canonical URL into the cache (urllib; streamed to a
temporary file, verified, then renamed into place). ``download=False`` or ``DPPREP_NO_DOWNLOAD=1``
turn downloads off. Every file's sha256 is checked on load (``verify=True``; a mismatch raises
``ChecksumError`` naming the expected and actual value; the table is embedded in
``dpprep.data.registry``). For the gzip'd IDX files the checksum is of the decompressed content.
A file that does not parse as its dataset (e.g. another file read with ``verify=False``) raises
``DataFormatError`` naming it.
The sepsis CSVs come out of the UCI zip; the credit CSV out of the .xls inside the UCI zip, which
needs the optional ``xlrd`` package. ``python -m dpprep.data fetch [NAMES]`` downloads missing
files into the cache; ``python -m dpprep.data verify [--data-dir D]`` checks every file present.

Preprocessing
-------------
* ``mnist``, ``fashion_mnist``: 60,000 train / 10,000 test, 784 pixels (row-major) scaled to
  [0, 1] by /255; labels 0..9.
* ``adult`` (CorrDP, Wang et al. 2026, §5.2): adult.data + adult.test (first line skipped, label
  dots stripped,
  ``skipinitialspace``), rows with '?' in any of the 15 columns dropped, then exact duplicate rows
  dropped: 45,175 rows. 9 raw features (Kaggle names) in file order: age, workclass, fnlwgt,
  educational-num, marital-status, relationship, race, gender, hours-per-week. Discrete ones are
  fully one-hot (levels sorted, none dropped, columns ``<feature>_<level>``), continuous ones
  MinMax-scaled to [0, 1]: 31 columns. Label income >50K -> 1 (rate 0.2480). No split: all rows
  are in x_train (the paper's protocol is ERM on the training data).
* ``sepsis``: UCI 827 primary cohort, 110,204 rows; features age_years, sex_0male_1female,
  episode_number as raw (unscaled) values; label hospital_outcome_1alive_0dead (1 = survived,
  92.65%). No split. (CorrDP's SMOTENC rebalancing and scaling: ``dpprep.corrdp.data``.)
* ``credit_default``: UCI 350, 30,000 rows; the 23 raw features X1..X23 (ID dropped) named
  LIMIT_BAL, SEX, EDUCATION, MARRIAGE, AGE, PAY_0, PAY_2..PAY_6, BILL_AMT1..6, PAY_AMT1..6,
  unscaled and not one-hot; label Y = default next month (22.12%). No split.
* ``insurance`` (Medical Cost): 1,338 rows, the duplicate dropped -> 1,337; age, bmi, children raw;
  sex, smoker, region one-hot with the first (alphabetical) level dropped -> 8 columns age, bmi,
  children, sex_male, smoker_yes, region_northwest, region_southeast, region_southwest; regression
  target charges. No split.
* ``cifar100_features``: user-provided pre-computed features (e.g. the penultimate layer of an
  ImageNet-pretrained WRN-28-10, 640-d, as in Sun et al. 2024), file
  ``<dir>/cifar100_features/features.npz`` written by ``numpy.savez`` with arrays ``x_train``
  (n_train, d) float, ``y_train`` (n_train,) int in 0..99, ``x_test`` (n_test, d), ``y_test``
  (n_test,). Features are cast to float32 and not otherwise changed; no checksum, no download.
"""

from dpprep.data.download import (
    ChecksumError,
    DataFormatError,
    DataNotFoundError,
    cache_dir,
    search_dirs,
)
from dpprep.data.loaders import Dataset, load, load_features_npz
from dpprep.data.registry import DATASETS

__all__ = [
    "DATASETS",
    "ChecksumError",
    "DataFormatError",
    "DataNotFoundError",
    "Dataset",
    "cache_dir",
    "load",
    "load_features_npz",
    "search_dirs",
]
