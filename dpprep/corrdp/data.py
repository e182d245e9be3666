"""The five datasets of Wang, Zhang & Cummings (2026) as CorrDP sees them (§5 and App. E).

``load_corrdp(name)`` returns a :class:`CorrDPData`: the scaled training matrix (with an intercept
column on Adult, Credit and Medical: the paper mentions none, we add one with noise factor 1),
labels, the sensitive / insensitive column split, the raw insensitive feature each column belongs to
(one-hot levels share a noise factor) and the paper's variance factors (Table 2 / App. E). Built on
``dpprep.data.load`` and ``dpprep.data.synthetic``; all arrays are read-only.

* ``synthetic`` (§5.1, App. E.1): m = 100, n = 2000, S = the first ``m_s`` columns, data seed
  ``seed``; no intercept; factors are estimated (``dpprep.corrdp.tv.synthetic_tv_factors``), the
  truth that generated the data is in ``CorrDPData.truth`` / :func:`synthetic_truth`.
* ``adult`` (§5.2, App. E.2): the 45,175-row filter, 31 MinMax one-hot columns + intercept.
* ``sepsis`` (§5.2, App. E.3): SMOTENC on the categoricals, then ENN cleaning only the original
  majority class (179,971 rows, 43.3 % alive; ``variant="smoteenn"``: the literal ``SMOTEENN`` the
  paper names, which collapses to ~99.8 % alive instead of a balanced set), then a 10,000-row sample
  without replacement, the 3 raw inputs MinMax-scaled on that sample, no one-hot (App. E.3's
  ``w1 ∈ R^{5×3}`` takes the 3 raw inputs, although §5.2 one-hot encodes every discrete feature), no
  intercept (the network has biases).
* ``credit`` (§5.2, App. E.4): SEX / EDUCATION (0–6) / MARRIAGE (0–3) one-hot, AGE and PAY_x
  numeric (the paper's "all discrete features one-hot" leaves these open), StandardScaler on all
  33 columns (no scaling is stated; under MinMax the paper's GD never leaves the majority
  prediction) + intercept.
* ``medical`` (§5.2, App. E.5): 1,337 deduplicated rows, a 1,000-row sample, drop_first one-hot
  (8 columns), StandardScaler on the features, z-scored charges, + intercept.
  ``variant="default"`` is the App. E.5 split (U = age, sex, region), ``variant="section5"`` the
  §5.2 one (U = sex, smoker, region): the two sections disagree, and the paper's TV_max = 0.36
  belongs to App. E.5's.

The rebalanced Sepsis set is costly to build (SMOTENC and ENN over 110k rows); it is cached
in-process and
on disk under ``<dpprep cache>/corrdp`` keyed on the input data, the seed, the variant and the
imbalanced-learn / scikit-learn versions (``DPPREP_CORRDP_CACHE=0`` turns the disk cache off).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import io
import json
import math
import os
import warnings
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

import numpy as np

from dpprep.data import load
from dpprep.data.loaders import encode_tabular
from dpprep.data.synthetic import SyntheticData, corrdp_synthetic
from dpprep.files import atomic_write_bytes
from dpprep.validation import check_positive_int

NAMES = ("synthetic", "adult", "sepsis", "credit", "medical")
VARIANTS = {
    "synthetic": ("default",),
    "adult": ("default",),
    "sepsis": ("default", "smoteenn"),
    "credit": ("default",),
    "medical": ("default", "section5"),
}
#: Sizes of the synthetic problem (Wang et al. 2026, §5.1).
SYNTHETIC_N, SYNTHETIC_M = 2000, 100
SEPSIS_SAMPLE = 10_000
MEDICAL_SAMPLE = 1_000
INTERCEPT = "intercept"


def _readonly(array: np.ndarray) -> np.ndarray:
    array = np.array(array)  # a private copy, so freezing it cannot affect the caller's array
    array.setflags(write=False)
    return array


@dataclasses.dataclass(frozen=True, eq=False)
class CorrDPData:
    """One CorrDP training set. ``sensitive`` and ``insensitive`` partition every column except
    the intercept; ``insensitive_groups`` maps each raw insensitive feature to its columns and
    ``sensitive_groups`` each raw sensitive feature. ``paper_factors`` are the paper's variance
    factors per raw insensitive feature ({} for synthetic, whose factors are estimated).
    ``truth`` is the generator's truth for ``synthetic`` (None otherwise)."""

    name: str
    x: np.ndarray
    y: np.ndarray
    task: str
    feature_names: tuple[str, ...]
    sensitive: tuple[int, ...]
    insensitive: tuple[int, ...]
    insensitive_groups: Mapping[str, tuple[int, ...]]
    intercept: int | None
    paper_factors: Mapping[str, float]
    description: str
    sensitive_groups: Mapping[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    truth: SyntheticData | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "x", _readonly(self.x))
        object.__setattr__(self, "y", _readonly(self.y))
        for field in ("insensitive_groups", "sensitive_groups"):
            groups = {str(k): tuple(int(i) for i in v) for k, v in getattr(self, field).items()}
            object.__setattr__(self, field, MappingProxyType(groups))
        object.__setattr__(
            self,
            "paper_factors",
            MappingProxyType({k: float(v) for k, v in self.paper_factors.items()}),
        )
        m = self.x.shape[1]
        if len(self.feature_names) != m:
            raise ValueError(f"{len(self.feature_names)} feature names for {m} columns")
        rest = [j for j in range(m) if j != self.intercept]
        if sorted([*self.sensitive, *self.insensitive]) != rest:
            raise ValueError("sensitive and insensitive must partition the non-intercept columns")
        if sorted(i for g in self.insensitive_groups.values() for i in g) != sorted(
            self.insensitive
        ):
            raise ValueError("insensitive_groups must cover the insensitive columns exactly once")

    @property
    def n(self) -> int:
        return int(self.x.shape[0])

    @property
    def m(self) -> int:
        return int(self.x.shape[1])

    @property
    def m_s(self) -> int:
        return len(self.sensitive)

    def column_factors(self, factors: Mapping[str, float]) -> np.ndarray:
        """(m,) variance factor per column: 1 on S and the intercept, ``factors[g]`` on every column
        of insensitive group g. Every group needs a factor in [0, 1]; an unknown key is an error."""
        missing = [g for g in self.insensitive_groups if g not in factors]
        if missing:
            raise ValueError(
                f"factors is missing insensitive feature(s) {missing} of {self.name!r}"
            )
        unknown = [g for g in factors if g not in self.insensitive_groups]
        if unknown:
            raise ValueError(
                f"factors names unknown feature(s) {unknown}; the insensitive features of "
                f"{self.name!r} are {list(self.insensitive_groups)}"
            )
        out = np.ones(self.m)
        for group, columns in self.insensitive_groups.items():
            value = float(factors[group])
            if not (0.0 <= value <= 1.0):
                raise ValueError(
                    f"factors[{group!r}] must lie in [0, 1] (a TV factor), got {value!r}"
                )
            out[list(columns)] = value
        return out


