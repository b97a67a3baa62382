"""Baseline: a small PyTorch multi-layer perceptron (two hidden layers of 64 ReLU units) for a noisy
synthetic two-class problem with 20 features, trained with Adam on the binary cross-entropy in
mini-batches for a fixed number of epochs. CPU only, one thread; --seed sets the weight
initialisation and the order of the mini-batches.

Writes {out_dir}/predictions.csv (id, prediction: the predicted class 0 or 1) for the held-out
samples in test_features.csv; their true classes are not here: the topic's scorer (score.py)
computes the accuracy from them.
"""
import argparse
import csv
import os

import numpy as np
import torch
from torch import nn

HIDDEN = 64
LEARNING_RATE = 1e-3
EPOCHS = 50
BATCH_SIZE = 32

parser = argparse.ArgumentParser()
parser.add_argument("--out_dir", required=True)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

torch.set_num_threads(1)
torch.manual_seed(args.seed)


def read(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return rows, [k for k in rows[0] if k not in ("id", "target")]


train, features = read("train.csv")
test, _ = read("test_features.csv")
x_train = np.array([[float(r[k]) for k in features] for r in train])
y_train = np.array([float(r["target"]) for r in train])
x_test = np.array([[float(r[k]) for k in features] for r in test])
print(f"data: {len(train)} training / {len(test)} held-out samples, {len(features)} features", flush=True)

# standardise with the training set's statistics
mean, std = x_train.mean(axis=0), x_train.std(axis=0)
x_train = torch.tensor((x_train - mean) / std, dtype=torch.float32)
x_test = torch.tensor((x_test - mean) / std, dtype=torch.float32)
y_train = torch.tensor(y_train, dtype=torch.float32)

model = nn.Sequential(
    nn.Linear(len(features), HIDDEN), nn.ReLU(),
    nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
    nn.Linear(HIDDEN, 1),
)
optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
loss_fn = nn.BCEWithLogitsLoss()

for epoch in range(EPOCHS):
    model.train()
    order = torch.randperm(len(x_train))
    total = 0.0
    for start in range(0, len(x_train), BATCH_SIZE):
        batch = order[start:start + BATCH_SIZE]
        loss = loss_fn(model(x_train[batch]).squeeze(1), y_train[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(batch)
    if (epoch + 1) % 10 == 0:
        print(f"epoch {epoch + 1}/{EPOCHS}: training loss {total / len(x_train):.4f}", flush=True)

model.eval()
with torch.no_grad():
    train_acc = ((model(x_train).squeeze(1) > 0).float() == y_train).float().mean().item()
    pred = (model(x_test).squeeze(1) > 0).int().tolist()
print(f"training accuracy {train_acc:.4f}", flush=True)

os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "predictions.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "prediction"])
    w.writerows([r["id"], p] for r, p in zip(test, pred))
print(f"wrote {len(pred)} predictions")
