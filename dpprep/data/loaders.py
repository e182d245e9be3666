"""The ``Dataset`` container and one parser per real dataset (see ``dpprep.data`` for the
recipes)."""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import zipfile
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from dpprep.data import download as dl
from dpprep.data.registry import CIFAR100_FEATURES_RELPATH, DATASET_FILES, DATASETS, FILES_BY_PATH

TASKS = ("classification", "regression")
FEATURE_TYPES = ("continuous", "discrete")


def _readonly(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array)
    array.setflags(write=False)
    return array


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
    """An immutable dataset (numpy arrays are made read-only; the Dataset takes them over).

    ``x_*`` are float32 of shape (n, d); ``y_*`` are int32 class ids for classification and float32
    targets for regression. ``x_test``/``y_test`` have 0 rows where a dataset has no split.
    ``num_classes`` is None for regression. ``feature_groups`` maps each raw feature to the encoded
    columns it produced (one-hot levels share a group; every column is in exactly one group), and
    ``feature_types`` says whether a raw feature is "continuous" or "discrete". Datasets compare by
    identity (``==`` on arrays is elementwise); compare fields with numpy to test equality.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    feature_names: tuple[str, ...]
    task: str
    num_classes: int | None
    feature_groups: Mapping[str, tuple[int, ...]]
    feature_types: Mapping[str, str]
    label_name: str
    files: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        for field in ("x_train", "y_train", "x_test", "y_test"):
            object.__setattr__(self, field, _readonly(getattr(self, field)))
        object.__setattr__(self, "feature_names", tuple(self.feature_names))
        groups = {str(k): tuple(int(i) for i in v) for k, v in self.feature_groups.items()}
        object.__setattr__(self, "feature_groups", MappingProxyType(groups))
        object.__setattr__(self, "feature_types", MappingProxyType(dict(self.feature_types)))
        object.__setattr__(self, "files", tuple(str(f) for f in self.files))
        d = len(self.feature_names)
        for split in ("train", "test"):
            x, y = getattr(self, f"x_{split}"), getattr(self, f"y_{split}")
            if x.ndim != 2 or x.shape[1] != d or x.dtype != np.float32:
                raise ValueError(
                    f"x_{split} must be float32 of shape (n, {d}), got {x.dtype} {x.shape}"
                )
            if y.shape != (x.shape[0],):
                raise ValueError(f"y_{split} must have shape ({x.shape[0]},), got {y.shape}")
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        label_kind = "i" if self.task == "classification" else "f"
        for y in (self.y_train, self.y_test):
            if y.dtype.kind != label_kind:
                raise ValueError(
                    f"{self.task} labels must have dtype kind {label_kind!r}, got {y.dtype}"
                )
        if (self.task == "classification") != (self.num_classes is not None):
            raise ValueError(
                "num_classes must be an int for classification and None for regression"
            )
        columns = sorted(i for group in groups.values() for i in group)
        if columns != list(range(d)):
            raise ValueError("feature_groups must cover every column exactly once")
        if set(self.feature_types) != set(groups) or not set(self.feature_types.values()) <= set(
            FEATURE_TYPES
        ):
            raise ValueError(
                f"feature_types must map every feature group to one of {FEATURE_TYPES}"
            )

    @property
    def n_train(self) -> int:
        return int(self.x_train.shape[0])

    @property
    def n_test(self) -> int:
        return int(self.x_test.shape[0])

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    def with_test_split(self, test_fraction: float, *, seed: int) -> Dataset:
        """This data set with ``round(test_fraction · n_train)`` of its training rows, drawn
        uniformly at random (``numpy.random.default_rng(seed)``), moved to ``x_test``/``y_test``:
        for the data sets that come without a test split (adult, sepsis, credit_default,
        insurance: their ``x_test`` has 0 rows). A data set that has one is refused.

        >>> x, y = np.ones((100, 1), np.float32), np.arange(100) % 2
        >>> test = _empty(1, "classification")
        >>> ds = Dataset("toy", x, y, *test, ("a",), "classification", 2,
        ...              {"a": (0,)}, {"a": "continuous"}, "label")
        >>> split = ds.with_test_split(0.2, seed=0)
        >>> (split.n_train, split.n_test)
        (80, 20)
        """
        if self.n_test:
            raise ValueError(
                f"{self.name} has a test split already ({self.n_test} rows); with_test_split is "
                "for data sets without one"
            )
        if not 0.0 < float(test_fraction) < 1.0:
            raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
        n_test = round(float(test_fraction) * self.n_train)
        if not 0 < n_test < self.n_train:
            raise ValueError(
                f"test_fraction={test_fraction!r} of {self.n_train} rows leaves an empty split"
            )
        order = np.random.default_rng(seed).permutation(self.n_train)
        test, train = np.sort(order[:n_test]), np.sort(order[n_test:])
        return dataclasses.replace(
            self,
            x_train=self.x_train[train],
            y_train=self.y_train[train],
            x_test=self.x_train[test],
            y_test=self.y_train[test],
            description=(
                f"{self.description} Test split: {n_test} of {self.n_train} training rows "
                f"(with_test_split({test_fraction!r}, seed={seed!r}))."
            ).strip(),
        )

    @property
    def continuous_features(self) -> tuple[str, ...]:
        return tuple(k for k, v in self.feature_types.items() if v == "continuous")

    @property
    def discrete_features(self) -> tuple[str, ...]:
        return tuple(k for k, v in self.feature_types.items() if v == "discrete")


def _singleton_groups(names: list[str]) -> dict[str, tuple[int, ...]]:
    return {name: (i,) for i, name in enumerate(names)}


def _empty(d: int, task: str) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros((0, d), np.float32), np.zeros(
        (0,), np.int32 if task == "classification" else np.float32
    )


# --- MNIST / Fashion-MNIST ------------------------------------------------------------------------


def parse_idx(data: bytes) -> np.ndarray:
    """An IDX array of unsigned bytes (the MNIST format: magic 0x0000 08 <ndim>, big-endian
    dims)."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError("not an IDX file of unsigned bytes (bad magic number)")
    ndim = data[3]
    dims = tuple(int(v) for v in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    offset = 4 + 4 * ndim
    if len(data) - offset != int(np.prod(dims)):
        raise ValueError(
            f"IDX payload has {len(data) - offset} bytes, dims {dims} need {int(np.prod(dims))}"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=offset).reshape(dims)


def _load_idx_set(name: str, paths: dict[str, Path], verify: bool) -> Dataset:
    def read(stem: str) -> np.ndarray:
        relpath = f"{name}/{stem}.gz"
        raw = dl.read_verified(paths[relpath], FILES_BY_PATH[relpath], verify=verify)
        try:
            return parse_idx(raw)
        except ValueError as err:  # say which of the four files
            raise ValueError(f"{relpath}: {err}") from err

    def images(stem: str) -> np.ndarray:
        raw = read(stem)
        return (raw.reshape(raw.shape[0], -1).astype(np.float32)) / np.float32(255.0)

    x_train, x_test = images("train-images-idx3-ubyte"), images("t10k-images-idx3-ubyte")
    y_train = read("train-labels-idx1-ubyte").astype(np.int32)
    y_test = read("t10k-labels-idx1-ubyte").astype(np.int32)
    names = [f"pixel_{r}_{c}" for r in range(28) for c in range(28)]
    return Dataset(
        name,
        x_train,
        y_train,
        x_test,
        y_test,
        tuple(names),
        "classification",
        10,
        _singleton_groups(names),
        dict.fromkeys(names, "continuous"),
        "digit" if name == "mnist" else "clothing_class",
        tuple(str(p) for p in paths.values()),
        "28x28 grey images flattened row-major to 784 features in [0, 1] (pixel/255); labels 0..9",
    )


# --- Adult ----------------------------------------------------------------------------------------

ADULT_COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "educational-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "gender",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
)
# The 9 raw features CorrDP uses (Wang et al. 2026, App. E.2, Table 1), in file order, with their
# type.
ADULT_FEATURES = {
    "age": "continuous",
    "workclass": "discrete",
    "fnlwgt": "continuous",
    "educational-num": "continuous",
    "marital-status": "discrete",
    "relationship": "discrete",
    "race": "discrete",
    "gender": "discrete",
    "hours-per-week": "continuous",
}