#: Datasets whose encoding bounds every row a priori: each raw feature is a one-hot block (norm 1)
#: or a MinMax column in [0, 1], plus the intercept 1.
ONE_HOT_MINMAX = ("adult",)
#: Why the others have no such bound.
NO_DOMAIN_BOUND = {
    "synthetic": "Gaussian features: unbounded",
    "sepsis": "no GLM panel",
    "credit": "StandardScaler is fitted to the data and bounds no record a priori",
    "medical": "StandardScaler is fitted to the data and bounds no record a priori",
}


def domain_bound(data: CorrDPData) -> tuple[float | None, str]:
    """``(L, why)``: a bound on ``‖x‖`` over the encoded *domain* (any record a neighbour could
    hold, not only the rows at hand), or ``(None, why not)``. Only such a bound makes an ε that
    dp-accounting gives for these runs a DP guarantee; the data's ``max‖x‖`` bounds the rows
    present, not a replacement row. One-hot / MinMax encodings (Adult) give ``√k`` for ``k`` raw
    features (+ the intercept); the encoding's promise is checked on the rows at hand.

    >>> import numpy as np
    >>> toy = CorrDPData("adult", np.array([[1.0, 0.0, 0.5, 1.0]]), np.array([1.0]),
    ...                  "classification", ("a=x", "a=y", "b", "intercept"), (0, 1), (2,),
    ...                  {"b": (2,)}, 3, {"b": 0.5}, "toy",
    ...                  sensitive_groups={"a": (0, 1)})
    >>> bound, why = domain_bound(toy)
    >>> round(bound, 4), why.split(":")[0]
    (1.7321, '√3')
    """
    if data.name not in ONE_HOT_MINMAX:
        return None, NO_DOMAIN_BOUND.get(
            data.name, f"no a-priori bound is known for the encoding of {data.name!r}"
        )
    x = np.asarray(data.x, np.float64)
    groups = {**data.sensitive_groups, **data.insensitive_groups}
    covered = sorted(i for cols in groups.values() for i in cols)
    if covered != sorted(i for i in range(x.shape[1]) if i != data.intercept):
        raise ValueError(
            f"{data.name}: the raw-feature groups do not partition the non-intercept columns"
        )
    for name, cols in groups.items():  # the encoding's promise, checked on the rows at hand
        if np.max(np.sum(x[:, list(cols)] ** 2, axis=1)) > 1.0 + 1e-9:
            raise ValueError(f"{data.name}: feature {name!r} encodes to a block of norm > 1")
    k = len(groups) + (data.intercept is not None)
    return (
        math.sqrt(k),
        (
            f"√{k}: {len(groups)} raw features, each a one-hot block or a MinMax column in [0, 1] "
            f"(norm ≤ 1){', + the intercept' if data.intercept is not None else ''}"
        ),
    )


