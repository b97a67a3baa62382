"""How the data files of this topic were made (run once; the CSVs are shipped): scikit-learn's
bundled copy of the UCI wine recognition data (178 wines from three cultivars grown in the same
region of Italy, 13 results of a chemical analysis each; no download), split once, stratified by
cultivar, into 89 training and 89 held-out wines. The held-out cultivars go to test_labels.csv,
which only the scorer sees.

    python prepare_data.py
"""
import csv

from sklearn.datasets import load_wine
from sklearn.model_selection import train_test_split

data = load_wine()
names = list(data.feature_names)
ids = [f"w{i:03d}" for i in range(len(data.target))]
train, test = train_test_split(range(len(ids)), test_size=0.5, stratify=data.target, random_state=0)
train, test = sorted(train), sorted(test)


def write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


x, y = data.data, data.target
write("train.csv", ["id", *names, "target"], [[ids[i], *(f"{v:g}" for v in x[i]), int(y[i])] for i in train])
write("test_features.csv", ["id", *names], [[ids[i], *(f"{v:g}" for v in x[i])] for i in test])
write("test_labels.csv", ["id", "target"], [[ids[i], int(y[i])] for i in test])
