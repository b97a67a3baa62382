"""The topic's scorer (run by the host in a fresh sandbox after each run): the accuracy (and the
macro-averaged F1) of the run's predicted digits against the held-out digits in test_labels.npz,
written to {out_dir}/final_info.json. A prediction missing for an image, or not a digit, fails it.

    python score.py --pred_dir DIR --out_dir DIR
"""
import argparse
import csv
import json
import os
import sys

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--pred_dir", required=True)
parser.add_argument("--out_dir", required=True)
args = parser.parse_args()

held = np.load("test_labels.npz")
truth = {int(i): int(y) for i, y in zip(held["ids"], held["labels"])}
path = os.path.join(args.pred_dir, "predictions.csv")
if not os.path.isfile(path):
    sys.exit(f"no predictions.csv in the run's output ({args.pred_dir})")
with open(path) as f:
    try:
        pred = {int(r["id"]): int(float(r["prediction"])) for r in csv.DictReader(f)}
    except (KeyError, ValueError) as e:
        sys.exit(f"predictions.csv must have columns id and prediction (a digit 0-9): {e}")
missing = sorted(set(truth) - set(pred))
if missing:
    sys.exit(f"predictions.csv lacks {len(missing)} of {len(truth)} images, e.g. id {missing[0]}")
bad = [i for i in truth if pred[i] not in range(10)]
if bad:
    sys.exit(f"predictions.csv has {len(bad)} predictions that are not digits 0-9, e.g. id {bad[0]}")

y = np.array([truth[i] for i in truth])
p = np.array([pred[i] for i in truth])
f1 = []
for c in range(10):
    tp, fp, fn = np.sum((p == c) & (y == c)), np.sum((p == c) & (y != c)), np.sum((p != c) & (y == c))
    f1.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0)
info = {"accuracy": float(np.mean(p == y)), "macro_f1": float(np.mean(f1))}
os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "final_info.json"), "w") as f:
    json.dump(info, f, indent=2)
print(json.dumps(info))
