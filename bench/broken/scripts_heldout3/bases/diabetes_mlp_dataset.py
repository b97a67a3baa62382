"""Regression MLP on scikit-learn's bundled diabetes data, fed through a Dataset/DataLoader."""
import numpy as np
import torch
import torch.nn as nn
from sklearn.datasets import load_diabetes
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch.utils.data import DataLoader, Dataset

SEED = 0
np.random.seed(SEED)
torch.manual_seed(SEED)
torch.set_num_threads(1)

X, y = load_diabetes(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=SEED)

x_scaler = StandardScaler().fit(X_train)
y_mean, y_std = y_train.mean(), y_train.std()


class TabularDataset(Dataset):
    def __init__(self, features, targets):
        self.features = torch.tensor(x_scaler.transform(features), dtype=torch.float32)
        self.targets = torch.tensor((targets - y_mean) / y_std, dtype=torch.float32).unsqueeze(1)

    def __len__(self):
        return len(self.features)

    def __getitem__(self, i):
        return self.features[i], self.targets[i]


train_ds = TabularDataset(X_train, y_train)
test_ds = TabularDataset(X_test, y_test)
generator = torch.Generator().manual_seed(SEED)
train_loader = DataLoader(train_ds, batch_size=32, shuffle=True, generator=generator)

model = nn.Sequential(
    nn.Linear(X.shape[1], 32), nn.ReLU(), nn.Dropout(0.2),
    nn.Linear(32, 16), nn.ReLU(),
    nn.Linear(16, 1),
)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
loss_fn = nn.MSELoss()

for epoch in range(40):
    model.train()
    total = 0.0
    for xb, yb in train_loader:
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(xb)
    if (epoch + 1) % 10 == 0:
        print(f"epoch {epoch + 1} train_mse={total / len(train_ds):.4f}")

model.eval()
test_pred = model(test_ds.features).detach().numpy().ravel() * y_std + y_mean
r2 = r2_score(y_test, test_pred)
print(f"RESULT r2={r2:.4f}")