def _check_choice(name: str, variant: str) -> None:
    if name not in VARIANTS:
        raise ValueError(f"unknown CorrDP dataset {name!r}; known: {', '.join(NAMES)}")
    if variant not in VARIANTS[name]:
        raise ValueError(
            f"unknown variant {variant!r} for {name!r}; known: {', '.join(VARIANTS[name])}"
        )


def load_corrdp(
    name: str, data_dir=None, *, m_s: int = 10, variant: str = "default", seed: int = 0
) -> CorrDPData:
    """The CorrDP view of dataset ``name`` (see the module docstring for each recipe). ``m_s``
    is used by ``synthetic`` only; ``seed`` is the synthetic data seed and the seed of the Sepsis
    rebalancing and of the Sepsis / Medical subsamples (our runs use 0; the paper gives no seed)."""
    _check_choice(name, variant)
    seed = check_positive_int(seed, "seed", minimum=0)
    if name == "synthetic":
        return _synthetic(check_positive_int(m_s, "m_s"), seed)
    data_dir = None if data_dir is None else str(data_dir)
    return _LOADERS[name](data_dir, variant, seed)


# --- synthetic ------------------------------------------------------------------------------------


def synthetic_truth(m_s: int = 10, seed: int = 0) -> SyntheticData:
    """The generator output (data + true mean, covariance, θ*) behind
    ``load_corrdp("synthetic")``."""
    m_s = check_positive_int(m_s, "m_s")
    if m_s >= SYNTHETIC_M:
        raise ValueError(f"m_s must be < {SYNTHETIC_M} (U must not be empty), got {m_s}")
    return corrdp_synthetic(n=SYNTHETIC_N, m=SYNTHETIC_M, m_s=m_s, seed=seed)


@functools.lru_cache(maxsize=16)
def _synthetic(m_s: int, seed: int) -> CorrDPData:
    truth = synthetic_truth(m_s, seed)
    ds = truth.dataset
    names = ds.feature_names
    return CorrDPData(
        "synthetic",
        ds.x_train,
        ds.y_train,
        "regression",
        names,
        truth.sensitive,
        truth.insensitive,
        {names[j]: (j,) for j in truth.insensitive},
        None,
        {},
        f"CorrDP synthetic (Wang et al. 2026, §5.1, App. E.1): n={SYNTHETIC_N}, m={SYNTHETIC_M},"
        f" m_s={m_s}, data seed {seed}; S = first m_s columns; no intercept; TV factors estimated"
        " (Eq. 22)",
        {names[j]: (j,) for j in truth.sensitive},
        truth,
    )


