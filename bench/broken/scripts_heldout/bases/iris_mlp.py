"""Iris species classifier: configurable-depth MLP trained with F.cross_entropy."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

# ---- config ----
SEED = 1
NUM_CLASSES = 3
HIDDEN_SIZES = [32, 16]
LR = 0.01
EPOCHS = 45
BATCH_SIZE = 16
TEST_SIZE = 0.2

torch.manual_seed(SEED)
np.random.seed(SEED)
torch.set_num_threads(1)

X, y = load_iris(return_X_y=True)
X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=TEST_SIZE, stratify=y, random_state=SEED)
scaler = StandardScaler().fit(X_tr)
X_train = torch.tensor(scaler.transform(X_tr), dtype=torch.float32)
X_test = torch.tensor(scaler.transform(X_te), dtype=torch.float32)
y_train = torch.tensor(y_tr, dtype=torch.long)


class MLP(nn.Module):
    def __init__(self, in_dim, hidden_sizes, n_classes):
        super().__init__()
        self.layers = nn.ModuleList()
        prev = in_dim
        for width in hidden_sizes + [n_classes]:
            self.layers.append(nn.Linear(prev, width))
            prev = width

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return self.layers[-1](x)


model = MLP(X_train.shape[1], HIDDEN_SIZES, NUM_CLASSES)
optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
gen = torch.Generator().manual_seed(SEED)

for epoch in range(EPOCHS):
    perm = torch.randperm(len(X_train), generator=gen)
    epoch_loss = 0.0
    for start in range(0, len(X_train), BATCH_SIZE):
        idx = perm[start:start + BATCH_SIZE]
        loss = F.cross_entropy(model(X_train[idx]), y_train[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item() * len(idx)
    if (epoch + 1) % 15 == 0:
        print(f"epoch {epoch + 1} loss={epoch_loss / len(X_train):.4f}")

logits = model(X_test)
probs = F.softmax(logits, dim=1).detach().numpy()
pred = probs.argmax(axis=1)
for c in range(NUM_CLASSES):
    mask = y_te == c
    print(f"class {c}: acc={(pred[mask] == c).mean():.3f} mean_conf={probs[mask, c].mean():.3f}")
acc = float((pred == y_te).mean())
print(f"RESULT test_accuracy={acc:.4f}")
