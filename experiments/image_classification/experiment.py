"""Baseline: a small CNN classifying Fashion-MNIST clothing images (28x28 grey, 10 classes).

Writes {out_dir}/final_info.json = {"accuracy", "train_loss", "train_time_s"}.
"""
import argparse, json, os, time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from fashion_mnist import load_fashion_mnist

parser = argparse.ArgumentParser()
parser.add_argument("--out_dir", required=True)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--dry_run", action="store_true", help="tiny data, 1 step: a quick self-check")
parser.add_argument("--screen", action="store_true", help="a short run: a third of the epochs (ranks drafts)")
args = parser.parse_args()

# -- config --
N_TRAIN = 10000  # class-balanced subset of the 60,000 training images
N_TEST = 10000   # the whole official test set
EPOCHS = 3
BATCH_SIZE = 64
LR = 1e-3
if args.dry_run:
    N_TRAIN, N_TEST, EPOCHS = 200, 200, 1
if args.screen:  # the same training, shorter: topic.yaml `screen:` ranks an idea's drafts with it
    EPOCHS = max(1, EPOCHS // 3)

torch.manual_seed(args.seed)
np.random.seed(args.seed)
torch.set_num_threads(1)  # fixed: the numbers change with the thread count; 1 suits 2 cores shared by runs
torch.use_deterministic_algorithms(True)

x_train, y_train, x_test, y_test, class_names = load_fashion_mnist(N_TRAIN, N_TEST)
x_train, y_train = torch.from_numpy(x_train), torch.from_numpy(y_train)
x_test, y_test = torch.from_numpy(x_test), torch.from_numpy(y_test)
mean, std = x_train.mean(), x_train.std()
x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
n_train, n_test = len(y_train), len(y_test)
print(f"data: {n_train} train / {n_test} test images, {len(class_names)} classes", flush=True)


class SmallCNN(nn.Module):
    def __init__(self, n_classes, width=(16, 32)):
        super().__init__()
        layers, c_in = [], 1
        for c in width:  # conv-BN-ReLU-pool blocks: 28 -> 14 -> 7
            layers += [nn.Conv2d(c_in, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                       nn.MaxPool2d(2)]
            c_in = c
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(c_in * 7 * 7, 128), nn.ReLU(),
                                  nn.Linear(128, n_classes))

    def forward(self, x):  # x: [B, 1, 28, 28]
        return self.head(self.features(x))


model = SmallCNN(len(class_names))
optimizer = torch.optim.Adam(model.parameters(), lr=LR)

t0 = time.time()
train_loss = float("nan")
for epoch in range(EPOCHS):
    model.train()
    perm = torch.randperm(n_train)
    losses = []
    for i in range(0, n_train - BATCH_SIZE + 1, BATCH_SIZE):
        idx = perm[i:i + BATCH_SIZE]
        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if args.dry_run:
            break
    train_loss = float(np.mean(losses))
    print(f"epoch {epoch + 1}/{EPOCHS}  train_loss {train_loss:.4f}  time {time.time() - t0:.1f}s", flush=True)
train_time = time.time() - t0

model.eval()
with torch.no_grad():
    pred = torch.cat([model(x_test[i:i + 500]).argmax(1) for i in range(0, n_test, 500)])
accuracy = (pred == y_test).float().mean().item()
print(f"test accuracy {accuracy:.4f}")

os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "final_info.json"), "w") as f:
    json.dump({"accuracy": accuracy, "train_loss": train_loss, "train_time_s": train_time}, f, indent=2)
