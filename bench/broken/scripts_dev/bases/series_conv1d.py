"""Quick experiment: one-step-ahead forecasting of a noisy synthetic signal with a small 1-D CNN."""
import numpy as np
import torch
import torch.nn as nn

SEED = 0
N_STEPS = 2000
WINDOW = 32
CHANNELS = 16
KERNEL = 5
LR = 3e-3
EPOCHS = 8
BATCH_SIZE = 64
TRAIN_FRAC = 0.8

rng = np.random.default_rng(SEED)
torch.manual_seed(SEED)
torch.set_num_threads(1)

t = np.arange(N_STEPS)
series = np.sin(2 * np.pi * t / 50) + 0.5 * np.sin(2 * np.pi * t / 17) + 0.1 * rng.standard_normal(N_STEPS)

windows = np.lib.stride_tricks.sliding_window_view(series[:-1], WINDOW)
targets = series[WINDOW:]
split = int(TRAIN_FRAC * len(windows))
mu, sigma = series[:split + WINDOW].mean(), series[:split + WINDOW].std()
X = (windows - mu) / sigma
Y = (targets - mu) / sigma

x_train = torch.from_numpy(X[:split]).float()
y_train = torch.from_numpy(Y[:split]).float().unsqueeze(1)
x_test = torch.from_numpy(X[split:]).float()
y_test = Y[split:]
print(f"train windows {len(x_train)}  test windows {len(x_test)}")


class ConvForecaster(nn.Module):
    def __init__(self, window, channels, kernel):
        super().__init__()
        self.window = window
        self.features = nn.Sequential(
            nn.Conv1d(1, channels, kernel, padding=kernel // 2), nn.ReLU(),
            nn.Conv1d(channels, channels, kernel, padding=kernel // 2), nn.ReLU(),
            nn.MaxPool1d(2),
        )
        self.head = nn.Sequential(nn.Linear(channels * (window // 2), 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x):
        h = self.features(x.view(x.size(0), 1, self.window))
        return self.head(h.flatten(1))


model = ConvForecaster(WINDOW, CHANNELS, KERNEL)
optimizer = torch.optim.Adam(model.parameters(), lr=LR)
loss_fn = nn.MSELoss()

for epoch in range(EPOCHS):
    model.train()
    perm = torch.randperm(len(x_train))
    epoch_loss = 0.0
    for start in range(0, len(x_train), BATCH_SIZE):
        idx = perm[start:start + BATCH_SIZE]
        loss = loss_fn(model(x_train[idx]), y_train[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item() * len(idx)
    if epoch % 2 == 0 or epoch == EPOCHS - 1:
        print(f"epoch {epoch:2d}  train_mse {epoch_loss / len(x_train):.4f}")

model.eval()
pred = model(x_test).detach().numpy().ravel()
naive = float(np.mean((X[split:, -1] - y_test) ** 2))
mse = float(np.mean((pred - y_test) ** 2))
print(f"naive last-value mse {naive:.4f}")
print(f"RESULT mse={mse:.4f}")
