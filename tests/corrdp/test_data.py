"""The CorrDP views of the five datasets (spec §5.2–5.6): sizes, splits, scaling, factors."""

from __future__ import annotations

import numpy as np
import pytest

from dpprep.corrdp import data as cdata
from dpprep.corrdp.data import load_corrdp, synthetic_truth


def test_synthetic_matches_the_generator_and_keeps_the_truth():
    d = load_corrdp("synthetic", m_s=20)
    truth = synthetic_truth(20)
    assert d.x.shape == (2000, 100) and d.x.dtype == np.float32 and d.y.dtype == np.float32
    np.testing.assert_array_equal(d.x, truth.dataset.x_train)
    assert d.sensitive == tuple(range(20)) and d.insensitive == tuple(range(20, 100))
    assert d.intercept is None and d.paper_factors == {} and d.task == "regression"
    assert d.truth is not None and d.truth.cov.shape == (100, 100)
    assert d.insensitive_groups["x21"] == (20,)
    assert not d.x.flags.writeable
    with pytest.raises(ValueError, match="m_s"):
        synthetic_truth(100)


def test_adult_split_and_factors(data_dir):
    d = load_corrdp("adult", data_dir)
    assert d.x.shape == (45175, 32) and d.intercept == 31 and d.feature_names[31] == "intercept"
    np.testing.assert_array_equal(d.x[:, 31], 1.0)
    assert d.x[:, :31].min() == 0.0 and d.x[:, :31].max() == 1.0  # MinMax
    assert set(d.insensitive_groups) == {"race", "gender", "workclass", "fnlwgt"}
    assert [len(d.insensitive_groups[g]) for g in ("race", "gender", "workclass", "fnlwgt")] == [
        5,
        2,
        7,
        1,
    ]
    assert set(d.sensitive_groups) == {
        "age",
        "educational-num",
        "marital-status",
        "relationship",
        "hours-per-week",
    }
    assert len(d.sensitive) == 3 + 7 + 6 and len(d.insensitive) == 15
    f = d.column_factors(d.paper_factors)
    assert f[31] == 1.0 and np.all(f[list(d.sensitive)] == 1.0)
    assert np.all(f[list(d.insensitive_groups["race"])] == 0.23)
    assert f[d.insensitive_groups["fnlwgt"][0]] == 0.22
    assert d.y.mean() == pytest.approx(0.2480, abs=1e-4)


def test_column_factors_rejects_missing_unknown_and_out_of_range(data_dir):
    d = load_corrdp("adult", data_dir)
    good = dict(d.paper_factors)
    with pytest.raises(ValueError, match="fnlwgt"):
        d.column_factors({k: v for k, v in good.items() if k != "fnlwgt"})
    with pytest.raises(ValueError, match="age"):
        d.column_factors({**good, "age": 0.5})
    with pytest.raises(ValueError, match=r"factors\['race'\].*\[0, 1\]"):
        d.column_factors({**good, "race": 1.2})


def test_sepsis_rebalancing_reproduces_the_spec(data_dir):
    x, y = cdata.sepsis_rebalanced(data_dir)
    assert x.shape == (179_971, 3)  # spec 5.4
    assert y.mean() == pytest.approx(0.433, abs=5e-4)
    d = load_corrdp("sepsis", data_dir)
    assert d.x.shape == (10_000, 3) and d.intercept is None
    assert d.x.min() == 0.0 and d.x.max() == 1.0
    assert d.sensitive == (0,) and d.insensitive == (1, 2)
    np.testing.assert_array_equal(d.column_factors(d.paper_factors), [1.0, 0.3, 0.3])
    assert "179971 rows, 43.3% alive" in d.description


@pytest.mark.slow
def test_literal_smoteenn_collapses_to_the_majority_class(data_dir):
    x, y = cdata.sepsis_rebalanced(data_dir, variant="smoteenn")
    assert x.shape[0] == 78_023 and y.mean() > 0.997  # A12: 99.8 % alive


def test_sepsis_rebalancing_disk_cache_roundtrip(data_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("DPPREP_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("DPPREP_CORRDP_CACHE", "1")
    x, y = cdata.sepsis_rebalanced(data_dir)  # in-process cache: computed by the test above or now
    ds = cdata.load("sepsis", str(data_dir))
    key = cdata._rebalance_key(np.asarray(ds.x_train), np.asarray(ds.y_train), "default", 0)
    cdata._write_rebalanced(tmp_path / "corrdp", key, np.asarray(x), np.asarray(y))
    path = tmp_path / "corrdp" / f"sepsis-{key['digest']}.npz"
    xr, yr = cdata._read_rebalanced(path, key)
    np.testing.assert_array_equal(xr, x)
    np.testing.assert_array_equal(yr, y)
    with pytest.warns(UserWarning, match="key does not match"):
        assert cdata._read_rebalanced(path, {**key, "seed": 1}) is None


def test_credit_encoding_and_scaling(data_dir):
    d = load_corrdp("credit", data_dir)
    assert d.x.shape == (30_000, 34) and d.intercept == 33
    assert [len(d.insensitive_groups[g]) for g in ("SEX", "EDUCATION", "MARRIAGE", "AGE")] == [
        2,
        7,
        4,
        1,
    ]
    assert len(d.sensitive_groups) == 19 and len(d.sensitive) == 19
    np.testing.assert_allclose(d.x[:, :33].mean(axis=0), 0.0, atol=1e-4)
    np.testing.assert_allclose(d.x[:, :33].std(axis=0), 1.0, atol=1e-3)
    assert d.y.mean() == pytest.approx(0.2212, abs=1e-4)


@pytest.mark.parametrize(
    "variant,u", [("default", {"age", "sex", "region"}), ("section5", {"sex", "smoker", "region"})]
)
def test_medical_variants(data_dir, variant, u):
    d = load_corrdp("medical", data_dir, variant=variant)
    assert d.x.shape == (1000, 9) and d.intercept == 8 and d.task == "regression"
    assert set(d.insensitive_groups) == u and len(d.insensitive) == 5 and len(d.sensitive) == 3
    assert d.y.mean() == pytest.approx(0.0, abs=1e-5) and d.y.std() == pytest.approx(1.0, abs=1e-4)
    assert set(d.paper_factors.values()) == {0.36}


def test_bad_names_and_variants():
    with pytest.raises(ValueError, match="known: synthetic, adult, sepsis, credit, medical"):
        load_corrdp("insurance")
    with pytest.raises(ValueError, match="variant 'x'.*default, section5"):
        load_corrdp("medical", variant="x")
    with pytest.raises(ValueError, match="m_s"):
        load_corrdp("synthetic", m_s=0)
