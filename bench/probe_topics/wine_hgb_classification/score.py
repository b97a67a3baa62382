"""The topic's scorer (run by the host in a fresh sandbox after each run): accuracy and macro-averaged
F1 of the run's predicted cultivars against the held-out ones in test_labels.csv, written to
{out_dir}/final_info.json. A prediction missing for a wine, or not one of the cultivars 0, 1, 2,
fails it.

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
classes = sorted(set(truth.values()))
path = os.path.join(args.pred_dir, "predictions.csv")
if not os.path.isfile(path):
    sys.exit(f"no predictions.csv in the run's output ({args.pred_dir})")
with open(path) as f:
    pred = {r["id"]: r["prediction"].strip() for r in csv.DictReader(f)}
missing = sorted(set(truth) - set(pred))
if missing:
    sys.exit(f"predictions.csv lacks {len(missing)} of {len(truth)} wines, e.g. {missing[0]}")
bad = [i for i in truth if pred[i] not in {str(c) for c in classes}]
if bad:
    sys.exit(f"predictions.csv has {len(bad)} values that are not a cultivar in {classes}, e.g. {pred[bad[0]]!r}")
pred = {i: int(pred[i]) for i in truth}

f1s = []
for c in classes:
    tp = sum(truth[i] == c and pred[i] == c for i in truth)
    fp = sum(truth[i] != c and pred[i] == c for i in truth)
    fn = sum(truth[i] == c and pred[i] != c for i in truth)
    f1s.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0)
info = {"accuracy": sum(pred[i] == truth[i] for i in truth) / len(truth), "macro_f1": sum(f1s) / len(f1s)}
os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "final_info.json"), "w") as f:
    json.dump(info, f, indent=2)
print(json.dumps(info))
