"""The boosting engine: binning, base learners and their search, reweighting, the booster.

One module per stage, as in scikit-learn's ``_hist_gradient_boosting``:

- :mod:`viboost.boosting.binning`: features binned once per fit (at most 255 bins);
- :mod:`viboost.boosting.stumps`: decision stumps and their search (exact, or by histograms);
- :mod:`viboost.boosting.reweighting`: the margins ``H`` and the next round's search weights.
"""