# --- shared helpers -------------------------------------------------------------------------------


def _with_intercept(x: np.ndarray, names: list[str]) -> tuple[np.ndarray, list[str], int]:
    x = np.concatenate([x, np.ones((x.shape[0], 1), x.dtype)], axis=1)
    return x.astype(np.float32), [*names, INTERCEPT], x.shape[1] - 1


def _standardize(x: np.ndarray) -> np.ndarray:
    # sklearn's StandardScaler: population std; a constant column is centred, not divided.
    x = np.asarray(x, np.float64)
    std = x.std(axis=0)
    return (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)


def _minmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    lo, hi = x.min(axis=0), x.max(axis=0)
    return (x - lo) / np.where(hi > lo, hi - lo, 1.0)


def _split(groups: Mapping[str, tuple[int, ...]], insensitive: tuple[str, ...]):
    s_groups = {g: c for g, c in groups.items() if g not in insensitive}
    u_groups = {g: groups[g] for g in insensitive}
    sens = tuple(sorted(i for c in s_groups.values() for i in c))
    insens = tuple(sorted(i for c in u_groups.values() for i in c))
    return sens, insens, s_groups, u_groups


# --- adult ----------------------------------------------------------------------------------------

ADULT_INSENSITIVE = ("race", "gender", "workclass", "fnlwgt")
ADULT_FACTORS = {"race": 0.23, "gender": 0.90, "workclass": 1.0, "fnlwgt": 0.22}  # Table 2


@functools.lru_cache(maxsize=4)
def _adult(data_dir, variant, seed) -> CorrDPData:
    ds = load("adult", data_dir)
    x, names, intercept = _with_intercept(ds.x_train, list(ds.feature_names))
    sens, insens, s_groups, u_groups = _split(ds.feature_groups, ADULT_INSENSITIVE)
    return CorrDPData(
        "adult",
        x,
        ds.y_train,
        "classification",
        tuple(names),
        sens,
        insens,
        u_groups,
        intercept,
        ADULT_FACTORS,
        f"UCI Adult (Wang et al. 2026, App. E.2): {ds.n_train} rows, 31 MinMax one-hot columns +"
        " intercept; U = race, gender, workclass, fnlwgt; factors Table 2",
        s_groups,
    )


# --- sepsis ---------------------------------------------------------------------------------------

SEPSIS_FACTORS = {"sex_0male_1female": 0.3, "episode_number": 0.3}  # App. E.3 (TV_max, joint)
SEPSIS_INSENSITIVE = ("sex_0male_1female", "episode_number")
#: Bump when the rebalancing may return different rows for the same inputs.
REBALANCE_VERSION = 1
ENV_CORRDP_CACHE = "DPPREP_CORRDP_CACHE"


def _corrdp_cache_dir() -> Path | None:
    """``<dpprep cache root>/corrdp`` (root as for downloads and calibrations), or None when off."""
    if os.environ.get(ENV_CORRDP_CACHE, "").strip().lower() in ("0", "off", "false", "no"):
        return None
    from dpprep.data.download import cache_dir

    return cache_dir() / "corrdp"


