"""GRU classifier on generated, left-padded token sequences: are most tokens 'high' (> VOCAB // 2)?"""
import numpy as np
import torch
import torch.nn as nn

torch.set_num_threads(1)
torch.manual_seed(0)

VOCAB, MIN_LEN, MAX_LEN = 20, 8, 16  # tokens are 1..VOCAB; 0 is padding
EMB, HIDDEN = 16, 32
EPOCHS, BATCH, LR = 12, 64, 3e-3


def make_sequences(n, rng):
    tokens = np.zeros((n, MAX_LEN), dtype=np.int64)
    labels = np.zeros(n, dtype=np.int64)
    for i in range(n):
        length = int(rng.integers(MIN_LEN, MAX_LEN + 1))
        seq = rng.integers(1, VOCAB + 1, size=length)
        tokens[i, MAX_LEN - length:] = seq  # left-pad so the last step is a real token
        labels[i] = int((seq > VOCAB // 2).sum() > length / 2)
    return torch.from_numpy(tokens), torch.from_numpy(labels)


rng = np.random.default_rng(0)
X_tr, y_tr = make_sequences(3000, rng)
X_te, y_te = make_sequences(1000, rng)


class SeqClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB + 1, EMB, padding_idx=0)
        self.gru = nn.GRU(EMB, HIDDEN, batch_first=True)
        self.proj = nn.Linear(HIDDEN, HIDDEN)
        self.head = nn.Linear(HIDDEN, 2)

    def forward(self, tokens):
        x = self.emb(tokens)
        _, h_n = self.gru(x)
        last = h_n[-1]
        h = torch.tanh(self.proj(last))
        h = h + last
        return self.head(h)


model = SeqClassifier()
optimizer = torch.optim.Adam(model.parameters(), lr=LR)
loss_fn = nn.CrossEntropyLoss()
gen = torch.Generator().manual_seed(0)

for epoch in range(EPOCHS):
    model.train()
    order = torch.randperm(len(X_tr), generator=gen)
    total = 0.0
    for start in range(0, len(order), BATCH):
        idx = order[start:start + BATCH]
        optimizer.zero_grad()
        loss = loss_fn(model(X_tr[idx]), y_tr[idx])
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        total += loss.item() * len(idx)
    if epoch % 4 == 3:
        print(f"epoch {epoch + 1}: train loss {total / len(X_tr):.4f}")

model.eval()
with torch.no_grad():
    preds = model(X_te).argmax(dim=1)
acc = (preds == y_te).float().mean().item()
print(f"RESULT accuracy={acc:.4f}")
