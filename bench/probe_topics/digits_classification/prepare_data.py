"""How the data files of this topic were made (run once; the CSVs are shipped): scikit-learn's
bundled handwritten digits data (1797 images of 8x8 pixels, each pixel a count 0-16, from the UCI
optical recognition of handwritten digits set; Alpaydin and Kaynak 1998), split once into 1437
training and 360 held-out images by a fixed permutation. The held-out labels go to
test_labels.csv, which only the scorer sees.

    python prepare_data.py
"""
import csv

import numpy as np
from sklearn.datasets import load_digits

data = load_digits()
names = [f"px{r}{c}" for r in range(8) for c in range(8)]  # pixel (row, column), row-major
order = np.random.RandomState(1998).permutation(len(data.target))
test, train = order[:360], order[360:]


def write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


write("train.csv", ["id", *names, "target"],
      [[f"d{i:04d}", *(int(v) for v in data.data[i]), int(data.target[i])] for i in sorted(train)])
write("test_features.csv", ["id", *names], [[f"d{i:04d}", *(int(v) for v in data.data[i])] for i in sorted(test)])
write("test_labels.csv", ["id", "target"], [[f"d{i:04d}", int(data.target[i])] for i in sorted(test)])
