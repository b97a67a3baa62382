"""Baseline: a random forest classifying breast tumours as malignant or benign (scikit-learn's
bundled Wisconsin diagnostic data: 30 features of the cell nuclei in a fine-needle aspirate),
scikit-learn's default forest with its random state set by --seed.

Writes {out_dir}/predictions.csv (id, prediction: the predicted probability that the tumour is
malignant) for the held-out tumours in test_features.csv; their true labels are not here: the
topic's scorer (score.py) computes ROC AUC from them.
"""
import argparse
import csv
import os

import numpy as np
from sklearn.ensemble import RandomForestClassifier

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
print(f"data: {len(train)} training / {len(test)} held-out tumours, {len(features)} features, "
      f"{y_train.mean():.1%} of training tumours malignant", flush=True)

model = RandomForestClassifier(random_state=args.seed)
model.fit(x_train, y_train)
print(f"training accuracy {model.score(x_train, y_train):.4f}", flush=True)
prob = model.predict_proba(x_test)[:, list(model.classes_).index(1)]

os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "predictions.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "prediction"])
    w.writerows([r["id"], f"{p:.6f}"] for r, p in zip(test, prob))
print(f"wrote {len(prob)} predictions")
