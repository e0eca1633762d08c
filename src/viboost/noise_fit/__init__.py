"""The noise fit of the robust preset: cross-fitting and the calibration of the noise model.

- :mod:`viboost.noise_fit.cross_fit`: the folds, the score of a round count, early stopping and
  the cross-fitting driver that both estimators run (boosters on the folds in lockstep, the
  calibration every ``CHECK_EVERY`` rounds, the refit on ``s_n phi_n``);
- :mod:`viboost.noise_fit.calibration`: theta, xi and the scale of ``H`` fitted to out-of-fold
  margins by the model's marginal likelihood, with a Laplace posterior;
- :mod:`viboost.noise_fit.class_calibration`: the same for K classes (theta, pi, the scale),
  with each row's posterior of its true class, the joint of given and true labels and the
  noise matrix;
- :mod:`viboost.noise_fit.laplace`: the Laplace approximation both calibrations use.
"""
