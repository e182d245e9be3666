"""Every loader on the real copies, plus error paths and the user-provided features file."""

from __future__ import annotations

import dataclasses
import gzip
import os
import re
import shutil

import numpy as np
import pytest

from dpprep.data import (
    DATASETS,
    ChecksumError,
    DataFormatError,
    DataNotFoundError,
    Dataset,
    load,
    load_features_npz,
)
from dpprep.data import download as dl
from dpprep.data import loaders
from dpprep.data.loaders import parse_idx

REAL = ("mnist", "fashion_mnist", "adult", "sepsis", "credit_default", "insurance")


def _one_hot_groups(ds: Dataset) -> dict[str, tuple[int, ...]]:
    return {
        k: v
        for k, v in ds.feature_groups.items()
        if ds.feature_types[k] == "discrete" and len(v) > 1
    }


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
def test_idx_sets(data_dir, name):
    ds = load(name, data_dir)
    assert ds.x_train.shape == (60000, 784) and ds.x_test.shape == (10000, 784)
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int32
    assert ds.x_train.min() == 0.0 and ds.x_train.max() == 1.0 and ds.x_test.max() == 1.0
    # pixels are k/255 exactly (up to float32 rounding)
    assert np.allclose(ds.x_test[:100] * 255, np.round(ds.x_test[:100] * 255), atol=1e-4)
    assert set(np.unique(ds.y_train)) == set(range(10)) and ds.num_classes == 10
    assert ds.task == "classification" and len(ds.feature_names) == 784


def test_mnist_label_counts_match_the_published_ones(data_dir):
    ds = load("mnist", data_dir)
    # Per-digit counts of the MNIST training/test sets (LeCun et al.'s distribution).
    assert np.bincount(ds.y_train).tolist() == [
        5923,
        6742,
        5958,
        6131,
        5842,
        5421,
        5918,
        6265,
        5851,
        5949,
    ]
    assert np.bincount(ds.y_test).tolist() == [
        980,
        1135,
        1032,
        1010,
        982,
        892,
        958,
        1028,
        974,
        1009,
    ]


def test_fashion_mnist_is_balanced(data_dir):
    ds = load("fashion_mnist", data_dir)
    assert np.bincount(ds.y_train).tolist() == [6000] * 10
    assert np.bincount(ds.y_test).tolist() == [1000] * 10


def test_adult_matches_spec(data_dir):
    ds = load("adult", data_dir)
    assert (
        ds.x_train.shape == (45175, 31) and ds.x_test.shape == (0, 31) and ds.y_test.shape == (0,)
    )
    assert round(float(ds.y_train.mean()), 4) == 0.2480
    assert {k: len(v) for k, v in ds.feature_groups.items()} == {
        "age": 1,
        "workclass": 7,
        "fnlwgt": 1,
        "educational-num": 1,
        "marital-status": 7,
        "relationship": 6,
        "race": 5,
        "gender": 2,
        "hours-per-week": 1,
    }
    assert set(ds.continuous_features) == {"age", "fnlwgt", "educational-num", "hours-per-week"}
    assert "workclass_Never-worked" not in ds.feature_names  # disappears with the '?' filter
    for feature in ds.continuous_features:
        (col,) = ds.feature_groups[feature]
        assert ds.x_train[:, col].min() == 0.0 and ds.x_train[:, col].max() == 1.0
    for feature, cols in _one_hot_groups(ds).items():
        block = ds.x_train[:, list(cols)]
        assert set(np.unique(block)) == {0.0, 1.0}
        assert np.all(block.sum(axis=1) == 1.0), feature
        assert np.all(block.sum(axis=0) > 0), feature  # every level occurs
    assert abs(np.linalg.norm(ds.x_train, axis=1).max() - 2.79) < 0.01


def test_adult_filter_steps(data_dir):
    data = (data_dir / "adult" / "adult.data").read_bytes()
    test = (data_dir / "adult" / "adult.test").read_bytes()
    frame = loaders.adult_frame(data, test)
    assert len(frame) == 45175 and not (frame == "?").any().any()
    assert set(frame["income"]) == {"<=50K", ">50K"}
    assert not frame.duplicated().any()


def test_sepsis(data_dir):
    ds = load("sepsis", data_dir)
    assert ds.x_train.shape == (110204, 3) and ds.n_test == 0
    assert round(100 * float(ds.y_train.mean()), 2) == 92.65
    age, sex, episode = ds.x_train.T
    assert age.min() >= 0 and age.max() <= 100
    assert set(np.unique(sex)) == {0.0, 1.0} and set(np.unique(episode)) <= {
        1.0,
        2.0,
        3.0,
        4.0,
        5.0,
    }
    assert ds.feature_types == {
        "age_years": "continuous",
        "sex_0male_1female": "discrete",
        "episode_number": "discrete",
    }