def _read_adult_frame(data: bytes, skiprows: int, name: str = "adult") -> pd.DataFrame:
    frame = pd.read_csv(
        io.BytesIO(data),
        header=None,
        names=list(ADULT_COLUMNS),
        skipinitialspace=True,
        skiprows=skiprows,
        dtype=str,
        skip_blank_lines=True,
    )
    # A row of fewer than 15 fields would be dropped below as missing: the registered files have
    # none, so such a row means another file, which must not shrink the data set silently.
    short = frame.isna().any(axis=1).to_numpy()
    if short.any():
        line = int(np.argmax(short)) + skiprows + 1
        raise ValueError(
            f"{name}: {int(short.sum())} row(s) with fewer than {len(ADULT_COLUMNS)}"
            f" comma-separated fields (the first near line {line}); not an Adult file"
        )
    return frame


def adult_frame(data_bytes: bytes, test_bytes: bytes) -> pd.DataFrame:
    """adult.data + adult.test filtered to the 45,175 rows of Wang et al. 2026, §5.2 (15 raw string
    columns).

    Skips adult.test's first line, strips the label dots, drops rows with '?' anywhere, then drops
    exact duplicate rows (keeping the first).
    """
    frame = pd.concat(
        [
            _read_adult_frame(data_bytes, 0, "adult.data"),
            _read_adult_frame(test_bytes, 1, "adult.test"),
        ],
        ignore_index=True,
    )
    frame["income"] = frame["income"].str.rstrip(".")
    frame = frame[~(frame == "?").any(axis=1)].dropna()
    return frame.drop_duplicates(keep="first").reset_index(drop=True)


