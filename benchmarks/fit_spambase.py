"""Fit time of VIBoostClassifier on all of Spambase (4,601 rows, 100 rounds), best of 3.

Run: ``python benchmarks/fit_spambase.py``. Prints one line per variant (the paper's settings,
modification (a) with one inner iteration, the core model, the exact mode). Every variant is the
engine at fixed rounds: preset='paper' (Algorithm 1 as printed, exactly 100 rounds; the default
``preset="robust"`` would cross-fit and choose its own number of rounds).
"""

import time

from viboost import VIBoostClassifier
from viboost.datasets import load_spambase

X, y = load_spambase(return_X_y=True)
for kw in [{}, {"fixed_vi_iter": 1}, {"noise_model": False}, {"alpha": "exact"}]:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        clf = VIBoostClassifier(100, preset="paper", **kw).fit(X, y)
        times.append(time.perf_counter() - start)
    print(
        kw or "preset='paper'",
        f"fit {min(times):.2f} s (best of 3)",
        f"train acc {clf.score(X, y):.4f}",
        f"snr {clf.snr_:.4g} noise grade {clf.noise_grade_:.4g}",
        f"inner iters {clf.n_vi_iter_.sum()}",
    )
