"""The topic's scorer (run by the host in a fresh sandbox after each run): the NRMSE (the RMSE over
the standard deviation of the targets), the RMSE and the MAE of the run's forecasts against the
held-out values in test_labels.csv, written to {out_dir}/final_info.json. A forecast missing for
a window, or not a finite number, fails it.

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
    truth = {r["id"]: float(r["target"]) for r in csv.DictReader(f)}
path = os.path.join(args.pred_dir, "predictions.csv")
if not os.path.isfile(path):
    sys.exit(f"no predictions.csv in the run's output ({args.pred_dir})")
with open(path) as f:
    try:
        pred = {r["id"]: float(r["prediction"]) for r in csv.DictReader(f)}
    except (KeyError, ValueError) as e:
        sys.exit(f"predictions.csv must have columns id and prediction (a number): {e}")
missing = sorted(set(truth) - set(pred))
if missing:
    sys.exit(f"predictions.csv lacks {len(missing)} of {len(truth)} windows, e.g. {missing[0]}")
bad = [i for i in truth if not math.isfinite(pred[i])]
if bad:
    sys.exit(f"predictions.csv has {len(bad)} values that are not finite numbers, e.g. {bad[0]}")

ys = list(truth.values())
errs = [pred[i] - truth[i] for i in truth]
mean = sum(ys) / len(ys)
rmse = math.sqrt(sum(e * e for e in errs) / len(errs))
info = {"nrmse": rmse / math.sqrt(sum((y - mean) ** 2 for y in ys) / len(ys)), "rmse": rmse,
        "mae": sum(abs(e) for e in errs) / len(errs)}
os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "final_info.json"), "w") as f:
    json.dump(info, f, indent=2)
print(json.dumps(info))