def encode_tabular(
    frame: pd.DataFrame, types: Mapping[str, str], *, drop_first: bool, minmax: bool
) -> tuple[np.ndarray, list[str], dict[str, tuple[int, ...]]]:
    """One-hot the discrete features (levels sorted; optionally dropping the first) and optionally
    MinMax-scale the continuous ones to [0, 1]; columns stay in the order of ``types``."""
    blocks: list[np.ndarray] = []
    names: list[str] = []
    groups: dict[str, tuple[int, ...]] = {}
    for feature, kind in types.items():
        if kind == "continuous":
            column = frame[feature].astype(np.float64).to_numpy()[:, None]
            if minmax:
                lo, hi = column.min(), column.max()
                column = (column - lo) / (hi - lo) if hi > lo else np.zeros_like(column)
            levels = [feature]
        else:
            values = frame[feature].astype(str).to_numpy()
            all_levels = sorted(set(values))
            kept = all_levels[1:] if drop_first else all_levels
            column = (values[:, None] == np.array(kept)[None, :]).astype(np.float64)
            levels = [f"{feature}_{level}" for level in kept]
        groups[feature] = tuple(range(len(names), len(names) + len(levels)))
        names.extend(levels)
        blocks.append(column)
    return np.concatenate(blocks, axis=1).astype(np.float32), names, groups


def _load_adult(paths: dict[str, Path], verify: bool) -> Dataset:
    data = dl.read_verified(
        paths["adult/adult.data"], FILES_BY_PATH["adult/adult.data"], verify=verify
    )
    test = dl.read_verified(
        paths["adult/adult.test"], FILES_BY_PATH["adult/adult.test"], verify=verify
    )
    frame = adult_frame(data, test)
    x, names, groups = encode_tabular(frame, ADULT_FEATURES, drop_first=False, minmax=True)
    y = (frame["income"] == ">50K").to_numpy().astype(np.int32)
    return Dataset(
        "adult",
        x,
        y,
        *_empty(x.shape[1], "classification"),
        tuple(names),
        "classification",
        2,
        groups,
        ADULT_FEATURES,
        "income>50K",
        tuple(str(p) for p in paths.values()),
        "UCI Adult (data+test, '?' rows and duplicates dropped): 9 raw features, discrete ones"
        " fully one-hot, continuous ones MinMax-scaled; all rows in x_train",
    )


