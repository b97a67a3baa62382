"""Quick experiment: a small MLP on the 8x8 scikit-learn digits."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

SEED = 0
HIDDEN = [128, 64]
DROPOUT = 0.1
LR = 1e-3
WEIGHT_DECAY = 1e-4
EPOCHS = 15
BATCH_SIZE = 64
TEST_FRAC = 0.2

np.random.seed(SEED)
torch.manual_seed(SEED)
torch.set_num_threads(1)

digits = load_digits()
X_all = digits.data / 16.0
y_all = digits.target
NUM_CLASSES = int(y_all.max()) + 1

X_tr, X_te, y_tr, y_te = train_test_split(X_all, y_all, test_size=TEST_FRAC,
                                          random_state=SEED, stratify=y_all)
x_train = torch.from_numpy(X_tr).float()
y_train = torch.from_numpy(y_tr).long()
x_test = torch.from_numpy(X_te).float()
y_test = torch.from_numpy(y_te).long()
print(f"train {tuple(x_train.shape)}  test {tuple(x_test.shape)}  classes {NUM_CLASSES}")


class MLP(nn.Module):
    def __init__(self, in_dim, hidden, n_out, p_drop):
        super().__init__()
        dims = [in_dim] + hidden + [n_out]
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:])])
        self.drop = nn.Dropout(p_drop)

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = self.drop(F.relu(x))
        return x


model = MLP(x_train.shape[1], HIDDEN, NUM_CLASSES, DROPOUT)
optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
criterion = nn.CrossEntropyLoss()

for epoch in range(EPOCHS):
    model.train()
    perm = torch.randperm(len(x_train))
    running = 0.0
    for start in range(0, len(x_train), BATCH_SIZE):
        idx = perm[start:start + BATCH_SIZE]
        logits = model(x_train[idx])
        loss = criterion(logits, y_train[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item() * len(idx)

    model.eval()
    with torch.no_grad():
        test_logits = model(x_test)
        test_loss = criterion(test_logits, y_test).item()
    if epoch % 5 == 0 or epoch == EPOCHS - 1:
        print(f"epoch {epoch:2d}  train_loss {running / len(x_train):.4f}  test_loss {test_loss:.4f}")

acc = (test_logits.argmax(dim=1) == y_test).float().mean().item()
print(f"RESULT accuracy={acc:.4f}")
