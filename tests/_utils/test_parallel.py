"""n_jobs and numba's threads: scikit-learn's meaning, the work threshold, the thread count
restored after every call, and results bit-identical for every n_jobs."""

from __future__ import annotations

import threading

import joblib
import numba
import numpy as np
import pytest
from oracles import sparse_feature_rows
from sklearn.model_selection import GridSearchCV

import viboost._utils.parallel as parallel
import viboost.boosting.booster as viboost_booster
from viboost import GibbsSampler, VIBoostClassifier
from viboost._utils.parallel import (
    ThreadedKernel,
    kernel_threads,
    max_threads,
    numba_threads,
    resolve_n_jobs,
    threaded_kernel,
)

several_threads = pytest.mark.skipif(
    max_threads() < 2, reason="numba's pool has one thread (NUMBA_NUM_THREADS=1)"
)


@pytest.fixture
def no_threshold(monkeypatch):
    """Every kernel on the threads n_jobs asks for, whatever the size of the call."""
    monkeypatch.setattr(parallel, "WORK_THRESHOLD", 0)


@pytest.fixture
def spy_threads(monkeypatch):
    """numba's thread count seen by each boosting round (in the thread that runs the fit)."""
    seen: list[int] = []
    round_inference = viboost_booster.run_round

    def spying(*args, **kwargs):
        seen.append(numba.get_num_threads())
        return round_inference(*args, **kwargs)

    monkeypatch.setattr(viboost_booster, "run_round", spying)
    return seen


# ---------------------------------------------------------------------- the policy
def test_resolve_n_jobs_has_scikit_learn_meaning_and_none_is_all_cores():
    assert resolve_n_jobs(None) == max_threads()  # as HGB and LightGBM (issue 54)
    with joblib.parallel_config(n_jobs=1):
        assert resolve_n_jobs(None) == 1  # a context's count wins over the default
    assert resolve_n_jobs(1) == 1
    assert resolve_n_jobs(-1) == max_threads()
    assert resolve_n_jobs(10**6) == max_threads()  # capped at numba's pool
    with joblib.parallel_config(n_jobs=2):
        assert resolve_n_jobs(None) == min(2, max_threads())
        assert resolve_n_jobs(1) == 1  # an explicit value wins over the context
    with joblib.parallel_config(n_jobs=-1):
        assert resolve_n_jobs(None) == max_threads()
    with pytest.raises(ValueError, match="n_jobs == 0"):
        resolve_n_jobs(0)
    with pytest.raises(TypeError, match="n_jobs"):
        resolve_n_jobs(2.0)


def test_kernel_threads_one_thread_below_the_threshold():
    assert kernel_threads(-1, parallel.WORK_THRESHOLD - 1) == 1
    assert kernel_threads(-1, parallel.WORK_THRESHOLD) == max_threads()
    assert kernel_threads(None, 10**12) == max_threads()  # the default: all cores
    assert kernel_threads(None, parallel.WORK_THRESHOLD - 1) == 1
    with pytest.raises(ValueError):
        kernel_threads(0, 1)  # n_jobs is validated even when the call is small


@several_threads
def test_numba_threads_restores_the_count_also_on_error():
    before = numba.get_num_threads()
    with numba_threads(1):
        assert numba.get_num_threads() == 1
        with numba_threads(10**6) as n:  # capped
            assert n == max_threads() == numba.get_num_threads()
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == before
    with pytest.raises(RuntimeError), numba_threads(1):
        raise RuntimeError
    assert numba.get_num_threads() == before


@several_threads
def test_numba_threads_is_thread_local():
    seen = {}

    def worker():
        with numba_threads(1):
            seen["inside"] = numba.get_num_threads()
        seen["after"] = numba.get_num_threads()

    before = numba.get_num_threads()
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == {"inside": 1, "after": max_threads()}
    assert numba.get_num_threads() == before


