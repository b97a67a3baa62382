"""Small 2-D CNN on scikit-learn's bundled 8x8 handwritten digits images."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

torch.set_num_threads(1)
torch.manual_seed(0)
np.random.seed(0)

EPOCHS, BATCH, LR = 15, 64, 2e-3

digits = load_digits()
images = digits.images / 16.0  # pixel values 0..16 -> [0, 1]
img_tr, img_te, lab_tr, lab_te = train_test_split(
    images, digits.target, test_size=0.25, random_state=0, stratify=digits.target)


def to_tensors(imgs, labels):
    x = torch.tensor(imgs, dtype=torch.float32).unsqueeze(1)  # add the channel axis
    y = torch.tensor(labels, dtype=torch.long)
    return x, y


X_tr, y_tr = to_tensors(img_tr, lab_tr)
X_te, y_te = to_tensors(img_te, lab_te)


class DigitCNN(nn.Module):
    def __init__(self, n_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 2 * 2, 64)
        self.fc2 = nn.Linear(64, n_classes)
        self.drop = nn.Dropout(0.2)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = self.drop(F.relu(self.fc1(x)))
        return self.fc2(x)


model = DigitCNN()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=LR)
gen = torch.Generator().manual_seed(0)

for epoch in range(EPOCHS):
    model.train()
    order = torch.randperm(len(X_tr), generator=gen)
    total = 0.0
    for start in range(0, len(order), BATCH):
        idx = order[start:start + BATCH]
        xb, yb = X_tr[idx], y_tr[idx]
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(idx)
    if epoch % 5 == 4:
        print(f"epoch {epoch + 1}: train loss {total / len(X_tr):.4f}")

model.eval()
with torch.no_grad():
    preds = model(X_te).argmax(dim=1)
acc = (preds == y_te).float().mean().item()
print(f"RESULT accuracy={acc:.4f}")