# --- Sepsis ---------------------------------------------------------------------------------------

SEPSIS_FEATURES = {
    "age_years": "continuous",
    "sex_0male_1female": "discrete",
    "episode_number": "discrete",
}
SEPSIS_LABEL = "hospital_outcome_1alive_0dead"


def _load_sepsis(paths: dict[str, Path], verify: bool) -> Dataset:
    relpath = DATASET_FILES["sepsis"][0]
    frame = pd.read_csv(
        io.BytesIO(dl.read_verified(paths[relpath], FILES_BY_PATH[relpath], verify=verify))
    )
    expected = [*SEPSIS_FEATURES, SEPSIS_LABEL]
    if list(frame.columns) != expected:
        raise ValueError(f"{relpath}: expected columns {expected}, got {list(frame.columns)}")
    names = list(SEPSIS_FEATURES)
    x = frame[names].to_numpy(np.float32)
    y = frame[SEPSIS_LABEL].to_numpy(np.int32)
    return Dataset(
        "sepsis",
        x,
        y,
        *_empty(3, "classification"),
        tuple(names),
        "classification",
        2,
        _singleton_groups(names),
        SEPSIS_FEATURES,
        "survived (hospital_outcome_1alive_0dead)",
        tuple(str(p) for p in paths.values()),
        "UCI 827 primary cohort: raw (unscaled) age in years, sex (0 male, 1 female), episode"
        " number; label 1 = alive; no split",
    )


# --- Credit default -------------------------------------------------------------------------------

CREDIT_NAMES = (
    "LIMIT_BAL",
    "SEX",
    "EDUCATION",
    "MARRIAGE",
    "AGE",
    "PAY_0",
    "PAY_2",
    "PAY_3",
    "PAY_4",
    "PAY_5",
    "PAY_6",
    *(f"BILL_AMT{i}" for i in range(1, 7)),
    *(f"PAY_AMT{i}" for i in range(1, 7)),
)
_CREDIT_DISCRETE = {
    "SEX",
    "EDUCATION",
    "MARRIAGE",
    "PAY_0",
    "PAY_2",
    "PAY_3",
    "PAY_4",
    "PAY_5",
    "PAY_6",
}
CREDIT_FEATURES = {n: "discrete" if n in _CREDIT_DISCRETE else "continuous" for n in CREDIT_NAMES}


def _load_credit(paths: dict[str, Path], verify: bool) -> Dataset:
    relpath = DATASET_FILES["credit_default"][0]
    frame = pd.read_csv(
        io.BytesIO(dl.read_verified(paths[relpath], FILES_BY_PATH[relpath], verify=verify))
    )
    expected = ["ID", *(f"X{i}" for i in range(1, 24)), "Y"]
    if list(frame.columns) != expected:
        raise ValueError(f"{relpath}: expected columns {expected}, got {list(frame.columns)}")
    names = list(CREDIT_NAMES)
    x = frame[[f"X{i}" for i in range(1, 24)]].to_numpy(np.float32)
    y = frame["Y"].to_numpy(np.int32)
    return Dataset(
        "credit_default",
        x,
        y,
        *_empty(23, "classification"),
        tuple(names),
        "classification",
        2,
        _singleton_groups(names),
        CREDIT_FEATURES,
        "default_payment_next_month",
        tuple(str(p) for p in paths.values()),
        "UCI 350 default of credit card clients: X1..X23 raw (unscaled, not one-hot; ID dropped), "
        "label Y = default next month; no split",
    )


# --- Insurance (Medical Cost) ---------------------------------------------------------------------