# ---------------------------------------------------------------------- VIBoostClassifier
def _large_data(n=140_000, d=3, seed=0):
    """Enough rows for several row chunks in every kernel (and compressed rounds)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.random(n) < 0.01, 1] = np.nan
    y = (X[:, 0] - 0.5 * np.nan_to_num(X[:, 1]) + rng.normal(size=n) > 0).astype(int)
    return X, y


def _assert_same_fit(a: VIBoostClassifier, b: VIBoostClassifier, X: np.ndarray) -> None:
    assert a.estimators_ == b.estimators_
    for name in ("alphas_", "n_vi_iter_", "snr_path_", "noise_grade_path_", "clean_proba_",
                 "eta_", "omega_"):  # fmt: skip
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert len(a.elbo_) == len(b.elbo_)
    for trace_a, trace_b in zip(a.elbo_, b.elbo_, strict=True):
        np.testing.assert_array_equal(trace_a, trace_b)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))


@several_threads
@pytest.mark.parametrize("max_bins", [255, None])
def test_fit_bit_identical_across_n_jobs(no_threshold, spy_threads, max_bins):
    X, y = _large_data() if max_bins else _large_data(n=20_000)
    # The exhaustive search builds stumps only.
    stumps = {} if max_bins else dict(max_leaf_nodes=2, leaf_weights="tied")
    kwargs = dict(n_estimators=4, max_bins=max_bins, random_state=0, **stumps)
    reference = VIBoostClassifier(**kwargs, n_jobs=1).fit(X, y)
    assert set(spy_threads) == {1}
    for n_jobs in (2, -1, None):  # None: all cores, as -1 (issue 54)
        spy_threads.clear()
        clf = VIBoostClassifier(**kwargs, n_jobs=n_jobs).fit(X, y)
        assert set(spy_threads) == {min(2, max_threads())}  # the kernels did run in parallel
        _assert_same_fit(reference, clf, X)
    spy_threads.clear()
    with joblib.parallel_config(n_jobs=2):
        clf = VIBoostClassifier(**kwargs).fit(X, y)
    assert set(spy_threads) == {2}
    _assert_same_fit(reference, clf, X)


@several_threads
@pytest.mark.parametrize("n_classes", [2, 3])
def test_fit_on_sparse_features_bit_identical_across_n_jobs(no_threshold, spy_threads, n_classes):
    """One-hot and mostly-zero features (read by their entries: histogram.sparse_bins), K
    classes too (the trees of a step grown together: growth.TreeGrowths)."""
    X, signal, rng = sparse_feature_rows(3_000, 12, 3, 2, seed=5)
    y = np.digitize(signal + rng.logistic(size=X.shape[0]) * 0.5, [0.3, 1.2][: n_classes - 1])
    kwargs = dict(n_estimators=12, random_state=0)
    one = VIBoostClassifier(**kwargs, n_jobs=1).fit(X, y)
    spy_threads.clear()
    two = VIBoostClassifier(**kwargs, n_jobs=2).fit(X, y)
    assert set(spy_threads) == {2}  # the kernels did run in parallel
    np.testing.assert_array_equal(one.decision_function(X), two.decision_function(X))
    np.testing.assert_array_equal(one.mislabel_proba_, two.mislabel_proba_)


@several_threads
@pytest.mark.filterwarnings("ignore:The out-of-fold score was best at n_estimators")
@pytest.mark.parametrize("n_classes", [2, 3])
def test_noise_statistics_bit_identical_across_n_jobs(no_threshold, n_classes):
    """The noise models' sums over several chunks of rows (:func:`parallel.sum_chunks`: 5,000
    rows are two), on one thread and two: the same noise statistics bit for bit."""
    n = 5_000
    assert parallel.sum_chunks(n) == 2
    X, y = _large_data(n=n)
    if n_classes == 3:
        y = np.digitize(X[:, 0] + np.random.default_rng(1).logistic(size=n), [-0.5, 0.5])
    kwargs = dict(n_estimators=10, random_state=0)
    one = VIBoostClassifier(**kwargs, n_jobs=1).fit(X, y)
    two = VIBoostClassifier(**kwargs, n_jobs=2).fit(X, y)
    for name in ("clean_proba_", "mislabel_proba_", "noise_rate_interval_", "flip_rates_"):
        np.testing.assert_array_equal(getattr(one, name), getattr(two, name), err_msg=name)
    np.testing.assert_array_equal(one.decision_function(X), two.decision_function(X))


def test_small_fit_runs_on_one_thread(spy_threads):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] > 0).astype(int)
    before = numba.get_num_threads()
    clf = VIBoostClassifier(3, n_jobs=-1).fit(X, y)
    assert set(spy_threads) == {1}
    assert numba.get_num_threads() == before
    clf.predict(X)
    assert numba.get_num_threads() == before


@several_threads
def test_thread_count_restored_after_fit_and_predict(no_threshold, spy_threads):
    X, y = _large_data(n=2_000)
    with numba_threads(1):
        clf = VIBoostClassifier(3, n_jobs=2).fit(X, y)
        assert set(spy_threads) == {2}
        assert numba.get_num_threads() == 1
        for method in ("predict", "predict_proba", "predict_log_proba", "decision_function"):
            getattr(clf, method)(X)
            assert numba.get_num_threads() == 1, method
    with numba_threads(2):
        VIBoostClassifier(3, n_jobs=1).fit(X, y).predict(X)
        assert numba.get_num_threads() == 2


@several_threads
def test_thread_count_restored_when_fit_raises(no_threshold, monkeypatch):
    X, y = _large_data(n=2_000)
    seen = []

    def failing(*args, **kwargs):
        seen.append(numba.get_num_threads())
        raise RuntimeError("boom")

    monkeypatch.setattr(viboost_booster, "run_round", failing)
    with numba_threads(1):
        with pytest.raises(RuntimeError, match="boom"):
            VIBoostClassifier(3, n_jobs=2).fit(X, y)
        assert seen == [2]
        assert numba.get_num_threads() == 1


def test_n_jobs_validated():
    X, y = _large_data(n=200)
    with pytest.raises(ValueError, match="'n_jobs' parameter"):  # InvalidParameterError
        VIBoostClassifier(2, n_jobs="2").fit(X, y)
    with pytest.raises(ValueError, match="n_jobs == 0"):
        VIBoostClassifier(2, n_jobs=0).fit(X, y)


def test_model_saved_without_n_jobs_loads():
    X, y = _large_data(n=200)
    clf = VIBoostClassifier(2).fit(X, y)
    state = clf.__getstate__()
    del state["n_jobs"]
    loaded = VIBoostClassifier.__new__(VIBoostClassifier)
    loaded.__setstate__(state)
    assert loaded.n_jobs is None
    np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))


@several_threads
@pytest.mark.parametrize("backend", ["threading", "loky"])
def test_grid_search_in_parallel_workers(backend):
    """GridSearchCV(n_jobs=2): each worker sets (and restores) its own count; same results."""
    X, y = _large_data(n=600)
    grid = {"n_estimators": [2, 4], "n_jobs": [None, -1]}
    before = numba.get_num_threads()
    serial = GridSearchCV(VIBoostClassifier(random_state=0), grid, cv=2).fit(X, y)
    with joblib.parallel_config(backend=backend):
        search = GridSearchCV(VIBoostClassifier(random_state=0), grid, cv=2, n_jobs=2).fit(X, y)
    assert numba.get_num_threads() == before
    np.testing.assert_array_equal(
        serial.cv_results_["mean_test_score"], search.cv_results_["mean_test_score"]
    )


# ---------------------------------------------------------------------- GibbsSampler
def _gibbs_problem():
    rng = np.random.default_rng(3)
    outputs = rng.choice([-1.0, 1.0], size=(400, 3))
    y = np.where(rng.random(400) < 0.85, outputs[:, 0], -outputs[:, 0])
    return outputs, y


def _assert_same_draws(a: GibbsSampler, b: GibbsSampler, X: np.ndarray) -> None:
    for name in ("weight_draws_", "noise_grade_draws_", "clean_rate_draws_",
                 "clean_proba_draws_", "clean_proba_", "weights_"):  # fmt: skip
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.snr_ == b.snr_ and a.noise_grade_ == b.noise_grade_
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))


def test_gibbs_bit_identical_across_n_jobs():
    outputs, y = _gibbs_problem()
    kwargs = dict(n_draws=60, n_burnin=20, n_chains=3, random_state=0)
    before = numba.get_num_threads()
    reference = GibbsSampler(**kwargs, n_jobs=1).fit(outputs, y)
    for n_jobs in (2, -1):
        sampler = GibbsSampler(**kwargs, n_jobs=n_jobs).fit(outputs, y)
        _assert_same_draws(reference, sampler, outputs)
    with joblib.parallel_config(n_jobs=2):
        sampler = GibbsSampler(**kwargs).fit(outputs, y)
    _assert_same_draws(reference, sampler, outputs)
    with joblib.parallel_config(backend="loky", n_jobs=2):  # chains stay in threads
        sampler = GibbsSampler(**kwargs).fit(outputs, y)
    _assert_same_draws(reference, sampler, outputs)
    assert numba.get_num_threads() == before


def test_gibbs_threads_never_exceed_n_jobs(monkeypatch):
    """At most n_jobs chains at once, and each chain's numba count keeps the total in bounds."""
    import viboost.gibbs.sampler

    outputs, y = _gibbs_problem()
    lock = threading.Lock()
    running, peak, counts = [0], [0], []
    run_chain = viboost.gibbs.sampler.run_chain

    def counting(*args):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            counts.append(numba.get_num_threads())
        try:
            return run_chain(*args)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(viboost.gibbs.sampler, "run_chain", counting)
    for n_jobs in (1, -1):
        peak[0], counts[:] = 0, []
        GibbsSampler(40, n_burnin=10, n_chains=4, n_jobs=n_jobs, random_state=0).fit(outputs, y)
        threads = resolve_n_jobs(n_jobs)
        assert peak[0] <= threads
        assert all(c * min(threads, 4) <= threads for c in counts)


