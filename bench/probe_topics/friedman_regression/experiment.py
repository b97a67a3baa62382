"""Baseline: gradient-boosted regression trees on Friedman's first synthetic regression problem
(10 features, of which the target depends on five), scikit-learn's default gradient boosting
regressor with its random state set by --seed.

Writes {out_dir}/predictions.csv (id, prediction) for the held-out samples in test_features.csv;
their true values are not here: the topic's scorer (score.py) computes R2 from them.
"""
import argparse
import csv
import os

import numpy as np
from sklearn.ensemble import GradientBoostingRegressor

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

model = GradientBoostingRegressor(random_state=args.seed)
model.fit(x_train, y_train)
print(f"training R2 {model.score(x_train, y_train):.4f}", flush=True)
pred = model.predict(x_test)

os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "predictions.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "prediction"])
    w.writerows([r["id"], f"{p:.6f}"] for r, p in zip(test, pred))
print(f"wrote {len(pred)} predictions")
