"""How the data files of this topic were made (run once; the CSVs are shipped): scikit-learn's
generator of Friedman's third regression problem (Friedman 1991; Breiman 1996), 1000 samples of
four features drawn uniformly from x0 in [0, 100], x1 in [40 pi, 560 pi], x2 in [0, 1] and
x3 in [1, 11], with the target y = arctan((x1 x2 - 1 / (x1 x3)) / x0) + N(0, 0.1^2) noise; drawn
once with a fixed random state and split into 800 training and 200 held-out samples. The held-out
targets go to test_labels.csv, which only the scorer sees.

    python prepare_data.py
"""
import csv

from sklearn.datasets import make_friedman3

x, y = make_friedman3(n_samples=1000, noise=0.1, random_state=0)
names = [f"x{j}" for j in range(x.shape[1])]
train, test = range(800), range(800, 1000)  # the samples are drawn independently: the last 200 are held out


def write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


write("train.csv", ["id", *names, "target"], [[f"s{i:04d}", *(f"{v:.6f}" for v in x[i]), f"{y[i]:.6f}"] for i in train])
write("test_features.csv", ["id", *names], [[f"s{i:04d}", *(f"{v:.6f}" for v in x[i])] for i in test])
write("test_labels.csv", ["id", "target"], [[f"s{i:04d}", f"{y[i]:.6f}"] for i in test])
