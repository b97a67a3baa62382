"""Baseline: ridge regression of a wine's alcohol content from its chemical analysis, its cultivar
and its colour band. Numeric columns: missing cells filled with the training median, then
standardised; categorical columns: missing cells filled with the most frequent level, then
one-hot encoded. The ridge penalty is chosen by 5-fold cross-validation on the training rows (the
folds shuffled with --seed).

Writes {out_dir}/predictions.csv (id, prediction) for the held-out wines in test_features.csv;
their true alcohol contents are not here: the topic's scorer (score.py) computes the RMSE.
"""
import argparse
import os

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

parser = argparse.ArgumentParser()
parser.add_argument("--out_dir", required=True)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

TARGET = "alcohol"
ALPHAS = [0.1, 0.3, 1.0, 3.0, 10.0, 30.0]  # ridge penalties tried
FOLDS = 5

train = pd.read_csv("train.csv")
test = pd.read_csv("test_features.csv")
features = [c for c in train.columns if c not in ("id", TARGET)]
categorical = [c for c in features if train[c].dtype == object]
numeric = [c for c in features if c not in categorical]
print(f"data: {len(train)} training / {len(test)} held-out wines; numeric: {numeric}; categorical: {categorical}",
      flush=True)


def model(alpha):
    prep = ColumnTransformer([
        ("num", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), numeric),
        ("cat", make_pipeline(SimpleImputer(strategy="most_frequent"), OneHotEncoder(handle_unknown="ignore")),
         categorical),
    ])
    return make_pipeline(prep, Ridge(alpha=alpha))


x_train, y_train = train[features], train[TARGET].to_numpy()
folds = KFold(FOLDS, shuffle=True, random_state=args.seed)
scores = {a: -cross_val_score(model(a), x_train, y_train, cv=folds, scoring="neg_root_mean_squared_error").mean()
          for a in ALPHAS}
best = min(scores, key=scores.get)
print("cross-validated RMSE by alpha: " + ", ".join(f"{a:g}: {s:.4f}" for a, s in scores.items())
      + f" -> alpha {best:g}", flush=True)

pred = model(best).fit(x_train, y_train).predict(test[features])
assert np.all(np.isfinite(pred))

os.makedirs(args.out_dir, exist_ok=True)
pd.DataFrame({"id": test["id"], "prediction": np.round(pred, 6)}).to_csv(
    os.path.join(args.out_dir, "predictions.csv"), index=False)
print(f"wrote {len(pred)} predictions")