def test_credit_default(data_dir):
    ds = load("credit_default", data_dir)
    assert ds.x_train.shape == (30000, 23) and int(ds.y_train.sum()) == 6636
    assert ds.feature_names[:5] == ("LIMIT_BAL", "SEX", "EDUCATION", "MARRIAGE", "AGE")
    assert ds.feature_names[5:11] == ("PAY_0", "PAY_2", "PAY_3", "PAY_4", "PAY_5", "PAY_6")
    limit = ds.x_train[:, 0]
    # the file writes e.g. 500000 as "5.00E+05"; those must parse to the same numbers
    assert limit.min() == 10000 and limit.max() == 1_000_000 and int((limit == 500000).sum()) == 722
    assert set(np.unique(ds.x_train[:, 1])) == {1.0, 2.0}
    assert np.all(ds.x_train == np.round(ds.x_train))


def test_insurance(data_dir):
    ds = load("insurance", data_dir)
    assert ds.feature_names == (
        "age",
        "bmi",
        "children",
        "sex_male",
        "smoker_yes",
        "region_northwest",
        "region_southeast",
        "region_southwest",
    )
    assert ds.x_train.shape == (1337, 8) and ds.task == "regression" and ds.num_classes is None
    assert ds.y_train.dtype == np.float32 and ds.y_train.min() > 1000
    assert ds.feature_groups["region"] == (5, 6, 7)
    region = ds.x_train[:, 5:8]
    # northeast dropped
    assert np.all(region.sum(axis=1) <= 1) and int((region.sum(axis=1) == 0).sum()) > 0
    raw_rows = (data_dir / "insurance" / "insurance.csv").read_text().splitlines()[1:]
    assert len(raw_rows) == 1338 and len(set(raw_rows)) == 1337


@pytest.mark.parametrize("name", REAL)
def test_invariants_and_immutability(data_dir, name):
    ds = load(name, data_dir)
    assert ds.x_train.dtype == np.float32 and ds.x_test.dtype == np.float32
    assert np.all(np.isfinite(ds.x_train))
    columns = sorted(i for group in ds.feature_groups.values() for i in group)
    assert columns == list(range(ds.n_features))
    assert set(ds.feature_types) == set(ds.feature_groups)
    with pytest.raises(ValueError):
        ds.x_train[0, 0] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        ds.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ds.feature_groups["x"] = (0,)  # type: ignore[index]


@pytest.mark.parametrize("name", ["adult", "insurance", "mnist"])
def test_deterministic_and_cached(data_dir, name):
    first = load(name, data_dir)
    assert load(name, data_dir) is first  # in-process cache
    loaders._load_cached.cache_clear()
    second = load(name, data_dir)
    assert second is not first
    for field in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(first, field), getattr(second, field))
    assert first.feature_names == second.feature_names and dict(first.feature_groups) == dict(
        second.feature_groups
    )


def test_unknown_name_lists_known_names():
    with pytest.raises(ValueError, match="unknown dataset 'cifar10'") as info:
        load("cifar10")
    for name in DATASETS:
        assert name in str(info.value)


def test_missing_file_message_names_file_dirs_url_and_env(tmp_path, monkeypatch):
    env_dir = tmp_path / "env_dir"
    monkeypatch.setenv(dl.ENV_DATA_DIR, str(env_dir))
    with pytest.raises(DataNotFoundError) as info:
        load("insurance", tmp_path / "arg_dir")
    message = str(info.value)
    assert "insurance/insurance.csv" in message
    for directory in (tmp_path / "arg_dir", env_dir, tmp_path / "cache"):
        assert str(directory / "insurance" / "insurance.csv") in message
    assert (
        "https://raw.githubusercontent.com/stedy/Machine-Learning-with-R-datasets/master/insurance.csv"
        in message
    )
    assert "DPPREP_DATA_DIR" in message and "downloads are disabled" in message


