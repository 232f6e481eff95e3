"""The examples run end to end (they are part of what a user reads first)."""
import os
import runpy

import numpy as np

import lucid

EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, "examples")


def test_quickstart_runs(capsys):
    runpy.run_path(os.path.join(EXAMPLES, "quickstart.py"), run_name="__main__")
    assert "dy/dx" in capsys.readouterr().out


def test_two_layer_classifier_learns_the_spirals():
    mod = runpy.run_path(os.path.join(EXAMPLES, "train_classifier.py"))
    test_acc = mod["main"]()
    # chance is 1/3; a linear model cannot separate interleaved spirals (checked below)
    assert test_acc > 0.9


def test_spirals_are_not_linearly_separable():
    """The classifier test means something only if a linear model fails on the data."""
    mod = runpy.run_path(os.path.join(EXAMPLES, "train_classifier.py"))
    x, y = mod["spirals"]()
    feats = np.concatenate([x, np.ones((len(x), 1), np.float32)], axis=1)
    onehot = np.eye(3)[y]
    w, *_ = np.linalg.lstsq(feats, onehot, rcond=None)
    linear_acc = np.mean(np.argmax(feats @ w, axis=1) == y)
    assert linear_acc < 0.7
    assert lucid.is_grad_enabled()


def test_numpy_gaussian_fit_matches_the_closed_form():
    """An unmodified NumPy routine, differentiated by lucid, finds the MLE."""
    mod = runpy.run_path(os.path.join(EXAMPLES, "numpy_gaussian_fit.py"))
    mu, sigma, data = mod["main"]()
    assert abs(mu - data.mean()) < 1e-3
    assert abs(sigma - data.std()) < 1e-3
