"""Two-layer tanh MLP written in plain numpy (manual backprop, full-batch gradient descent)
on a generated three-class spiral."""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

N_PER_CLASS, N_CLASSES = 300, 3
HIDDEN, LR, STEPS, L2 = 64, 1.0, 3000, 1e-4


def make_spirals(n_per_class, n_classes, rng, noise=0.2):
    xs, ys = [], []
    for c in range(n_classes):
        r = np.linspace(0.0, 1.0, n_per_class)
        t = np.linspace(c * 4.0, (c + 1) * 4.0, n_per_class) + rng.normal(0.0, noise, n_per_class)
        xs.append(np.column_stack([r * np.sin(t), r * np.cos(t)]))
        ys.append(np.full(n_per_class, c))
    return np.concatenate(xs), np.concatenate(ys)


def softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    exps = np.exp(z)
    return exps / exps.sum(axis=1, keepdims=True)


rng = np.random.default_rng(0)
X, y = make_spirals(N_PER_CLASS, N_CLASSES, rng)
perm = rng.permutation(len(y))
X, y = X[perm], y[perm]
n_train = int(0.75 * len(y))
X_tr, y_tr, X_te, y_te = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
Y_tr = np.eye(N_CLASSES)[y_tr]

W1 = rng.normal(0.0, 1.0, (2, HIDDEN))
b1 = np.zeros(HIDDEN)
W2 = rng.normal(0.0, 1.0 / np.sqrt(HIDDEN), (HIDDEN, N_CLASSES))
b2 = np.zeros(N_CLASSES)

for step in range(STEPS):
    h = np.tanh(X_tr @ W1 + b1)
    probs = softmax(h @ W2 + b2)
    if step % 1000 == 0:
        loss = -np.log(probs[np.arange(n_train), y_tr] + 1e-12).mean()
        print(f"step {step}: loss {loss:.4f}")
    dlogits = (probs - Y_tr) / n_train
    dW2 = h.T @ dlogits + L2 * W2
    db2 = dlogits.sum(axis=0)
    dh = (dlogits @ W2.T) * (1.0 - h ** 2)
    dW1 = X_tr.T @ dh + L2 * W1
    db1 = dh.sum(axis=0)
    W1 -= LR * dW1
    b1 -= LR * db1
    W2 -= LR * dW2
    b2 -= LR * db2

pred = np.argmax(np.tanh(X_te @ W1 + b1) @ W2 + b2, axis=1)
acc = float((pred == y_te).mean())
print(f"RESULT accuracy={acc:.4f}")
