"""Baseline: histogram-based gradient boosting on the wine recognition data (13 chemical measurements
per wine, three cultivars), scikit-learn's HistGradientBoostingClassifier with the library's usual
settings written out and its random state set by --seed.

Writes {out_dir}/predictions.csv (id, prediction: the predicted cultivar 0, 1 or 2) for the held-out
wines in test_features.csv; their true cultivars are not here: the topic's scorer (score.py)
computes the accuracy from them.
"""
import argparse
import csv
import os

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier

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
y_train = np.array([int(r["target"]) for r in train])
x_test = np.array([[float(r[k]) for k in features] for r in test])
print(f"data: {len(train)} training / {len(test)} held-out wines, {len(features)} features", flush=True)

model = HistGradientBoostingClassifier(
    learning_rate=0.1,
    max_iter=100,
    max_leaf_nodes=31,
    min_samples_leaf=20,
    l2_regularization=0.0,
    random_state=args.seed,
)
model.fit(x_train, y_train)
print(f"training accuracy {model.score(x_train, y_train):.4f} after {model.n_iter_} boosting iterations", flush=True)
pred = model.predict(x_test)

os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "predictions.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "prediction"])
    w.writerows([r["id"], int(p)] for r, p in zip(test, pred))
print(f"wrote {len(pred)} predictions")
