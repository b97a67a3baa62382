"""Baseline: a small multilayer perceptron (one hidden layer of 64 units) classifying 8x8 images
of handwritten digits (scikit-learn's bundled digits data: 64 pixel intensities per image) on
standardised pixels; the network's initial weights and the order of its mini-batches come from
--seed.

Writes {out_dir}/predictions.csv (id, prediction: the predicted digit) for the held-out images in
test_features.csv; their true labels are not here: the topic's scorer (score.py) computes the
accuracy from them.
"""
import argparse
import csv
import os

import numpy as np
from sklearn.neural_network import MLPClassifier
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
y_train = np.array([int(r["target"]) for r in train])
x_test = np.array([[float(r[k]) for k in features] for r in test])
print(f"data: {len(train)} training / {len(test)} held-out images, {len(features)} pixels", flush=True)

model = make_pipeline(StandardScaler(),
                      MLPClassifier(hidden_layer_sizes=(64,), max_iter=500, random_state=args.seed))
model.fit(x_train, y_train)
net = model[-1]
print(f"{net.n_iter_} epochs, final training loss {net.loss_:.4f}, training accuracy "
      f"{model.score(x_train, y_train):.4f}", flush=True)
pred = model.predict(x_test)

os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "predictions.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "prediction"])
    w.writerows([r["id"], int(p)] for r, p in zip(test, pred))
print(f"wrote {len(pred)} predictions")
