"""The topic's scorer (run by the host in a fresh sandbox after each run): accuracy of the run's
predicted classes against the held-out labels in test_labels.csv, and the balanced accuracy (the
mean of the two classes' recalls), written to {out_dir}/final_info.json. A prediction missing for
a sample, or other than 0 or 1, fails it.

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
    truth = {r["id"]: int(r["target"]) for r in csv.DictReader(f)}
path = os.path.join(args.pred_dir, "predictions.csv")
if not os.path.isfile(path):
    sys.exit(f"no predictions.csv in the run's output ({args.pred_dir})")
with open(path) as f:
    pred = {r["id"]: r["prediction"].strip() for r in csv.DictReader(f)}
missing = sorted(set(truth) - set(pred))
if missing:
    sys.exit(f"predictions.csv lacks {len(missing)} of {len(truth)} samples, e.g. {missing[0]}")
bad = [i for i in truth if pred[i] not in ("0", "1")]
if bad:
    sys.exit(f"predictions.csv has {len(bad)} values that are not a class 0 or 1, e.g. {pred[bad[0]]!r}")
pred = {i: int(pred[i]) for i in truth}

recalls = []
for c in (0, 1):
    ids = [i for i in truth if truth[i] == c]
    recalls.append(sum(pred[i] == c for i in ids) / len(ids))
info = {"accuracy": sum(pred[i] == truth[i] for i in truth) / len(truth), "balanced_accuracy": sum(recalls) / 2}
os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "final_info.json"), "w") as f:
    json.dump(info, f, indent=2)
print(json.dumps(info))
