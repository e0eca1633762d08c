"""The noise models: fitted to out-of-fold margins by their marginal likelihood, each behind one
written interface, :class:`~viboost.noise_fit.model.NoiseModel`.

- :mod:`viboost.noise_fit.model`: the interface (rates and intervals, per-class flip rates,
  each label's probability of being wrong, the true-class posterior, the joint of given and
  true labels, the posteriors of theta and of the noisy labels);
- :mod:`viboost.noise_fit.calibration`: two classes: theta, xi and the scale of ``H``, with a
  Laplace posterior;
- :mod:`viboost.noise_fit.class_calibration`: K classes, the paper's channel (theta, pi, the
  scale);
- :mod:`viboost.noise_fit.channel_calibration`: K classes, a class-conditional noise matrix;
- :mod:`viboost.noise_fit.laplace`: the Laplace approximation they use.

The cross-fitting that calibrates them is the fit driver's (:mod:`viboost.fitting.cross_fit`).
"""
