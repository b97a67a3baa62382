"""Builds the topic's CSVs from scikit-learn's bundled wine data (run once; the CSVs are shipped).

The regression target is the alcohol content of each wine. The other twelve measurements stay
numeric except the colour intensity, which is replaced by a three-level band (pale, medium, deep)
cut at its terciles; the cultivar becomes a categorical column (A, B, C); some cells are blanked
so the table has missing values in numeric and categorical columns, as tables in the wild do.
Everything is drawn with numpy's legacy RandomState(0), whose stream numpy keeps fixed, so the
files are reproduced exactly.

    python prepare_data.py
"""
import csv

import numpy as np
from sklearn.datasets import load_wine

TEST_SHARE = 0.2
MISSING = {"magnesium": 0.06, "proanthocyanins": 0.06, "hue": 0.04, "colour_band": 0.05}

wine = load_wine()
x, cultivar = wine.data, wine.target
names = [n.replace("od280/od315_of_diluted_wines", "od280_od315") for n in wine.feature_names]
col = {n: x[:, i] for i, n in enumerate(names)}
rng = np.random.RandomState(0)

cuts = np.quantile(col["color_intensity"], [1 / 3, 2 / 3])
band = np.where(col["color_intensity"] <= cuts[0], "pale", np.where(col["color_intensity"] <= cuts[1], "medium",
                                                                     "deep"))
rows = []
for i in range(len(x)):
    rows.append({
        "id": f"w{i:03d}", "cultivar": "ABC"[cultivar[i]], "colour_band": str(band[i]),
        "malic_acid": f"{col['malic_acid'][i]:g}", "ash": f"{col['ash'][i]:g}",
        "alcalinity_of_ash": f"{col['alcalinity_of_ash'][i]:g}", "magnesium": str(int(col["magnesium"][i])),
        "total_phenols": f"{col['total_phenols'][i]:g}", "flavanoids": f"{col['flavanoids'][i]:g}",
        "nonflavanoid_phenols": f"{col['nonflavanoid_phenols'][i]:g}",
        "proanthocyanins": f"{col['proanthocyanins'][i]:g}", "hue": f"{col['hue'][i]:g}",
        "od280_od315": f"{col['od280_od315'][i]:g}", "proline": str(int(col["proline"][i])),
        "alcohol": f"{col['alcohol'][i]:g}",
    })
for name, share in MISSING.items():  # blank a fixed share of the cells of these columns
    for i in rng.choice(len(rows), int(round(share * len(rows))), replace=False):
        rows[i][name] = ""

order = rng.permutation(len(rows))
n_test = int(round(TEST_SHARE * len(rows)))
test = sorted((rows[i] for i in order[:n_test]), key=lambda r: r["id"])
train = sorted((rows[i] for i in order[n_test:]), key=lambda r: r["id"])
features = [k for k in rows[0] if k != "alcohol"]


def write(path, items, keys):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(items)


write("train.csv", train, features + ["alcohol"])
write("test_features.csv", test, features)
write("test_labels.csv", test, ["id", "alcohol"])
print(f"{len(train)} training rows, {len(test)} held-out rows, {len(features) - 1} features")
