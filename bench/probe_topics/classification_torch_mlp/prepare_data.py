"""How the data files of this topic were made (run once; the CSVs are shipped): scikit-learn's
make_classification generator (Guyon's MADELON design), 2000 samples of 20 features in two
classes: 8 informative features (each class is two Gaussian clusters at vertices of a hypercube),
4 redundant ones (random linear combinations of the informative ones) and 8 of pure noise, with 5%
of the labels reassigned at random. Drawn once with a fixed random state and split into 1500
training and 500 held-out samples; the held-out labels go to test_labels.csv, which only the
scorer sees.

    python prepare_data.py
"""
import csv

from sklearn.datasets import make_classification

x, y = make_classification(n_samples=2000, n_features=20, n_informative=8, n_redundant=4, n_clusters_per_class=2,
                           class_sep=1.0, flip_y=0.05, random_state=0)
names = [f"x{j}" for j in range(x.shape[1])]
train, test = range(1500), range(1500, 2000)  # the generator shuffles the samples: the last 500 are held out


def write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


write("train.csv", ["id", *names, "target"], [[f"s{i:04d}", *(f"{v:.6f}" for v in x[i]), int(y[i])] for i in train])
write("test_features.csv", ["id", *names], [[f"s{i:04d}", *(f"{v:.6f}" for v in x[i])] for i in test])
write("test_labels.csv", ["id", "target"], [[f"s{i:04d}", int(y[i])] for i in test])
