"""How the data files of this topic were made (run once; the CSVs are shipped): scikit-learn's
generator of Friedman's first regression problem (Friedman 1991; Breiman 1996), 500 samples of 10
features drawn uniformly from [0, 1], of which only the first five enter the target
y = 10 sin(pi x0 x1) + 20 (x2 - 0.5)^2 + 10 x3 + 5 x4 + N(0, 1) noise; drawn once with a fixed
random state and split into 400 training and 100 held-out samples. The held-out targets go to
test_labels.csv, which only the scorer sees.

    python prepare_data.py
"""
import csv

from sklearn.datasets import make_friedman1

x, y = make_friedman1(n_samples=500, n_features=10, noise=1.0, random_state=1991)
names = [f"x{j}" for j in range(x.shape[1])]
test, train = range(400, 500), range(400)  # the samples are drawn independently: the last 100 are held out


def write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


write("train.csv", ["id", *names, "target"], [[f"s{i:03d}", *(f"{v:.6f}" for v in x[i]), f"{y[i]:.6f}"] for i in train])
write("test_features.csv", ["id", *names], [[f"s{i:03d}", *(f"{v:.6f}" for v in x[i])] for i in test])
write("test_labels.csv", ["id", "target"], [[f"s{i:03d}", f"{y[i]:.6f}"] for i in test])
