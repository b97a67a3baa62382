"""1-D CNN that classifies generated noisy waveforms (sine / square / sawtooth)."""
import numpy as np
import torch
import torch.nn as nn

SEED = 0
SEQ_LEN = 64
N_CLASSES = 3
torch.manual_seed(SEED)
torch.set_num_threads(1)
rng = np.random.default_rng(SEED)


def make_waves(n):
    t = np.linspace(0.0, 1.0, SEQ_LEN)
    labels = rng.integers(0, N_CLASSES, size=n)
    freq = rng.uniform(1.5, 4.0, size=(n, 1))
    phase = rng.uniform(0.0, 2 * np.pi, size=(n, 1))
    arg = 2 * np.pi * freq * t[None, :] + phase
    sine = np.sin(arg)
    square = np.sign(np.sin(arg))
    saw = 2.0 * ((arg / (2 * np.pi)) % 1.0) - 1.0
    waves = np.where(labels[:, None] == 0, sine, np.where(labels[:, None] == 1, square, saw))
    waves = waves + rng.normal(0.0, 0.7, size=waves.shape)
    return waves.astype(np.float32), labels.astype(np.int64)


X_train, y_train = make_waves(900)
X_test, y_test = make_waves(300)

# (N, L) -> (N, 1, L): one input channel
X_train_t = torch.from_numpy(X_train).unsqueeze(1)
X_test_t = torch.from_numpy(X_test).unsqueeze(1)
y_train_t = torch.from_numpy(y_train)
y_test_t = torch.from_numpy(y_test)


class WaveNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 16, kernel_size=5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(16, 32, kernel_size=5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
        )
        self.head = nn.Linear(32 * (SEQ_LEN // 4), N_CLASSES)

    def forward(self, x):
        h = self.features(x)
        return self.head(h.flatten(1))


model = WaveNet()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
criterion = nn.CrossEntropyLoss()

BATCH = 32
for epoch in range(10):
    model.train()
    perm = torch.randperm(len(X_train_t))
    total = 0.0
    for i in range(0, len(perm), BATCH):
        idx = perm[i:i + BATCH]
        optimizer.zero_grad()
        loss = criterion(model(X_train_t[idx]), y_train_t[idx])
        loss.backward()
        optimizer.step()
        total += loss.item() * len(idx)
    print(f"epoch {epoch + 1} train_loss={total / len(perm):.4f}")

model.eval()
with torch.no_grad():
    pred = model(X_test_t).argmax(dim=1)
accuracy = (pred == y_test_t).float().mean().item()
print(f"RESULT accuracy={accuracy:.4f}")
