"""Quick experiment: small MLP on the Wisconsin breast cancer data (sklearn bundle)."""
import numpy as np
import torch
import torch.nn as nn
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

# ---- config ----
SEED = 0
TEST_SIZE = 0.25
HIDDEN = 64
DROPOUT = 0.1
LR = 1e-3
WEIGHT_DECAY = 1e-4
EPOCHS = 30
BATCH_SIZE = 32
NUM_CLASSES = 2

torch.manual_seed(SEED)
np.random.seed(SEED)
torch.set_num_threads(1)

X, y = load_breast_cancer(return_X_y=True)
X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=TEST_SIZE, stratify=y, random_state=SEED)
mu, sd = X_tr.mean(axis=0), X_tr.std(axis=0) + 1e-8
X_tr = ((X_tr - mu) / sd).astype(np.float32)
X_te = ((X_te - mu) / sd).astype(np.float32)

X_train = torch.tensor(X_tr)
y_train = torch.tensor(y_tr, dtype=torch.long)
X_test = torch.tensor(X_te)
y_test = torch.tensor(y_te, dtype=torch.long)


class TumorMLP(nn.Module):
    def __init__(self, n_features, hidden, n_classes):
        super().__init__()
        self.fc1 = nn.Linear(n_features, hidden)
        self.fc2 = nn.Linear(hidden, hidden // 2)
        self.out = nn.Linear(hidden // 2, n_classes)
        self.drop = nn.Dropout(DROPOUT)

    def forward(self, x):
        h = self.drop(torch.relu(self.fc1(x)))
        h = self.drop(torch.relu(self.fc2(h)))
        return self.out(h)


model = TumorMLP(X_train.shape[1], HIDDEN, NUM_CLASSES)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
gen = torch.Generator().manual_seed(SEED)

for epoch in range(EPOCHS):
    model.train()
    perm = torch.randperm(len(X_train), generator=gen)
    total = 0.0
    for start in range(0, len(X_train), BATCH_SIZE):
        idx = perm[start:start + BATCH_SIZE]
        logits = model(X_train[idx])
        loss = criterion(logits, y_train[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(idx)
    if epoch % 10 == 0 or epoch == EPOCHS - 1:
        print(f"epoch {epoch:02d} train_loss={total / len(X_train):.4f}")

model.eval()
with torch.no_grad():
    test_logits = model(X_test)
    test_loss = criterion(test_logits, y_test).item()
    acc = (test_logits.argmax(dim=1) == y_test).float().mean().item()
print(f"test_loss={test_loss:.4f}")
print(f"RESULT test_accuracy={acc:.4f}")
