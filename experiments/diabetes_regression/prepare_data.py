"""How the data files of this topic were made (run once; the CSVs are shipped): scikit-learn's
bundled diabetes data (442 patients, 10 baseline measurements, a disease-progression score one
year later; Efron et al. 2004), split once into 354 training and 88 held-out patients by a
fixed permutation. The held-out targets go to test_labels.csv, which only the scorer sees.

    python prepare_data.py
"""
import csv

import numpy as np
from sklearn.datasets import load_diabetes

data = load_diabetes(scaled=False)
names = list(data.feature_names)  # age, sex, bmi, bp, s1..s6 (blood serum measurements)
order = np.random.RandomState(2004).permutation(len(data.target))
test, train = order[:88], order[88:]


def write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


write("train.csv", ["id", *names, "target"],
      [[f"p{i:03d}", *(f"{v:g}" for v in data.data[i]), f"{data.target[i]:g}"] for i in sorted(train)])
write("test_features.csv", ["id", *names], [[f"p{i:03d}", *(f"{v:g}" for v in data.data[i])] for i in sorted(test)])
write("test_labels.csv", ["id", "target"], [[f"p{i:03d}", f"{data.target[i]:g}"] for i in sorted(test)])
