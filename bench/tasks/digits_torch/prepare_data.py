"""Builds the topic's arrays from scikit-learn's bundled digits data (run once; the .npz files are
shipped): a fixed 75/25 split drawn with numpy's legacy RandomState(0), whose stream numpy keeps
fixed, so the files are reproduced exactly.

    python prepare_data.py
"""
import numpy as np
from sklearn.datasets import load_digits

TEST_SHARE = 0.25

digits = load_digits()
images = digits.images.astype(np.uint8)  # (1797, 8, 8), grey levels 0..16
labels = digits.target.astype(np.int64)
order = np.random.RandomState(0).permutation(len(labels))
n_test = int(round(TEST_SHARE * len(labels)))
test, train = np.sort(order[:n_test]), np.sort(order[n_test:])

np.savez_compressed("train.npz", images=images[train], labels=labels[train])
np.savez_compressed("test_features.npz", images=images[test], ids=test.astype(np.int64))
np.savez_compressed("test_labels.npz", labels=labels[test], ids=test.astype(np.int64))
print(f"{len(train)} training images, {len(test)} held-out images")
