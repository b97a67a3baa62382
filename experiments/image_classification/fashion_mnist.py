"""Fashion-MNIST from the IDX files of Debian's `dataset-fashion-mnist` package (numpy only).

`load_fashion_mnist(n_train, n_test)` returns x_train [N, 1, 28, 28] float32 in [0, 1],
y_train [N] int64, x_test, y_test and the 10 class names. The train/test split is the one the
data set defines (60,000 / 10,000); `n_train` / `n_test` take a class-balanced subset: the first
n // 10 images of each class in file order, so the subset is fixed and does not depend on a seed.
Files may be gzip-compressed (`*.gz`, as Debian ships them) or not. The folder is
$FASHION_MNIST_DIR if set, else /usr/share/datasets/fashion-mnist.
"""
import gzip
import os

import numpy as np

DEFAULT_DIRS = ("/usr/share/datasets/fashion-mnist",)
CLASS_NAMES = ("t-shirt/top", "trouser", "pullover", "dress", "coat",
               "sandal", "shirt", "sneaker", "bag", "ankle boot")
FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
MISSING = ("Fashion-MNIST not found (looked for {name}[.gz] in {dirs}). Install the Debian package "
           "`dataset-fashion-mnist` (`apt-get install dataset-fashion-mnist`, or `make setup`), "
           "or point FASHION_MNIST_DIR at a folder holding the four IDX files.")


def data_dirs():
    env = os.environ.get("FASHION_MNIST_DIR")
    return ((env,) if env else ()) + DEFAULT_DIRS


def find_file(name, dirs=None):
    """Path of `name` or `name.gz` in the first folder that has it; FileNotFoundError otherwise."""
    dirs = tuple(dirs or data_dirs())
    for d in dirs:
        for candidate in (os.path.join(d, name), os.path.join(d, name + ".gz")):
            if os.path.isfile(candidate):
                return candidate
    raise FileNotFoundError(MISSING.format(name=name, dirs=", ".join(dirs)))


def read_idx(path):
    """An IDX file (gzip'd or not) as a numpy array of its declared shape (unsigned bytes only)."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file (magic {raw[:4].hex()})")
    ndim = raw[3]
    dims = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {data.size} values, but the header says {dims}")
    return data.reshape(dims)


def balanced_subset(y, n, n_classes=10):
    """Indices of the first n // n_classes examples of each class, in file order."""
    per = n // n_classes
    idx = [np.flatnonzero(y == c)[:per] for c in range(n_classes)]
    if any(len(i) < per for i in idx):
        raise ValueError(f"fewer than {per} examples in some class")
    return np.sort(np.concatenate(idx))


def load_split(split, n=None, dirs=None):
    images, labels = (read_idx(find_file(name, dirs)) for name in FILES[split])
    if len(images) != len(labels):
        raise ValueError(f"{split}: {len(images)} images but {len(labels)} labels")
    if n is not None and n < len(labels):
        keep = balanced_subset(labels, n)
        images, labels = images[keep], labels[keep]
    x = (images.astype(np.float32) / 255.0)[:, None, :, :]
    return x, labels.astype(np.int64)


def load_fashion_mnist(n_train=None, n_test=None, dirs=None):
    x_train, y_train = load_split("train", n_train, dirs)
    x_test, y_test = load_split("test", n_test, dirs)
    return x_train, y_train, x_test, y_test, list(CLASS_NAMES)
