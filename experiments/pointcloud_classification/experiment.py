"""Baseline: a small PointNet classifying procedurally generated 3D shapes.

Writes {out_dir}/final_info.json = {"accuracy", "train_loss", "train_time_s"}.
"""
import argparse, json, os, time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from shapes import make_dataset

parser = argparse.ArgumentParser()
parser.add_argument("--out_dir", required=True)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--dry_run", action="store_true", help="tiny data, 1 step: a quick self-check")
args = parser.parse_args()

# -- config --
n_train, n_test, n_points = 2400, 1200, 256
epochs, batch_size, lr = 10, 32, 1e-3
if args.dry_run:
    n_train, n_test, epochs = 64, 64, 1

torch.manual_seed(args.seed)
np.random.seed(args.seed)
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))  # the runner shares out the cores
torch.use_deterministic_algorithms(True)

# the data set is fixed (seed 0) so that only the training seed varies between runs
x_train, y_train, x_test, y_test, class_names = make_dataset(n_train, n_test, n_points, seed=0)
x_train, y_train = torch.from_numpy(x_train), torch.from_numpy(y_train)
x_test, y_test = torch.from_numpy(x_test), torch.from_numpy(y_test)


class PointNet(nn.Module):
    def __init__(self, n_classes, width=(64, 128, 256)):
        super().__init__()
        layers, c_in = [], 3
        for c in width:  # shared per-point MLP as 1x1 convolutions
            layers += [nn.Conv1d(c_in, c, 1, bias=False), nn.BatchNorm1d(c), nn.ReLU()]
            c_in = c
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(c_in, 128, bias=False), nn.BatchNorm1d(128), nn.ReLU(),
                                  nn.Linear(128, n_classes))

    def forward(self, x):  # x: [B, P, 3]
        x = self.features(x.transpose(1, 2))  # [B, C, P]
        x = x.max(dim=2).values               # symmetric max pool over points
        return self.head(x)


model = PointNet(len(class_names))
optimizer = torch.optim.Adam(model.parameters(), lr=lr)

t0 = time.time()
train_loss = float("nan")
for epoch in range(epochs):
    model.train()
    perm = torch.randperm(n_train)
    losses = []
    for i in range(0, n_train - batch_size + 1, batch_size):
        idx = perm[i:i + batch_size]
        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if args.dry_run:
            break
    train_loss = float(np.mean(losses))
    print(f"epoch {epoch + 1}/{epochs}  train_loss {train_loss:.4f}  time {time.time() - t0:.1f}s", flush=True)
train_time = time.time() - t0

model.eval()
with torch.no_grad():
    pred = torch.cat([model(x_test[i:i + 256]).argmax(1) for i in range(0, n_test, 256)])
accuracy = (pred == y_test).float().mean().item()
print(f"test accuracy {accuracy:.4f}")

os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "final_info.json"), "w") as f:
    json.dump({"accuracy": accuracy, "train_loss": train_loss, "train_time_s": train_time}, f, indent=2)