def _rebalance(
    x: np.ndarray, y: np.ndarray, variant: str, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    from imblearn.combine import SMOTEENN
    from imblearn.over_sampling import SMOTENC
    from imblearn.under_sampling import EditedNearestNeighbours

    # Integer inputs as in the raw CSV: SMOTENC then writes integer (truncated) synthetic ages,
    # which is what gives 179,971 rows / 43.3 % alive (float inputs give 186,354).
    x = np.asarray(x).astype(np.int64)
    smote = SMOTENC(categorical_features=[1, 2], random_state=seed)
    if variant == "smoteenn":
        xr, yr = SMOTEENN(smote=smote, random_state=seed).fit_resample(x, y)
    else:
        xs, ys = smote.fit_resample(x, y)
        majority = int(np.bincount(y).argmax())  # the original majority class (1 = alive)
        xr, yr = EditedNearestNeighbours(sampling_strategy=[majority], kind_sel="all").fit_resample(
            xs, ys
        )
    return np.asarray(xr, np.float64), np.asarray(yr, np.int32)


def _rebalance_key(x: np.ndarray, y: np.ndarray, variant: str, seed: int) -> dict:
    digest = hashlib.sha256(
        np.ascontiguousarray(x).tobytes() + np.ascontiguousarray(y).tobytes()
    ).hexdigest()
    fields = {
        "data": digest,
        "variant": variant,
        "seed": seed,
        "method_version": REBALANCE_VERSION,
        "imbalanced_learn": importlib.metadata.version("imbalanced-learn"),
        "scikit_learn": importlib.metadata.version("scikit-learn"),
        "numpy": np.__version__,
    }
    return {
        **fields,
        "digest": hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest(),
    }


def _read_rebalanced(path: Path, key: dict):
    try:
        with np.load(path, allow_pickle=False) as npz:
            if json.loads(str(npz["key"])) != key:
                raise ValueError("key does not match")
            return np.asarray(npz["x"], np.float64), np.asarray(npz["y"], np.int32)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError) as err:
        warnings.warn(
            f"ignoring unreadable rebalancing cache entry {path} ({err}); recomputing", stacklevel=3
        )
        return None


def _write_rebalanced(directory: Path, key: dict, x: np.ndarray, y: np.ndarray) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, key=np.array(json.dumps(key, sort_keys=True)), x=x, y=y)
    try:
        atomic_write_bytes(directory / f"sepsis-{key['digest']}.npz", buffer.getvalue())
    except OSError as err:  # a cache that cannot be written only costs time
        warnings.warn(f"cannot write rebalancing cache in {directory}: {err}", stacklevel=3)


