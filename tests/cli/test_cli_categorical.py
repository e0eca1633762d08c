"""The command line with categorical features: text columns fitted as categories (issue 53)."""

from __future__ import annotations

import inspect

import joblib
import numpy as np
import pandas as pd
import pytest

from viboost.cli import main
from viboost.fitting.data import InMemoryData

pytestmark = [
    pytest.mark.skipif(
        "n_categories" not in inspect.signature(InMemoryData).parameters,
        reason="engine not yet categorical",
    ),
    pytest.mark.filterwarnings("ignore:The out-of-fold score was best"),
]


def _frame(n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    colour = rng.choice(["red", "green", "blue"], size=n)
    code = rng.choice(["007", "012", "100"], size=n)
    label = np.where(np.isin(colour, ["red", "blue"]) ^ (code == "007"), "yes", "no")
    return pd.DataFrame({"f0": rng.normal(size=n), "colour": colour, "code": code, "y": label})


def test_fit_notes_text_columns_and_predict_reads_them(tmp_path, capsys):
    frame = _frame()
    data = tmp_path / "data.csv"
    frame.to_csv(data, index=False)
    model_path = tmp_path / "m.joblib"
    args = ["fit", str(data), "--target", "y", "-o", str(model_path), "--n-estimators", "20"]
    assert main([*args, "--categorical", "code"]) == 0
    err = capsys.readouterr().err
    assert "'colour', 'code'" in err and "fitted as categorical features" in err
    model = joblib.load(model_path)
    assert model.is_categorical_.tolist() == [False, True, True]
    assert model.categories_[2].tolist() == ["007", "012", "100"]  # read as text: 007 stays
    assert model.score(frame.drop(columns="y"), frame["y"]) > 0.9
    # predict reads the model's string columns as text; an unseen colour is no error.
    new = frame.drop(columns="y").head(5).assign(colour=["purple", "red", "red", "blue", "red"])
    new.to_csv(tmp_path / "new.csv", index=False)
    out = tmp_path / "out.csv"
    assert main(["predict", str(model_path), str(tmp_path / "new.csv"), "-o", str(out)]) == 0
    predicted = pd.read_csv(out)
    expected = model.predict(new.astype({"code": str}))
    assert predicted["prediction"].tolist() == expected.tolist()


def test_noise_fits_text_columns_as_categorical(tmp_path, capsys):
    data = tmp_path / "data.csv"
    _frame().to_csv(data, index=False)
    args = ["noise", str(data), "--target", "y", "--n-estimators", "20", "--top", "3"]
    assert main(args) == 0
    captured = capsys.readouterr()
    # code (007, 012, 100) reads as numbers without --categorical: colour alone is text.
    assert "column(s) 'colour' of" in captured.err and "fitted as categorical" in captured.err
    assert "rank" in captured.out


@pytest.mark.parametrize("preset", ["robust", "paper"])
def test_inspect_prints_a_categorical_split_by_its_category_names(tmp_path, capsys, preset):
    frame = _frame().drop(columns=["f0", "code"])  # the colour alone decides most labels
    data = tmp_path / "data.csv"
    frame.to_csv(data, index=False)
    model_path = tmp_path / "m.joblib"
    args = ["fit", str(data), "--target", "y", "-o", str(model_path), "--n-estimators", "5"]
    assert main([*args, "--preset", preset]) == 0
    capsys.readouterr()
    assert main(["inspect", str(model_path)]) == 0
    out = capsys.readouterr().out
    model = joblib.load(model_path)
    learner = model.estimators_[0 if preset == "paper" else 1]
    words = (
        learner.left_categories if preset == "paper" else learner.nodes[0]["left_categories"]
    )
    bits = np.unpackbits(np.asarray(words, dtype="<u8").view(np.uint8), bitorder="little")
    names = [str(model.categories_[0][c]) for c in np.flatnonzero(bits)[:3]]
    assert names and "{" + ", ".join(names) + "}" in out
