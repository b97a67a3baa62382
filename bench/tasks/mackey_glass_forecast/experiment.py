"""Baseline: a linear autoregressive forecast of the Mackey-Glass series HORIZON samples ahead
from the LAGS latest values, fitted by ridge regression in closed form with NumPy. The training
windows are cut from train.csv; the penalty is chosen on the last quarter of them (a split in
time, no shuffling) and the model refitted on all. The baseline is deterministic; --seed seeds
NumPy for methods that draw random numbers.

Reads train.csv (t, x) and test_inputs.csv (id, lag_29 .. lag_0: the 30 latest values up to the
forecast origin). Writes {out_dir}/predictions.csv (id, prediction: the value HORIZON samples
after lag_0) for the held-out windows; the topic's scorer (score.py) computes the NRMSE.
"""
import argparse
import csv
import os

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--out_dir", required=True)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()
np.random.seed(args.seed)

LAGS = 30          # values per input window (the held-out windows hold 30)
HORIZON = 20       # samples ahead to forecast (fixed by the task)
PENALTIES = [1e-6, 1e-4, 1e-2, 1.0]


def windows(x):
    """Inputs (the LAGS values up to each origin, oldest first) and targets HORIZON samples later."""
    n = len(x) - LAGS - HORIZON + 1
    inputs = np.stack([x[i:i + LAGS] for i in range(n)])
    return inputs, x[LAGS - 1 + HORIZON:LAGS - 1 + HORIZON + n]


def fit(inputs, targets, penalty):
    a = np.hstack([inputs, np.ones((len(inputs), 1))])
    reg = penalty * np.eye(a.shape[1])
    reg[-1, -1] = 0.0  # the intercept is not penalised
    return np.linalg.solve(a.T @ a + reg, a.T @ targets)


def predict(w, inputs):
    return np.hstack([inputs, np.ones((len(inputs), 1))]) @ w


with open("train.csv") as f:
    x = np.array([float(r["x"]) for r in csv.DictReader(f)])
with open("test_inputs.csv") as f:
    rows = list(csv.DictReader(f))
ids = [r["id"] for r in rows]
test_inputs = np.array([[float(r[f"lag_{k}"]) for k in range(LAGS - 1, -1, -1)] for r in rows])
print(f"data: {len(x)} training samples, {len(ids)} held-out windows", flush=True)

inputs, targets = windows(x)
cut = int(len(inputs) * 0.75)
errors = {}
for p in PENALTIES:
    w = fit(inputs[:cut], targets[:cut], p)
    errors[p] = float(np.sqrt(np.mean((predict(w, inputs[cut:]) - targets[cut:]) ** 2)))
best = min(errors, key=errors.get)
print("validation RMSE by penalty: " + ", ".join(f"{p:g}: {e:.4f}" for p, e in errors.items())
      + f" -> {best:g}", flush=True)
pred = predict(fit(inputs, targets, best), test_inputs)

os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "predictions.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "prediction"])
    w.writerows([i, f"{p:.6f}"] for i, p in zip(ids, pred))
print(f"wrote {len(pred)} predictions")
