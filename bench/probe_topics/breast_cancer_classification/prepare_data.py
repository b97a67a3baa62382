"""How the data files of this topic were made (run once; the CSVs are shipped): scikit-learn's
bundled Wisconsin diagnostic breast cancer data (569 tumours, 30 features computed from a
digitised image of a fine-needle aspirate; Street, Wolberg and Mangasarian 1993), split once into
455 training and 114 held-out tumours by a fixed permutation. The target is 1 for a malignant
tumour, 0 for a benign one. The held-out targets go to test_labels.csv, which only the scorer sees.

    python prepare_data.py
"""
import csv

import numpy as np
from sklearn.datasets import load_breast_cancer

data = load_breast_cancer()
names = [n.replace(" ", "_") for n in data.feature_names]  # mean_radius, ..., worst_fractal_dimension
target = 1 - data.target  # scikit-learn codes malignant as 0; here malignant is the positive class
order = np.random.RandomState(1993).permutation(len(target))
test, train = order[:114], order[114:]


def write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


write("train.csv", ["id", *names, "target"],
      [[f"t{i:03d}", *(f"{v:.6g}" for v in data.data[i]), int(target[i])] for i in sorted(train)])
write("test_features.csv", ["id", *names], [[f"t{i:03d}", *(f"{v:.6g}" for v in data.data[i])] for i in sorted(test)])
write("test_labels.csv", ["id", "target"], [[f"t{i:03d}", int(target[i])] for i in sorted(test)])