INSURANCE_FEATURES = {
    "age": "continuous",
    "bmi": "continuous",
    "children": "continuous",
    "sex": "discrete",
    "smoker": "discrete",
    "region": "discrete",
}


def _load_insurance(paths: dict[str, Path], verify: bool) -> Dataset:
    relpath = DATASET_FILES["insurance"][0]
    frame = pd.read_csv(
        io.BytesIO(dl.read_verified(paths[relpath], FILES_BY_PATH[relpath], verify=verify))
    )
    frame = frame.drop_duplicates(keep="first").reset_index(drop=True)
    x, names, groups = encode_tabular(frame, INSURANCE_FEATURES, drop_first=True, minmax=False)
    y = frame["charges"].to_numpy(np.float32)
    return Dataset(
        "insurance",
        x,
        y,
        *_empty(x.shape[1], "regression"),
        tuple(names),
        "regression",
        None,
        groups,
        INSURANCE_FEATURES,
        "charges",
        tuple(str(p) for p in paths.values()),
        "Medical Cost Personal (1 duplicate row dropped): age, bmi, children raw; sex, smoker,"
        " region one-hot with the first (alphabetical) level dropped; target charges; no split",
    )


# --- User-provided CIFAR-100 features -------------------------------------------------------------

CIFAR100_HOWTO = (
    "cifar100_features is user-provided: save penultimate-layer features of the CIFAR-100 images "
    "(e.g. of an ImageNet-pretrained WRN-28-10 as in Sun et al. 2024 / De et al. 2022, 640-d) with "
    "numpy.savez(<dir>/cifar100_features/features.npz, x_train=<(50000, d) float>, "
    "y_train=<(50000,) int in 0..99>, x_test=<(10000, d) float>, y_test=<(10000,) int in 0..99>)"
)


def load_features_npz(
    path: str | os.PathLike, *, num_classes: int = 100, name: str = "cifar100_features"
) -> Dataset:
    """A user-provided features file (format in ``CIFAR100_HOWTO``), checked for shape and
    values."""
    keys = ("x_train", "y_train", "x_test", "y_test")
    try:
        with np.load(path, allow_pickle=False) as npz:  # a .npy gives an array: TypeError
            contents = {k: npz[k] for k in npz.files}
    except (OSError, zipfile.BadZipFile, EOFError, ValueError, TypeError) as err:
        raise ValueError(f"{path}: cannot read as a .npz file ({err}). {CIFAR100_HOWTO}") from err
    missing = [k for k in keys if k not in contents]
    if missing:
        raise ValueError(
            f"{path}: malformed features file, missing array(s) {missing}. {CIFAR100_HOWTO}"
        )
    arrays = {k: contents[k] for k in keys}
    d = None
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.ndim != 2 or x.dtype.kind not in "fiu":
            raise ValueError(
                f"{path}: x_{split} must be a 2-D numeric array, got {x.dtype} {x.shape}"
            )
        if d is not None and x.shape[1] != d:
            raise ValueError(f"{path}: x_train has {d} features but x_test has {x.shape[1]}")
        d = x.shape[1]
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{path}: x_{split} contains non-finite values")
        if y.shape != (x.shape[0],) or y.dtype.kind not in "iu":
            raise ValueError(
                f"{path}: y_{split} must be integer of shape ({x.shape[0]},), got {y.dtype}"
                f" {y.shape}"
            )
        if y.size and (y.min() < 0 or y.max() >= num_classes):
            raise ValueError(
                f"{path}: y_{split} must lie in 0..{num_classes - 1}, got {y.min()}..{y.max()}"
            )
    names = [f"f{i}" for i in range(d)]  # type: ignore[arg-type]  # d is an int here
    return Dataset(
        name,
        arrays["x_train"].astype(np.float32),
        arrays["y_train"].astype(np.int32),
        arrays["x_test"].astype(np.float32),
        arrays["y_test"].astype(np.int32),
        tuple(names),
        "classification",
        num_classes,
        _singleton_groups(names),
        dict.fromkeys(names, "continuous"),
        "cifar100_class",
        (str(path),),
        "user-provided pre-computed CIFAR-100 features (.npz)",
    )


