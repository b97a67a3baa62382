"""Baseline: a small PyTorch multi-layer perceptron (one hidden layer of 64 ReLU units) that
classifies 8x8 images of handwritten digits, trained with Adam on the cross-entropy in
mini-batches for a fixed number of epochs. CPU only, one thread; --seed sets the weight
initialisation and the order of the mini-batches.

Reads train.npz (images: uint8 (N, 8, 8), grey levels 0..16; labels: int64 (N,)) and
test_features.npz (images, ids). Writes {out_dir}/predictions.csv (id, prediction: the predicted
digit) for the held-out images; their true digits are not here: the topic's scorer (score.py)
computes the accuracy.
"""
import argparse
import csv
import os

import numpy as np
import torch
from torch import nn

HIDDEN = 64
LEARNING_RATE = 1e-3
EPOCHS = 20
BATCH_SIZE = 64

parser = argparse.ArgumentParser()
parser.add_argument("--out_dir", required=True)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

torch.set_num_threads(1)
torch.manual_seed(args.seed)

train = np.load("train.npz")
test = np.load("test_features.npz")
x_train = torch.tensor(train["images"], dtype=torch.float32).reshape(len(train["images"]), -1) / 16.0
y_train = torch.tensor(train["labels"])
x_test = torch.tensor(test["images"], dtype=torch.float32).reshape(len(test["images"]), -1) / 16.0
print(f"data: {len(x_train)} training / {len(x_test)} held-out images", flush=True)

model = nn.Sequential(nn.Linear(64, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 10))
opt = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
loss_fn = nn.CrossEntropyLoss()
gen = torch.Generator().manual_seed(args.seed)
for epoch in range(EPOCHS):
    model.train()
    order = torch.randperm(len(x_train), generator=gen)
    total = 0.0
    for i in range(0, len(order), BATCH_SIZE):
        idx = order[i:i + BATCH_SIZE]
        opt.zero_grad()
        loss = loss_fn(model(x_train[idx]), y_train[idx])
        loss.backward()
        opt.step()
        total += loss.item() * len(idx)
    if epoch % 5 == 4 or epoch == EPOCHS - 1:
        print(f"epoch {epoch + 1}: training loss {total / len(order):.4f}", flush=True)

model.eval()
with torch.no_grad():
    pred = model(x_test).argmax(1).numpy()

os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "predictions.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "prediction"])
    w.writerows([int(i), int(p)] for i, p in zip(test["ids"], pred))
print(f"wrote {len(pred)} predictions")