def test_search_order_prefers_argument_then_env_then_cache(tmp_path, monkeypatch, data_dir):
    for sub in ("arg", "env", "cache"):
        (tmp_path / sub / "insurance").mkdir(parents=True)
    monkeypatch.setenv(dl.ENV_DATA_DIR, str(tmp_path / "env"))
    monkeypatch.setenv(dl.ENV_CACHE_DIR, str(tmp_path / "cache"))
    src = data_dir / "insurance" / "insurance.csv"
    shutil.copy(src, tmp_path / "cache" / "insurance" / "insurance.csv")
    assert (
        dl.find("insurance/insurance.csv", tmp_path / "arg")
        == tmp_path / "cache" / "insurance" / "insurance.csv"
    )
    shutil.copy(src, tmp_path / "env" / "insurance" / "insurance.csv")
    assert (
        dl.find("insurance/insurance.csv", tmp_path / "arg")
        == tmp_path / "env" / "insurance" / "insurance.csv"
    )
    shutil.copy(src, tmp_path / "arg" / "insurance" / "insurance.csv")
    assert (
        dl.find("insurance/insurance.csv", tmp_path / "arg")
        == tmp_path / "arg" / "insurance" / "insurance.csv"
    )
    assert load("insurance", tmp_path / "arg").files == (
        str((tmp_path / "arg" / "insurance" / "insurance.csv").resolve()),
    )


def test_corrupt_csv_raises_checksum_error(tmp_path, data_dir):
    target = tmp_path / "insurance" / "insurance.csv"
    target.parent.mkdir()
    raw = (data_dir / "insurance" / "insurance.csv").read_bytes()
    target.write_bytes(raw.replace(b"16884.924", b"16884.925", 1))
    with pytest.raises(ChecksumError) as info:
        load("insurance", tmp_path)
    message = str(info.value)
    assert "505c1cbc2e63d0363bac59501563df2530aadf4cdb9cfee226f4ef32f5468281" in message
    assert dl.sha256_bytes(target.read_bytes()) in message
    # verify=False accepts a user's modified copy
    assert load("insurance", tmp_path, verify=False).y_train[0] == np.float32(16884.925)


def test_corrupt_gzip_content_raises_checksum_error(tmp_path, data_dir):
    folder = tmp_path / "mnist"
    folder.mkdir()
    for f in (data_dir / "mnist").iterdir():
        shutil.copy(f, folder / f.name)
    labels = bytearray(gzip.decompress((folder / "t10k-labels-idx1-ubyte.gz").read_bytes()))
    labels[-1] = (labels[-1] + 1) % 10
    (folder / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(bytes(labels)))
    with pytest.raises(
        ChecksumError, match="ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"
    ):
        load("mnist", tmp_path)
    (folder / "t10k-labels-idx1-ubyte.gz").write_bytes(b"not gzip")
    with pytest.raises(ChecksumError, match="cannot read"):
        load("mnist", tmp_path)


def test_a_garbage_file_read_unverified_is_an_error_naming_it(tmp_path, data_dir):
    (tmp_path / "adult").mkdir()
    shutil.copy(data_dir / "adult" / "adult.test", tmp_path / "adult" / "adult.test")
    bad = tmp_path / "adult" / "adult.data"
    for garbage in (bytes(range(256)) * 4, b"hello world\nnot, an, adult, row\n"):
        bad.write_bytes(garbage)  # undecodable bytes (was a UnicodeDecodeError), or short rows
        with pytest.raises(
            DataFormatError, match=f"cannot parse dataset 'adult' from {re.escape(str(bad))}"
        ):
            load("adult", tmp_path, verify=False)  # short rows were dropped: a silent subset


def test_an_edit_of_the_same_size_under_the_old_mtime_is_read_again(tmp_path, data_dir):
    (tmp_path / "insurance").mkdir()
    target = tmp_path / "insurance" / "insurance.csv"
    shutil.copy(data_dir / "insurance" / "insurance.csv", target)
    assert load("insurance", tmp_path).y_train[0] == np.float32(16884.924)
    before = target.stat()
    target.write_bytes(target.read_bytes().replace(b"16884.924", b"16884.925", 1))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert target.stat().st_size == before.st_size
    assert target.stat().st_mtime_ns == before.st_mtime_ns
    with pytest.raises(ChecksumError):  # the in-process cache served the old Dataset
        load("insurance", tmp_path)
    assert load("insurance", tmp_path, verify=False).y_train[0] == np.float32(16884.925)


def test_parse_idx_rejects_bad_headers():
    good = bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9])
    np.testing.assert_array_equal(parse_idx(good), [7, 8, 9])
    with pytest.raises(ValueError, match="magic"):
        parse_idx(bytes([0, 0, 9, 1, 0, 0, 0, 1, 7]))
    with pytest.raises(ValueError, match="payload"):
        parse_idx(good[:-1])


# --- cifar100_features (user-provided) ------------------------------------------------------------


def _write_features(path, **overrides):
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.normal(size=(50, 6)).astype(np.float64),
        "y_train": rng.integers(0, 100, size=50),
        "x_test": rng.normal(size=(20, 6)).astype(np.float32),
        "y_test": rng.integers(0, 100, size=20).astype(np.int16),
    }
    arrays.update(overrides)
    arrays = {k: v for k, v in arrays.items() if v is not None}
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return arrays


