"""Tests of viboost.plotting: each plot's artists, the cases with nothing to plot, write_plots."""

from __future__ import annotations

import copy

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from viboost import GibbsSampler, VIBoostClassifier  # noqa: E402
from viboost.boosting.trees import HistogramTree  # noqa: E402
from viboost.plotting import (  # noqa: E402
    plot_clean_proba,
    plot_elbo,
    plot_gibbs_posterior,
    plot_noise_matrix,
    plot_noise_paths,
    plot_noise_rate_posterior,
    plot_suspects,
    write_plots,
)
from viboost.presets import PRESETS


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    y = (X[:, 0] > 0).astype(int)
    flipped = rng.random(150) < 0.1
    y[flipped] = 1 - y[flipped]
    return X, y, flipped


@pytest.fixture(scope="module")
def paper(data):
    X, y, _ = data
    return VIBoostClassifier(20, preset="paper").fit(X, y)


@pytest.fixture(scope="module")
def robust(data):
    X, y, _ = data
    return VIBoostClassifier(n_estimators=60, random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def small_trees(data):
    """A cross-fitted fit of 4-leaf trees with per-leaf weights (20 rounds with the intercept)."""
    X, y, _ = data
    return VIBoostClassifier(20, max_leaf_nodes=4, min_samples_leaf=5, random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def default_trees(data):
    """The default fit: the robust preset's 8-leaf trees with per-leaf weights."""
    X, y, _ = data
    return VIBoostClassifier(random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def paper_trees(data):
    """Algorithm 1 (in-sample noise model) with 4-leaf trees with tied +-1 leaves."""
    X, y, _ = data
    return VIBoostClassifier(20, preset="paper", max_leaf_nodes=4, min_samples_leaf=5).fit(X, y)


@pytest.fixture(scope="module")
def paper_per_leaf(data):
    """Algorithm 1's in-sample loop with 4-leaf trees with per-leaf weights (and an intercept)."""
    X, y, _ = data
    return VIBoostClassifier(
        20, preset="paper", max_leaf_nodes=4, min_samples_leaf=5, leaf_weights="per-leaf"
    ).fit(X, y)


TREE_FITS = ["small_trees", "default_trees"]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _assert_axes_array(result, n_panels):
    """The multi-panel plots return a 1-d numpy array of Axes (as the README says)."""
    assert isinstance(result, np.ndarray) and not isinstance(result, Axes)
    assert result.shape == (n_panels,) and result.dtype == object
    assert all(isinstance(axis, Axes) for axis in result)


def test_plot_elbo_paper_marks_falls(paper):
    ax = plot_elbo(paper)
    assert isinstance(ax, Axes)
    line, falls = ax.get_lines()
    assert line.get_xdata().tolist() == list(range(1, 21))
    np.testing.assert_allclose(line.get_ydata(), [trace[-1] for trace in paper.elbo_])
    n_fell = sum(bool(np.any(np.diff(trace) < 0)) for trace in paper.elbo_)
    assert len(falls.get_xdata()) == n_fell
    assert f"{n_fell} of 20 rounds" in ax.get_legend().get_texts()[1].get_text()
    assert "ELBO" in ax.get_title()


def test_plot_elbo_robust_is_core_evidence(robust):
    ax = plot_elbo(robust)
    assert isinstance(ax, Axes)
    assert len(ax.get_lines()) == 1
    assert len(ax.get_lines()[0].get_xdata()) == len(robust.estimators_)
    assert "cross-fitted" in ax.get_title() and "log evidence" in ax.get_title()


def test_plot_elbo_uses_given_axes(paper):
    _, ax = plt.subplots()
    assert plot_elbo(paper, ax=ax) is ax


def test_plot_elbo_without_trace_raises(data):
    X, y, _ = data
    model = VIBoostClassifier(5, preset="paper", fixed_vi_iter=2).fit(X, y)
    with pytest.raises(ValueError, match="fixed_vi_iter=2"):
        plot_elbo(model)


def test_plot_noise_paths_paper(paper):
    axes = plot_noise_paths(paper)
    _assert_axes_array(axes, 2)
    snr_ax, grade_ax = axes
    np.testing.assert_allclose(snr_ax.get_lines()[0].get_ydata(), paper.snr_path_)
    np.testing.assert_allclose(grade_ax.get_lines()[0].get_ydata(), paper.noise_grade_path_)
    assert snr_ax.get_ylabel().startswith("SNR")
    assert grade_ax.get_xlabel() == "round"


def test_plot_noise_paths_single_axes_twins(paper):
    _, ax = plt.subplots()
    axes = plot_noise_paths(paper, ax=ax)
    _assert_axes_array(axes, 2)
    assert axes[0] is ax and axes[1] is not ax
    assert axes[1].get_ylabel() == "noise grade xi"


def test_multi_panel_plots_return_the_given_axes(paper):
    _, pair = plt.subplots(1, 2)
    axes = plot_noise_paths(paper, ax=pair)
    _assert_axes_array(axes, 2)
    assert axes[0] is pair[0] and axes[1] is pair[1]
    rng = np.random.default_rng(0)
    draws = {"theta": rng.uniform(0.5, 1.0, 50), "xi": rng.normal(size=50)}
    _, pair = plt.subplots(1, 2)
    axes = plot_gibbs_posterior(draws, paper, ax=list(pair))
    _assert_axes_array(axes, 2)
    assert axes[0] is pair[0] and axes[1] is pair[1]


def test_plot_noise_paths_cross_fitted(robust):
    assert np.isnan(robust.snr_path_).all()
    axes = plot_noise_paths(robust)
    _assert_axes_array(axes, 1)
    (ax,) = axes
    curve, chosen = ax.get_lines()[0], ax.get_lines()[-1]
    np.testing.assert_array_equal(curve.get_xdata(), robust.cv_rounds_)
    assert chosen.get_xdata()[0] == robust.cv_best_rounds_
    assert f"refit on all rows: {len(robust.estimators_)}" in chosen.get_label()
    title = ax.get_title()
    assert f"{robust.cv_best_rounds_} rounds chosen" in title and "SNR" in title


def test_plot_noise_paths_without_noise_model_raises(data):
    X, y, _ = data
    model = VIBoostClassifier(5, preset="paper", noise_model=False).fit(X, y)
    with pytest.raises(ValueError, match="noise_model=False"):
        plot_noise_paths(model)


@pytest.mark.parametrize("name", ["paper", "robust"])
def test_plot_clean_proba(name, request):
    model = request.getfixturevalue(name)
    ax = plot_clean_proba(model, bins=10)
    assert isinstance(ax, Axes)
    assert len(ax.patches) == 10
    assert sum(p.get_height() for p in ax.patches) == model.mislabel_proba_.size
    assert ax.get_yscale() == "log"


def test_plot_clean_proba_flipped_split(robust, data):
    flipped = data[2]
    ax = plot_clean_proba(robust, flipped=flipped, bins=10, log=False)
    assert len(ax.patches) == 20
    heights = [p.get_height() for p in ax.patches]
    assert sum(heights[:10]) == flipped.sum() and sum(heights[10:]) == (~flipped).sum()
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts[:2] == [f"known flips (n={flipped.sum()})", f"other rows (n={(~flipped).sum()})"]
    assert ax.get_yscale() == "linear"


def test_plot_clean_proba_bad_mask(robust):
    with pytest.raises(ValueError, match="boolean mask"):
        plot_clean_proba(robust, flipped=np.ones(3, dtype=bool))


def test_plot_suspects(robust):
    ax = plot_suspects(robust, top=7)
    assert isinstance(ax, Axes)
    assert len(ax.patches) == 7
    order = np.argsort(-robust.mislabel_proba_, kind="stable")[:7]
    names = [t.get_text() for t in ax.get_yticklabels()]
    assert names == [f"row {i + 1}" for i in order]
    widths = [p.get_width() for p in ax.patches]
    np.testing.assert_allclose(widths, robust.mislabel_proba_[order])
    assert ax.patches[0].get_y() > ax.patches[-1].get_y()  # the most likely at the top
    assert any(line.get_xdata()[0] == 0.5 for line in ax.get_lines())


def test_plot_suspects_labels(robust):
    ids = [f"id{i}" for i in range(robust.mislabel_proba_.size)]
    ax = plot_suspects(robust, top=3, labels=ids)
    order = np.argsort(-robust.mislabel_proba_, kind="stable")[:3]
    assert [t.get_text() for t in ax.get_yticklabels()] == [ids[i] for i in order]
    with pytest.raises(ValueError, match="one entry per training row"):
        plot_suspects(robust, labels=ids[:5])
    with pytest.raises(ValueError, match="positive int"):
        plot_suspects(robust, top=0)


@pytest.mark.parametrize("name", ["paper", "robust"])
def test_plot_gibbs_posterior(name, request, data):
    model = request.getfixturevalue(name)
    X, y, _ = data
    gibbs = GibbsSampler(
        100, n_burnin=50, n_chains=2, classifier=model, store_row_draws=False, random_state=0
    ).fit(X, y)
    axes = plot_gibbs_posterior(gibbs, model, bins=15)
    _assert_axes_array(axes, 2)
    theta_ax, xi_ax = axes
    assert len(theta_ax.patches) == 15 and len(xi_ax.patches) == 15
    vi_theta = theta_ax.get_lines()[-1].get_xdata()[0]
    if model.noise_calibration_ is not None:
        assert vi_theta == pytest.approx(model.noise_calibration_.theta)
    else:
        assert vi_theta == pytest.approx(model.eta_[0] / model.eta_.sum())
    assert xi_ax.get_lines()[-1].get_xdata()[0] == pytest.approx(model.noise_grade_)
    assert theta_ax.get_lines()[0].get_xdata()[0] == pytest.approx(gibbs.clean_rate_draws_.mean())
    # The same draws as a mapping give the same plot.
    draws = {"theta": gibbs.clean_rate_draws_, "xi": gibbs.noise_grade_draws_}
    again = plot_gibbs_posterior(draws, model, bins=15)
    _assert_axes_array(again, 2)
    assert [p.get_height() for p in again[1].patches] == [p.get_height() for p in xi_ax.patches]


def test_plot_gibbs_posterior_bad_input(paper):
    with pytest.raises(TypeError, match="GibbsSampler"):
        plot_gibbs_posterior([1, 2, 3], paper)
    with pytest.raises(ValueError, match="'theta' and 'xi'"):
        plot_gibbs_posterior({"theta": [0.5]}, paper)


def test_write_plots(paper, robust, data, tmp_path):
    flipped = data[2]
    for model, where in [(paper, tmp_path / "paper"), (robust, tmp_path / "a" / "robust")]:
        paths = write_plots(model, where, flipped=flipped, top=5)
        # The posterior of the noise rate: cross-fitted models only.
        posterior = ["noise_rate_posterior.png"] if model is robust else []
        assert [p.name for p in paths] == [
            "elbo.png",
            "noise_paths.png",
            "mislabel_proba.png",
            "suspects.png",
            "noise_matrix.png",
            *posterior,
        ]
        for path in paths:
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert sorted(p.name for p in where.iterdir()) == sorted(p.name for p in paths)
    assert plt.get_fignums() == []


def test_write_plots_skips_what_does_not_apply(data, tmp_path):
    X, y, _ = data
    model = VIBoostClassifier(5, preset="paper", fixed_vi_iter=2, noise_model=False).fit(X, y)
    assert write_plots(model, tmp_path) == []
    assert list(tmp_path.iterdir()) == []
    model = VIBoostClassifier(5, preset="paper", fixed_vi_iter=2).fit(X, y)
    names = [p.name for p in write_plots(model, tmp_path)]
    assert names == ["noise_paths.png", "mislabel_proba.png", "suspects.png", "noise_matrix.png"]
    assert plt.get_fignums() == []


# ------------------------------------------------------------------------------------------ trees
def test_tree_fixtures_fit_trees(small_trees, default_trees, paper_trees, paper_per_leaf):
    for model in (small_trees, default_trees, paper_trees, paper_per_leaf):
        assert not model.plan_.stumps
        assert all(isinstance(learner, HistogramTree) for learner in model.estimators_)
    for model in (small_trees, default_trees, paper_per_leaf):  # per-leaf: an intercept first
        assert model.estimators_[0].n_leaves == 1
        assert max(learner.n_leaves for learner in model.estimators_) <= model.plan_.max_leaf_nodes
    assert small_trees.plan_.max_leaf_nodes == 4
    assert default_trees.plan_.max_leaf_nodes == PRESETS["robust"].max_leaf_nodes
    assert all(learner.n_leaves >= 2 for learner in paper_trees.estimators_)  # no intercept


@pytest.mark.parametrize("name", TREE_FITS)
def test_plots_of_a_cross_fitted_tree_model(name, request, data):
    model = request.getfixturevalue(name)
    flipped = data[2]
    n_rounds = len(model.estimators_)

    ax = plot_elbo(model)
    (line,) = ax.get_lines()
    assert line.get_xdata().tolist() == list(range(1, n_rounds + 1))
    np.testing.assert_allclose(line.get_ydata(), [trace[-1] for trace in model.elbo_])
    assert "cross-fitted" in ax.get_title()
    assert ax.get_xlabel() == "round (1: the intercept)"

    axes = plot_noise_paths(model)
    _assert_axes_array(axes, 1)
    (ax,) = axes
    np.testing.assert_array_equal(ax.get_lines()[0].get_xdata(), model.cv_rounds_)
    assert ax.get_lines()[-1].get_xdata()[0] == model.cv_best_rounds_
    assert f"{model.cv_best_rounds_} rounds chosen" in ax.get_title()
    assert ax.get_xlabel() == "rounds (the intercept included)"

    ax = plot_clean_proba(model, flipped=flipped, bins=10)
    heights = [p.get_height() for p in ax.patches]
    assert sum(heights[:10]) == flipped.sum() and sum(heights[10:]) == (~flipped).sum()
    assert "calibrated" in ax.get_title()

    ax = plot_suspects(model, top=5)
    order = np.argsort(-model.mislabel_proba_, kind="stable")[:5]
    np.testing.assert_allclose([p.get_width() for p in ax.patches], model.mislabel_proba_[order])

    rng = np.random.default_rng(0)
    draws = {"theta": rng.uniform(0.5, 1.0, 50), "xi": rng.normal(size=50)}
    theta_ax, xi_ax = plot_gibbs_posterior(draws, model, bins=10)
    assert theta_ax.get_lines()[-1].get_xdata()[0] == pytest.approx(model.noise_calibration_.theta)
    assert xi_ax.get_lines()[-1].get_xdata()[0] == pytest.approx(model.noise_grade_)


@pytest.mark.parametrize("name", ["paper_trees", "paper_per_leaf"])
def test_plots_of_an_in_sample_tree_model(name, request):
    model = request.getfixturevalue(name)
    n_rounds = len(model.estimators_)
    intercept = model.plan_.leaf_weights == "per-leaf"
    xlabel = "round (1: the intercept)" if intercept else "round"

    ax = plot_elbo(model)
    line, falls = ax.get_lines()
    assert line.get_xdata().tolist() == list(range(1, n_rounds + 1))
    n_fell = sum(bool(np.any(np.diff(trace) < 0)) for trace in model.elbo_)
    assert len(falls.get_xdata()) == n_fell
    assert "ELBO" in ax.get_title() and ax.get_xlabel() == xlabel

    snr_ax, grade_ax = plot_noise_paths(model)
    np.testing.assert_allclose(snr_ax.get_lines()[0].get_ydata(), model.snr_path_)
    np.testing.assert_allclose(grade_ax.get_lines()[0].get_ydata(), model.noise_grade_path_)
    assert grade_ax.get_xlabel() == xlabel

    ax = plot_clean_proba(model, bins=10)
    assert sum(p.get_height() for p in ax.patches) == model.mislabel_proba_.size
    assert "not calibrated" in ax.get_title()
    assert len(plot_suspects(model, top=4).patches) == 4


@pytest.mark.parametrize("name", [*TREE_FITS, "paper_trees", "paper_per_leaf"])
def test_write_plots_of_a_tree_model(name, request, data, tmp_path):
    model = request.getfixturevalue(name)
    paths = write_plots(model, tmp_path, flipped=data[2], top=5)
    posterior = ["noise_rate_posterior.png"] if model.cv_best_rounds_ > 0 else []
    assert [p.name for p in paths] == [
        "elbo.png",
        "noise_paths.png",
        "mislabel_proba.png",
        "suspects.png",
        "noise_matrix.png",
        *posterior,
    ]
    assert all(path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for path in paths)
    assert plt.get_fignums() == []


def test_tree_core_model_plots_what_applies(data, tmp_path):
    X, y, _ = data
    model = VIBoostClassifier(
        10, preset="paper", max_leaf_nodes=4, leaf_weights="per-leaf", noise_model=False
    ).fit(X, y)
    ax = plot_elbo(model)
    assert "Core model" in ax.get_title() and ax.get_xlabel() == "round (1: the intercept)"
    with pytest.raises(ValueError, match="noise_model=False"):
        plot_noise_paths(model)
    with pytest.raises(ValueError, match="noise_model=False"):
        plot_suspects(model)
    assert [p.name for p in write_plots(model, tmp_path)] == ["elbo.png"]


def test_stump_axes_say_round(paper):
    """The intercept note is for per-leaf tree fits only."""
    assert plot_elbo(paper).get_xlabel() == "round"
    assert plot_noise_paths(paper)[1].get_xlabel() == "round"


# --------------------------------------------------------- issue 23: the noise matrix, K classes
CLASSES = np.array(["ant", "bee", "cat"])


@pytest.fixture(scope="module")
def three_classes():
    """Three classes by bands of x0 (string labels), 10% of labels moved to another class."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(240, 3))
    y = np.digitize(X[:, 0], [-0.4, 0.4])
    moved = rng.random(240) < 0.1
    y[moved] = (y[moved] + rng.integers(1, 3, moved.sum())) % 3
    model = VIBoostClassifier(random_state=0).fit(X, CLASSES[y])
    return model, moved


def _cell_texts(ax):
    return [text.get_text() for text in ax.texts]


def test_plot_noise_matrix_k_classes(three_classes):
    model, _ = three_classes
    ax = plot_noise_matrix(model)
    assert ax.get_xlabel() == "true class" and ax.get_ylabel() == "given label"
    assert [t.get_text() for t in ax.get_xticklabels()] == list(CLASSES)
    assert [t.get_text() for t in ax.get_yticklabels()] == list(CLASSES)
    # One annotation per cell, row by row (given labels), in percent.
    expected = [f"{v:.1%}" for v in model.noise_matrix_.ravel()]
    assert _cell_texts(ax) == expected
    image = ax.get_images()[0]
    np.testing.assert_allclose(image.get_array(), model.noise_matrix_)
    assert image.norm.vmin == 0.0 and image.norm.vmax == 1.0
    # The colour bar: a second Axes on the figure, labelled.
    assert len(ax.figure.axes) == 2
    assert ax.figure.axes[1].get_ylabel() == "P(given label | true class)"
    title = ax.get_title()
    assert "Noise matrix" in title and f"{model.noise_rate_:.1%} (90% interval" in title


@pytest.mark.parametrize("name", ["paper", "robust"])
def test_plot_noise_matrix_two_classes(name, request):
    model = request.getfixturevalue(name)
    ax = plot_noise_matrix(model)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1"]
    assert _cell_texts(ax) == [f"{v:.1%}" for v in model.noise_matrix_.ravel()]
    np.testing.assert_allclose(model.noise_matrix_.sum(axis=0), 1.0)
    calibrated = "in-sample" not in ax.get_title()
    assert calibrated == (name == "robust")


def test_plot_noise_matrix_options_and_errors(three_classes, data, paper):
    model, _ = three_classes
    fig, axes = plt.subplots(1, 2)
    ax = plot_noise_matrix(model, ax=axes[1], annotate=False, colorbar=False, gamma=1.0)
    assert ax is axes[1] and len(ax.texts) == 0 and len(fig.axes) == 2
    assert ax.get_images()[0].norm.gamma == 1.0
    for gamma in (0, -1.0, True, "1"):
        with pytest.raises(ValueError, match="gamma must be a positive number"):
            plot_noise_matrix(model, gamma=gamma)
    X, y, _ = data
    core = VIBoostClassifier(5, preset="paper", noise_model=False).fit(X, y)
    with pytest.raises(ValueError, match="noise_model=False"):
        plot_noise_matrix(core)
    # A true class that no row is expected to have: an n/a cell, drawn grey.
    patched = copy.copy(paper)
    patched.noise_matrix_ = np.array([[1.0, np.nan], [0.0, np.nan]])
    assert _cell_texts(plot_noise_matrix(patched)) == ["100.0%", "n/a", "0.0%", "n/a"]
    del patched.noise_matrix_  # a model saved before the noise matrix existed
    with pytest.raises(ValueError, match="refit"):
        plot_noise_matrix(patched)


def test_k_class_plots(three_classes):
    model, moved = three_classes
    # The cross-fitted log-likelihood, titled with the share of wrong labels (no noise grade).
    (cv_ax,) = plot_noise_paths(model)
    assert "3 classes" in cv_ax.get_title() and "share of wrong labels" in cv_ax.get_title()
    assert "nan" not in cv_ax.get_title()
    ax = plot_clean_proba(model, flipped=moved)
    assert sum(p.get_height() for p in ax.patches) == moved.size
    assert len(plot_suspects(model, top=6).patches) == 6
    # The ELBO: one line per class where the fit recorded it, a clear error where it did not.
    recorded = copy.copy(model)
    recorded.elbo_ = [[np.array([-50.0 + t + k]) for k in range(3)] for t in range(4)]
    ax = plot_elbo(recorded)
    assert [line.get_label() for line in ax.get_lines()] == ["class ant", "class bee", "class cat"]
    np.testing.assert_allclose(ax.get_lines()[1].get_ydata(), [-49.0, -48.0, -47.0, -46.0])
    recorded.elbo_ = [[np.array([]) for _ in range(3)] for _ in range(4)]
    with pytest.raises(ValueError, match="no ELBO to plot: a fit of 3 classes"):
        plot_elbo(recorded)
    # The Gibbs sampler samples the binary model: a clear error before any drawing.
    with pytest.raises(ValueError, match="this model has 3 classes"):
        plot_gibbs_posterior({"theta": [0.9], "xi": [0.0]}, model)


def test_write_plots_of_a_k_class_model(three_classes, tmp_path):
    model, moved = three_classes
    names = [p.name for p in write_plots(model, tmp_path, flipped=moved, top=5)]
    assert names[-5:] == ["noise_paths.png", "mislabel_proba.png", "suspects.png",
                          "noise_matrix.png", "noise_rate_posterior.png"]  # fmt: skip
    assert set(names) <= {"elbo.png", *names[-5:]}
    assert all((tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for name in names)
    assert plt.get_fignums() == []


def test_plot_noise_rate_posterior(robust, three_classes):
    from viboost.noise_fit.posterior import weighted_quantiles

    for model in (robust, three_classes[0]):
        draws = model.noise_rate_draws_
        # Weighted draws of the share of wrong labels: "no noise" first, probabilities
        # summing to 1, whose quantiles are the reported interval.
        assert draws.shape[1] == 2 and draws[0, 0] == 0.0
        assert draws[0, 1] == model.no_noise_proba_
        assert draws[:, 1].sum() == pytest.approx(1.0, rel=1e-12)
        bounds = weighted_quantiles(draws[:, :1], draws[:, 1], [0.05, 0.95])[0]
        np.testing.assert_array_equal(bounds, model.noise_rate_interval_)
        ax = plot_noise_rate_posterior(model, bins=12)
        assert ax.get_xlabel() == "share of wrong training labels"
        bars = [bar.get_height() for container in ax.containers for bar in container]
        # The histogram's bins hold the noise model's probability, the bar at 0 no noise's.
        assert sum(bars) == pytest.approx(1.0, rel=1e-9)
        assert max(bars) >= model.no_noise_proba_ - 1e-12
        legend = " ".join(text.get_text() for text in ax.get_legend().get_texts())
        assert f"no noise (P = {model.no_noise_proba_:.2f})" in legend
        plt.close(ax.figure)


def test_plot_noise_rate_posterior_errors(paper, robust):
    with pytest.raises(ValueError, match="no posterior of the noise model"):
        plot_noise_rate_posterior(paper)
    with pytest.raises(ValueError, match="bins must be a positive integer"):
        plot_noise_rate_posterior(robust, bins=0)
    old = copy.copy(robust)
    del old.noise_rate_draws_  # as saved by a version that did not keep it
    with pytest.raises(ValueError, match="no noise_rate_draws_"):
        plot_noise_rate_posterior(old)
    assert plt.get_fignums() == []
