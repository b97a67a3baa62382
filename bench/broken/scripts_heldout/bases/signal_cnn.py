"""Synthetic 1-D signal classification (sine / fast sine / square) with a small Conv1d net."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- config ----
SEED = 7
N_PER_CLASS = 300
SEQ_LEN = 64
N_CLASSES = 3
NOISE = 0.6
CHANNELS = 8
BATCH_SIZE = 64
EPOCHS = 12
LR = 3e-3

rng = np.random.default_rng(SEED)
torch.manual_seed(SEED)
torch.set_num_threads(1)


def make_signals(n, label):
    t = np.linspace(0, 1, SEQ_LEN)
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1))
    freq = rng.uniform(2, 4, size=(n, 1)) * (1 + 1.5 * (label == 1))
    wave = np.sin(2 * np.pi * freq * t + phase)
    if label == 2:
        wave = np.sign(wave)
    return wave + NOISE * rng.standard_normal((n, SEQ_LEN))


X = np.concatenate([make_signals(N_PER_CLASS, c) for c in range(N_CLASSES)]).astype(np.float32)
y = np.repeat(np.arange(N_CLASSES), N_PER_CLASS)
order = rng.permutation(len(X))
X, y = torch.from_numpy(X[order]), torch.from_numpy(y[order])
X_train, y_train = X[:600], y[:600]
X_val, y_val = X[600:750], y[600:750]
X_test, y_test = X[750:], y[750:]


class SignalNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(1, CHANNELS, kernel_size=5, padding=2)
        self.conv2 = nn.Conv1d(CHANNELS, CHANNELS, kernel_size=5, padding=2)
        self.pool = nn.MaxPool1d(2)
        self.fc = nn.Linear(CHANNELS * (SEQ_LEN // 4) + 2, N_CLASSES)

    def forward(self, x):
        stats = torch.stack([x.mean(dim=1), x.std(dim=1)], dim=1)
        h = x.view(x.size(0), 1, SEQ_LEN)
        h = self.pool(F.relu(self.conv1(h)))
        h = self.pool(F.relu(self.conv2(h)))
        h = h.flatten(1)
        return self.fc(torch.cat([h, stats], dim=1))


model = SignalNet()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=LR)
best_val, best_state = float("inf"), None
for epoch in range(EPOCHS):
    model.train()
    perm = torch.randperm(len(X_train))
    for start in range(0, len(X_train), BATCH_SIZE):
        idx = perm[start:start + BATCH_SIZE]
        loss = criterion(model(X_train[idx]), y_train[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        val_loss = criterion(model(X_val), y_val).item()
    if val_loss < best_val:
        best_val = val_loss
        best_state = {k: v.clone() for k, v in model.state_dict().items()}
    print(f"epoch {epoch:02d} val_loss={val_loss:.4f}")

model.load_state_dict(best_state)
with torch.no_grad():
    acc = (model(X_test).argmax(dim=1) == y_test).float().mean().item()
print(f"best_val_loss={best_val:.4f}")
print(f"RESULT test_accuracy={acc:.4f}")
