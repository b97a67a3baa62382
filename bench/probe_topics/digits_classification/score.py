"""The topic's scorer (run by the host in a fresh sandbox after each run): accuracy of the run's
predicted digits against the held-out labels in test_labels.csv, and the lowest recall over the
ten digits, written to {out_dir}/final_info.json. A prediction missing for an image, or not a
digit 0-9, fails it.

    python score.py --pred_dir DIR --out_dir DIR
"""
import argparse
import csv
import json
import os
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--pred_dir", required=True)
parser.add_argument("--out_dir", required=True)
args = parser.parse_args()

with open("test_labels.csv") as f:
    truth = {r["id"]: r["target"].strip() for r in csv.DictReader(f)}
path = os.path.join(args.pred_dir, "predictions.csv")
if not os.path.isfile(path):
    sys.exit(f"no predictions.csv in the run's output ({args.pred_dir})")
with open(path) as f:
    pred = {r["id"]: r["prediction"].strip() for r in csv.DictReader(f)}
missing = sorted(set(truth) - set(pred))
if missing:
    sys.exit(f"predictions.csv lacks {len(missing)} of {len(truth)} images, e.g. {missing[0]}")
digits = {str(d) for d in range(10)}
bad = [i for i in truth if pred[i] not in digits]
if bad:
    sys.exit(f"predictions.csv has {len(bad)} values that are not a digit 0-9, e.g. {pred[bad[0]]!r} for {bad[0]}")

right = {i: pred[i] == truth[i] for i in truth}
recall = {d: sum(right[i] for i in truth if truth[i] == d) / max(1, sum(truth[i] == d for i in truth))
          for d in sorted(digits)}
info = {"accuracy": sum(right.values()) / len(truth), "min_class_recall": min(recall.values())}
os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "final_info.json"), "w") as f:
    json.dump(info, f, indent=2)
print(json.dumps(info))