def test_cifar100_features_from_user_file(tmp_path):
    arrays = _write_features(tmp_path / "cifar100_features" / "features.npz")
    ds = load("cifar100_features", tmp_path)
    assert ds.x_train.shape == (50, 6) and ds.x_test.shape == (20, 6) and ds.num_classes == 100
    assert ds.x_train.dtype == np.float32 and ds.y_test.dtype == np.int32
    np.testing.assert_allclose(ds.x_train, arrays["x_train"].astype(np.float32))
    np.testing.assert_array_equal(ds.y_test, arrays["y_test"])


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"y_test": None}, "missing array"),
        ({"x_test": np.zeros((20, 5))}, "x_train has 6 features but x_test has 5"),
        ({"y_train": np.full(50, 100)}, "0..99"),
        ({"y_train": np.zeros(49, int)}, "y_train must be integer of shape"),
        ({"x_train": np.full((50, 6), np.nan)}, "non-finite"),
        ({"y_train": np.zeros(50)}, "y_train must be integer"),
    ],
)
def test_malformed_features_file(tmp_path, overrides, match):
    path = tmp_path / "cifar100_features" / "features.npz"
    _write_features(path, **overrides)
    with pytest.raises(ValueError, match=match):
        load("cifar100_features", tmp_path)


def test_features_file_that_is_not_npz(tmp_path):
    path = tmp_path / "features.npz"
    path.write_bytes(b"garbage")
    with pytest.raises(ValueError, match="cannot read"):
        load_features_npz(path)
    with open(path, "wb") as handle:  # a single .npy array under the .npz name
        np.save(handle, np.zeros((3, 2)))
    with pytest.raises(ValueError, match="cannot read"):
        load_features_npz(path)
    np.savez(
        path,
        x_train=np.array([{"a": 1}], dtype=object),
        y_train=np.zeros(1, int),
        x_test=np.zeros((0, 1)),
        y_test=np.zeros(0, int),
    )
    with pytest.raises(ValueError, match="cannot read"):  # object arrays need pickle: refused
        load_features_npz(path)


def test_missing_cifar100_features_explains_how_to_make_it(tmp_path):
    with pytest.raises(DataNotFoundError) as info:
        load("cifar100_features", tmp_path)
    message = str(info.value)
    assert "cifar100_features/features.npz" in message and "numpy.savez" in message
    assert "x_train" in message and "DPPREP_DATA_DIR" in message and str(tmp_path) in message


def _unsplit(n: int = 50) -> loaders.Dataset:
    x = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
    return loaders.Dataset(
        "toy", x, np.arange(n) % 2, *loaders._empty(2, "classification"), ("a", "b"),
        "classification", 2, {"a": (0,), "b": (1,)}, {"a": "continuous", "b": "continuous"},
        "label",
    )  # fmt: skip


def test_with_test_split_moves_a_seeded_random_fraction_of_the_rows():
    ds = _unsplit()
    split = ds.with_test_split(0.2, seed=3)
    assert (split.n_train, split.n_test) == (40, 10)
    rows = np.concatenate([split.x_train, split.x_test])
    np.testing.assert_array_equal(np.sort(rows[:, 0]), ds.x_train[:, 0])  # every row once
    assert not np.array_equal(split.x_test, ds.x_train[:10])  # drawn, not the first rows
    again = ds.with_test_split(0.2, seed=3)
    np.testing.assert_array_equal(again.x_test, split.x_test)
    np.testing.assert_array_equal(split.y_test, (split.x_test[:, 0] / 2).astype(int) % 2)
    assert "with_test_split(0.2, seed=3)" in split.description
    with pytest.raises(ValueError, match="has a test split already"):
        split.with_test_split(0.2, seed=0)
    for bad in (0.0, 1.0, 0.001):
        with pytest.raises(ValueError, match="test_fraction"):
            ds.with_test_split(bad, seed=0)


def test_evaluating_on_an_empty_test_split_is_refused_saying_how_to_make_one():
    import jax

    from dpprep import models

    ds = _unsplit()
    model = models.logistic_regression(2)
    params = model.init(jax.random.key(0))
    with pytest.raises(ValueError, match=r"x has 0 rows.*with_test_split\(0.2, seed=0\)"):
        models.accuracy(model, params, ds.x_test, ds.y_test)
    split = ds.with_test_split(0.2, seed=0)
    assert 0.0 <= float(models.accuracy(model, params, split.x_test, split.y_test)) <= 1.0