# ---------------------------------------------------------------------- ThreadedKernel
def _chunk_sums(x):
    """Four sums of every fourth value (the source of the kernels below)."""
    out = np.zeros(4)
    for c in numba.prange(4):
        for i in range(c, x.shape[0], 4):
            out[c] += x[i]
    return out


_quarter_sums = threaded_kernel()(_chunk_sums)


def _serial_then_parallel(kernel, x, inner):
    """``kernel(x)`` on one thread, then (numba's pool allowing) on two: ``inner``'s parallel
    form compiles only then, and both give the same numbers. Returns the serial result."""
    with numba_threads(1):
        serial = kernel(x)
    assert len(kernel.serial.signatures) == 1
    assert len(inner.parallel.signatures) == 0  # never compiled: never needed
    if max_threads() > 1:
        with numba_threads(2):
            np.testing.assert_array_equal(kernel(x), serial)  # same chunks, same order
        assert len(inner.parallel.signatures) == 1
    assert kernel.serial.py_func.__qualname__.endswith("_serial")  # own cache files
    return serial


def test_threaded_kernel_compiles_only_the_form_a_call_needs():
    chunk_sums = threaded_kernel()(_chunk_sums)  # a fresh kernel: nothing compiled yet
    x = np.random.default_rng(0).normal(size=1001)
    np.testing.assert_allclose(
        _serial_then_parallel(chunk_sums, x, chunk_sums), [x[c::4].sum() for c in range(4)]
    )


