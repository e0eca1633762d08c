"""Fit time of VIBoostClassifier on all of Spambase (4,601 rows, 100 rounds), best of 3.

Run: ``python benchmarks/fit_spambase.py``. Prints one line per variant (paper defaults,
modification (a) with one inner iteration, the core model, the exact mode).
"""

import time

from viboost import VIBoostClassifier
from viboost.datasets import load_spambase

X, y = load_spambase(return_X_y=True)
for kw in [{}, {"fixed_vi_iter": 1}, {"noise_model": False}, {"alpha": "exact"}]:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        clf = VIBoostClassifier(100, **kw).fit(X, y)
        times.append(time.perf_counter() - start)
    print(
        kw or "defaults",
        f"fit {min(times):.2f} s (best of 3)",
        f"train acc {clf.score(X, y):.4f}",
        f"snr {clf.snr_:.4g} noise grade {clf.noise_grade_:.4g}",
        f"inner iters {clf.n_vi_iter_.sum()}",
    )