def sepsis_rebalanced(
    data_dir=None, *, variant: str = "default", seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """The whole rebalanced Sepsis set before subsampling: raw (unscaled) features age_years,
    sex_0male_1female, episode_number as float64 and int32 labels (1 = alive), read-only.
    Default: SMOTENC then ENN on the original majority class only; ``"smoteenn"``: literal SMOTEENN.
    """
    _check_choice("sepsis", variant)
    seed = check_positive_int(seed, "seed", minimum=0)
    return _sepsis_rebalanced(None if data_dir is None else str(data_dir), variant, seed)


@functools.lru_cache(maxsize=4)
def _sepsis_rebalanced(data_dir, variant, seed):
    ds = load("sepsis", data_dir)
    x, y = np.asarray(ds.x_train), np.asarray(ds.y_train)
    key = _rebalance_key(x, y, variant, seed)
    directory = _corrdp_cache_dir()
    cached = (
        None
        if directory is None
        else _read_rebalanced(directory / f"sepsis-{key['digest']}.npz", key)
    )
    if cached is None:
        cached = _rebalance(x, y, variant, seed)
        if directory is not None:
            _write_rebalanced(directory, key, *cached)
    xr, yr = cached
    return _readonly(xr), _readonly(yr)


@functools.lru_cache(maxsize=4)
def _sepsis(data_dir, variant, seed) -> CorrDPData:
    ds = load("sepsis", data_dir)
    xr, yr = sepsis_rebalanced(data_dir, variant=variant, seed=seed)
    rows = np.random.default_rng(seed).choice(
        xr.shape[0], size=min(SEPSIS_SAMPLE, xr.shape[0]), replace=False
    )
    x, y = _minmax(xr[rows]).astype(np.float32), yr[rows]
    names = ds.feature_names
    how = (
        "literal SMOTEENN(SMOTENC) — collapses to the majority class"
        if variant == "smoteenn"
        else "SMOTENC then ENN cleaning only the original majority class"
    )
    return CorrDPData(
        "sepsis",
        x,
        y,
        "classification",
        names,
        (0,),
        (1, 2),
        {names[1]: (1,), names[2]: (2,)},
        None,
        SEPSIS_FACTORS,
        f"UCI 827 primary cohort (Wang et al. 2026, App. E.3), {ds.n_train} rows rebalanced by"
        f" {how} (seed {seed}): {xr.shape[0]} rows, {yr.mean():.1%} alive; {len(rows)}-row sample"
        f" without replacement ({y.mean():.1%} alive); 3 raw inputs MinMax-scaled, no one-hot, no"
        " intercept",
        {names[0]: (0,)},
    )


# --- credit ---------------------------------------------------------------------------------------

CREDIT_INSENSITIVE = ("SEX", "EDUCATION", "MARRIAGE", "AGE")
CREDIT_FACTORS = {"SEX": 0.103, "EDUCATION": 0.8113, "MARRIAGE": 0.8295, "AGE": 1.0}  # App. E.4
_CREDIT_ONE_HOT = ("SEX", "EDUCATION", "MARRIAGE")


@functools.lru_cache(maxsize=4)
def _credit(data_dir, variant, seed) -> CorrDPData:
    import pandas as pd

    ds = load("credit_default", data_dir)
    frame = pd.DataFrame(np.asarray(ds.x_train, np.int64), columns=list(ds.feature_names))
    types = {f: "discrete" if f in _CREDIT_ONE_HOT else "continuous" for f in ds.feature_names}
    x, names, groups = encode_tabular(frame, types, drop_first=False, minmax=False)
    x, names, intercept = _with_intercept(_standardize(x), names)
    sens, insens, s_groups, u_groups = _split(groups, CREDIT_INSENSITIVE)
    return CorrDPData(
        "credit",
        x,
        ds.y_train,
        "classification",
        tuple(names),
        sens,
        insens,
        u_groups,
        intercept,
        CREDIT_FACTORS,
        f"UCI 350 credit default (Wang et al. 2026, App. E.4): {ds.n_train} rows; SEX, EDUCATION"
        f" (0-6), MARRIAGE (0-3) one-hot, AGE and PAY_x numeric: {len(names) - 1} columns,"
        " StandardScaler on all, + intercept; U = SEX, EDUCATION, MARRIAGE, AGE",
        s_groups,
    )


# --- medical --------------------------------------------------------------------------------------

MEDICAL_INSENSITIVE = {"default": ("age", "sex", "region"), "section5": ("sex", "smoker", "region")}
MEDICAL_TV_MAX = 0.36  # App. E.5, every insensitive column


@functools.lru_cache(maxsize=8)
def _medical(data_dir, variant, seed) -> CorrDPData:
    ds = load("insurance", data_dir)
    rows = np.random.default_rng(seed).choice(ds.n_train, size=MEDICAL_SAMPLE, replace=False)
    y = np.asarray(ds.y_train, np.float64)[rows]
    y = ((y - y.mean()) / y.std()).astype(np.float32)
    x, names, intercept = _with_intercept(
        _standardize(np.asarray(ds.x_train)[rows]), list(ds.feature_names)
    )
    insensitive = MEDICAL_INSENSITIVE[variant]
    sens, insens, s_groups, u_groups = _split(ds.feature_groups, insensitive)
    split = "App. E.5 split" if variant == "default" else "Section 5.2 split"
    return CorrDPData(
        "medical",
        x,
        y,
        "regression",
        tuple(names),
        sens,
        insens,
        u_groups,
        intercept,
        dict.fromkeys(insensitive, MEDICAL_TV_MAX),
        f"Medical Cost (Wang et al. 2026, App. E.5): {ds.n_train} deduplicated rows,"
        f" {MEDICAL_SAMPLE}-row sample (seed {seed}); drop_first one-hot (8 columns),"
        f" StandardScaler, z-scored charges, + intercept; {split}: U = {', '.join(insensitive)}",
        s_groups,
    )


_LOADERS = {"adult": _adult, "sepsis": _sepsis, "credit": _credit, "medical": _medical}
