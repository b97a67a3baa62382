"""Baseline: ridge regression of diabetes progression one year on (scikit-learn's bundled diabetes
data: 10 baseline measurements per patient) on standardised features, its penalty chosen by
5-fold cross-validation on the training patients (the folds shuffled with --seed).

Writes {out_dir}/predictions.csv (id, prediction) for the held-out patients in test_features.csv;
their true values are not here: the topic's scorer (score.py) computes R2 from them.
"""
import argparse
import csv
import os

import numpy as np
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

parser = argparse.ArgumentParser()
parser.add_argument("--out_dir", required=True)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

ALPHAS = [0.01, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0]  # ridge penalties tried
FOLDS = 5


def read(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return rows, [k for k in rows[0] if k not in ("id", "target")]


train, features = read("train.csv")
test, _ = read("test_features.csv")
x_train = np.array([[float(r[k]) for k in features] for r in train])
y_train = np.array([float(r["target"]) for r in train])
x_test = np.array([[float(r[k]) for k in features] for r in test])
print(f"data: {len(train)} training / {len(test)} held-out patients, {len(features)} features", flush=True)

folds = KFold(FOLDS, shuffle=True, random_state=args.seed)
scores = {a: cross_val_score(make_pipeline(StandardScaler(), Ridge(alpha=a)), x_train, y_train, cv=folds,
                             scoring="r2").mean() for a in ALPHAS}
best = max(scores, key=scores.get)
print("cross-validated R2 by alpha: " + ", ".join(f"{a:g}: {s:.4f}" for a, s in scores.items()) + f" -> alpha {best:g}",
      flush=True)

model = make_pipeline(StandardScaler(), Ridge(alpha=best)).fit(x_train, y_train)
pred = model.predict(x_test)

os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "predictions.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "prediction"])
    w.writerows([r["id"], f"{p:.6f}"] for r, p in zip(test, pred))
print(f"wrote {len(pred)} predictions")
