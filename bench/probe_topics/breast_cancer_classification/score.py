"""The topic's scorer (run by the host in a fresh sandbox after each run): ROC AUC of the run's
predicted probabilities of malignancy against the held-out labels in test_labels.csv, and the
accuracy of thresholding them at 0.5, written to {out_dir}/final_info.json. A prediction missing
for a tumour, or not a finite number, fails it.

    python score.py --pred_dir DIR --out_dir DIR
"""
import argparse
import csv
import json
import math
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
    pred = {r["id"]: float(r["prediction"]) for r in csv.DictReader(f)}
missing = sorted(set(truth) - set(pred))
if missing:
    sys.exit(f"predictions.csv lacks {len(missing)} of {len(truth)} tumours, e.g. {missing[0]}")
bad = [i for i in truth if not math.isfinite(pred[i])]
if bad:
    sys.exit(f"predictions.csv has {len(bad)} values that are not finite numbers, e.g. {bad[0]}")

# ROC AUC as the Mann-Whitney statistic: the share of (malignant, benign) pairs ranked the right way, ties half
pos = [pred[i] for i in truth if truth[i] == 1]
neg = [pred[i] for i in truth if truth[i] == 0]
wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
info = {"roc_auc": wins / (len(pos) * len(neg)),
        "accuracy": sum((pred[i] >= 0.5) == (truth[i] == 1) for i in truth) / len(truth)}
os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "final_info.json"), "w") as f:
    json.dump(info, f, indent=2)
print(json.dumps(info))