# --- Dispatch -------------------------------------------------------------------------------------

_PARSERS: dict[str, Callable[..., Any]] = {
    "mnist": functools.partial(_load_idx_set, "mnist"),
    "fashion_mnist": functools.partial(_load_idx_set, "fashion_mnist"),
    "adult": _load_adult,
    "sepsis": _load_sepsis,
    "credit_default": _load_credit,
    "insurance": _load_insurance,
}


_StatKey = tuple[str, int, int, int, int, int]


def _stat_key(path: Path) -> _StatKey:
    """What identifies a file's version: its path, size, mtime, and ctime, device and inode. Every
    write changes the ctime (so does resetting the mtime with ``os.utime``), and a file replaced
    by another has a new inode: an edit of the same size under an old mtime is seen. A stat costs
    microseconds; a digest of MNIST's files would add tens of milliseconds to every load."""
    stat = path.stat()
    return (
        str(path.resolve()),
        stat.st_size,
        stat.st_mtime_ns,
        stat.st_ctime_ns,
        stat.st_dev,
        stat.st_ino,
    )


@functools.lru_cache(maxsize=16)
def _load_cached(
    name: str, key: tuple[_StatKey, ...], relpaths: tuple[str, ...], verify: bool
) -> Dataset:
    # The key holds each file's version (_stat_key): an edited or replaced file is re-read and
    # re-verified.
    paths = {rel: Path(k[0]) for rel, k in zip(relpaths, key)}
    if name == "cifar100_features":
        return load_features_npz(paths[relpaths[0]])  # its own errors name the file
    try:
        return _PARSERS[name](paths, verify)
    except (dl.ChecksumError, MemoryError):
        raise
    except Exception as err:  # a parser's error on a file that is not the registered one
        files = ", ".join(str(p) for p in paths.values())
        hint = (
            "it was read with verify=False: load with verify=True to check its sha256, or delete"
            " it to download the registered file again"
            if not verify
            else "it matches the registered sha256, so this is a bug in the parser"
        )
        raise dl.DataFormatError(
            f"cannot parse dataset {name!r} from {files}: {type(err).__name__}: {err} ({hint})"
        ) from err


def load(
    name: str,
    data_dir: str | os.PathLike | None = None,
    *,
    download: bool | None = None,
    verify: bool = True,
) -> Dataset:
    """Loads a real dataset by name (see the ``dpprep.data`` docstring for names and recipes).

    Files are looked up in ``data_dir``, ``$DPPREP_DATA_DIR``, then the cache, and downloaded into
    the cache when missing (unless ``download=False`` or ``DPPREP_NO_DOWNLOAD=1``). With ``verify``
    (the default) every file's sha256 is checked; a mismatch raises ``ChecksumError``. Results are
    cached in-process (the Dataset is immutable), keyed on each file's version (path, size,
    mtime, ctime and inode: an edit or a replacement is re-read). A file that does not parse as
    its dataset raises :class:`~dpprep.data.DataFormatError` naming it.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    if name == "cifar100_features":
        path = dl.find(CIFAR100_FEATURES_RELPATH, data_dir)
        if path is None:
            reason = f"it cannot be downloaded. {CIFAR100_HOWTO}"
            raise dl.DataNotFoundError(
                dl.not_found_message(CIFAR100_FEATURES_RELPATH, data_dir, (), reason)
            )
        relpaths: tuple[str, ...] = (CIFAR100_FEATURES_RELPATH,)
        paths = [path]
    else:
        relpaths = DATASET_FILES[name]
        # One time budget for all of the dataset's files: the deadline bounds the whole load.
        budget = dl.FetchBudget()
        paths = [dl.resolve(rel, data_dir, download=download, budget=budget) for rel in relpaths]
    return _load_cached(name, tuple(_stat_key(p) for p in paths), relpaths, bool(verify))
