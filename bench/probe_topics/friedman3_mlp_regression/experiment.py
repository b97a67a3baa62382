"""Baseline: a multi-layer perceptron regressor on Friedman's third synthetic regression problem (four
features, target an arctangent of a ratio of them plus noise): the features standardised, then
scikit-learn's MLPRegressor (one hidden layer of 100 ReLU units, Adam on the squared error,
mini-batches, stopped when the training loss stops improving or after max_iter epochs), its random
state (weight initialisation, batch order) set by --seed.

Writes {out_dir}/predictions.csv (id, prediction) for the held-out samples in test_features.csv;
their true values are not here: the topic's scorer (score.py) computes R2 from them.
"""
import argparse
import csv
import os

import numpy as np
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

parser = argparse.ArgumentParser()
parser.add_argument("--out_dir", required=True)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()


def read(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return rows, [k for k in rows[0] if k not in ("id", "target")]


train, features = read("train.csv")
test, _ = read("test_features.csv")
x_train = np.array([[float(r[k]) for k in features] for r in train])
y_train = np.array([float(r["target"]) for r in train])
x_test = np.array([[float(r[k]) for k in features] for r in test])
print(f"data: {len(train)} training / {len(test)} held-out samples, {len(features)} features", flush=True)

model = make_pipeline(
    StandardScaler(),
    MLPRegressor(
        hidden_layer_sizes=(100,),
        activation="relu",
        solver="adam",
        alpha=1e-4,
        batch_size=200,
        learning_rate_init=1e-3,
        max_iter=200,
        random_state=args.seed,
    ),
)
model.fit(x_train, y_train)
mlp = model[-1]
print(f"training R2 {model.score(x_train, y_train):.4f} after {mlp.n_iter_} epochs (final loss {mlp.loss_:.5f})",
      flush=True)
pred = model.predict(x_test)

os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "predictions.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "prediction"])
    w.writerows([r["id"], f"{p:.6f}"] for r, p in zip(test, pred))
print(f"wrote {len(pred)} predictions")
