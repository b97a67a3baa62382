"""Plain-numpy k-means (k-means++ init, several restarts) on the bundled wine data; clusters are
labelled by majority vote on the training split and scored as a classifier on the test split."""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from collections import Counter

import numpy as np
from sklearn.datasets import load_wine

SEED = 0
K = 3
rng = np.random.default_rng(SEED)

X, y = load_wine(return_X_y=True)
order = rng.permutation(len(X))
n_test = len(X) // 4
test_idx, train_idx = order[:n_test], order[n_test:]
mu, sigma = X[train_idx].mean(axis=0), X[train_idx].std(axis=0)
X_train, y_train = (X[train_idx] - mu) / sigma, y[train_idx]
X_test, y_test = (X[test_idx] - mu) / sigma, y[test_idx]


def sq_dists(points, centroids):
    # (n, k) squared distances
    return ((points[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)


def kmeans_pp_init(points, k):
    centroids = [points[rng.integers(len(points))]]
    for _ in range(k - 1):
        d = sq_dists(points, np.array(centroids)).min(axis=1)
        centroids.append(points[rng.choice(len(points), p=d / d.sum())])
    return np.array(centroids)


def kmeans(points, k, n_iter=100):
    centroids = kmeans_pp_init(points, k)
    for _ in range(n_iter):
        assign = sq_dists(points, centroids).argmin(axis=1)
        new = np.array([points[assign == j].mean(axis=0) if np.any(assign == j) else centroids[j]
                        for j in range(k)])
        if np.allclose(new, centroids):
            break
        centroids = new
    inertia = sq_dists(points, centroids).min(axis=1).sum()
    return centroids, inertia


best_centroids, best_inertia = None, np.inf
for restart in range(10):
    centroids, inertia = kmeans(X_train, K)
    print(f"restart {restart} inertia={inertia:.2f}")
    if inertia < best_inertia:
        best_centroids, best_inertia = centroids, inertia

train_assign = sq_dists(X_train, best_centroids).argmin(axis=1)
cluster_label = {}
for j in range(K):
    members = y_train[train_assign == j]
    cluster_label[j] = Counter(members.tolist()).most_common(1)[0][0] if len(members) else 0

test_assign = sq_dists(X_test, best_centroids).argmin(axis=1)
pred = np.array([cluster_label[j] for j in test_assign])
accuracy = float((pred == y_test).mean())
print(f"RESULT accuracy={accuracy:.4f}")