def test_a_caller_of_threaded_kernels_calls_the_form_of_its_own():
    # A compiled caller (threaded_kernel(calls=...)) binds the kernels it calls to its own
    # form: its serial form (numba count 1) calls their serial forms only, so a fit on one
    # thread never compiles a parallel form through it; both forms give the same sums.
    @threaded_kernel(calls={"_quarter_sums": _quarter_sums})
    def twice(x):
        return _quarter_sums(x) + _quarter_sums(2.0 * x)

    x = np.random.default_rng(1).normal(size=999)
    want = np.array([x[c::4].sum() + (2.0 * x)[c::4].sum() for c in range(4)])
    np.testing.assert_allclose(_serial_then_parallel(twice, x, _quarter_sums), want, rtol=1e-12)
    assert twice.serial.py_func.__globals__["_quarter_sums"] is _quarter_sums.serial
    assert twice.parallel.py_func.__globals__["_quarter_sums"] is _quarter_sums.parallel
    assert _quarter_sums.__class__ is ThreadedKernel  # the module's own name is unchanged


def test_fit_threads_keeps_blas_on_one_thread_and_restores_it():
    from threadpoolctl import threadpool_info

    from viboost._utils.parallel import fit_threads

    def blas_threads():
        return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]

    before = blas_threads()
    with fit_threads(1) as n:
        assert n == 1
        assert all(count == 1 for count in blas_threads())
    assert blas_threads() == before


@several_threads
def test_compile_up_front_runs_on_the_threads_of_the_fit_to_come(spy_threads, monkeypatch):
    """Its 40,000 x 4 cells are below the work threshold, yet it runs on the threads given,
    so the parallel forms of the kernels compile before a threaded fit, not in it."""
    import viboost.estimator

    monkeypatch.setattr(viboost.estimator, "_COMPILED_UP_FRONT", set())
    monkeypatch.setattr(parallel.ThreadedKernel, "cached", lambda self, parallel: False)
    viboost.estimator._compile_up_front(False, 2, 0)
    assert set(spy_threads) == {2}
    spy_threads.clear()
    viboost.estimator._compile_up_front(False, 2, 0)  # once per process
    assert spy_threads == []


def test_compile_up_front_fits_nothing_when_the_kernels_are_cached(spy_threads, monkeypatch):
    import viboost.estimator

    monkeypatch.setattr(viboost.estimator, "_COMPILED_UP_FRONT", set())
    asked = []

    def cached(self, parallel):
        asked.append((self.__qualname__, parallel))
        return True

    monkeypatch.setattr(parallel.ThreadedKernel, "cached", cached)
    viboost.estimator._compile_up_front(True, 1, 0)
    assert spy_threads == []  # no fit ran
    assert viboost.estimator._COMPILED_UP_FRONT == {(True, False)}
    assert ("_node_histograms", False) in asked and len(asked) >= 3
