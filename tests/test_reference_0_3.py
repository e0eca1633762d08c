"""Every output of viboost 0.3.0's fits, two classes and K, both presets, in memory and on Dask
(``tests/reference_0_3.py``), and the models it pickled: the same to float rounding
(:data:`RTOL`; discrete outputs exactly) after the fit driver moved out of the estimators."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import reference_0_3 as ref

from viboost.estimator import ViboostVersionWarning

#: As tests/test_reference_outputs.py: float rounding across CPUs (AVX-512 or not).
RTOL = 1e-9


@pytest.fixture(scope="module")
def saved() -> dict[str, np.ndarray]:
    with np.load(ref.SAVED) as data:
        return {key: data[key] for key in data.files}


def _assert_same(saved: dict, name: str, outputs: dict) -> None:
    keys = {k.split("/", 1)[1] for k in saved if k.startswith(name + "/")}
    assert set(outputs) == keys, f"{name}: outputs {sorted(set(outputs) ^ keys)} differ"
    for key, value in outputs.items():
        expected, actual = saved[f"{name}/{key}"], np.asarray(value)
        assert actual.shape == expected.shape, f"{name}/{key}: shape"
        if expected.dtype.kind in "US":
            assert str(actual) == str(expected), f"{name}/{key}: {actual} != {expected}"
            continue
        if actual.tobytes() == expected.astype(actual.dtype).tobytes():
            continue
        discrete = key in ("learners/feature", "n_learners", "predict") or key.startswith("cv_")
        discrete = discrete and not key.startswith("cv_log") and key != "cv_decision_function_"
        assert not discrete, f"{name}/{key} differs from 0.3.0"
        assert np.array_equal(np.isnan(actual), np.isnan(expected)), f"{name}/{key}: NaNs"
        np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=0, err_msg=f"{name}/{key}")


@pytest.mark.parametrize("name", list(ref.LOCAL))
def test_in_memory_fit_is_that_of_0_3(saved, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # small data: ConvergenceWarning
        model, X_test = ref.fit_local(name)
    _assert_same(saved, name, ref.outputs(model, X_test))


def test_dask_fits_are_those_of_0_3(saved, two_workers):
    pytest.importorskip("dask.array")
    for name in ref.DASK:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            model, X_test = ref.fit_dask(name, two_workers)
        _assert_same(saved, name, ref.outputs(model, X_test))


def test_saved_outputs_cover_every_configuration(saved):
    names = {key.split("/", 1)[0] for key in saved}
    assert names == set(ref.LOCAL) | set(ref.DASK)


@pytest.mark.parametrize("name", ref.PICKLED)
def test_models_pickled_by_0_3_load_and_predict_as_they_did(name):
    models = pickle.loads(ref.MODELS.read_bytes())
    blob, X_test, proba = models[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ViboostVersionWarning)
        model = pickle.loads(blob)
    np.testing.assert_allclose(model.predict_proba(X_test), proba, rtol=RTOL, atol=0)
    assert model.noise_rate_ >= 0
    # A loaded model is a fitted estimator of this version: it pickles and refits.
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(X_test), model.predict(X_test))
