"""Procedural 3D point cloud shape dataset (numpy only, seeded, nothing cached).

Not edited by the research loop. Every shape is sampled on its surface, given a
random rotation and a mild random anisotropic scale, jittered with Gaussian
noise, centred and normalised into the unit sphere, and a few points are
replaced by uniform outliers. Several class pairs are deliberately confusable:
sphere/ellipsoid, cube/cuboid, cylinder/capsule, cone/pyramid, disk/torus.
"""
import numpy as np

CLASS_NAMES = ["sphere", "ellipsoid", "cube", "cuboid", "cylinder", "capsule",
               "cone", "pyramid", "torus", "disk", "helix", "octahedron"]

JITTER = 0.02          # std of Gaussian noise added to every point
OUTLIER_FRAC = 0.03    # fraction of points replaced by uniform noise in the unit ball
SCALE_JITTER = 0.12    # every shape gets per-axis scale in [1-s, 1+s]
MAX_TILT_DEG = 30      # random rotation: any angle about z, then a tilt of up to this


def _tri(rng, a, b, c, n):
    """n uniform points on triangle(s) a,b,c (arrays of shape [n,3])."""
    u, v = rng.random(n), rng.random(n)
    flip = u + v > 1
    u[flip], v[flip] = 1 - u[flip], 1 - v[flip]
    return a + u[:, None] * (b - a) + v[:, None] * (c - a)


def _pick(rng, areas, n):
    """Choose a surface part for each of n points, proportionally to area."""
    p = np.asarray(areas, dtype=np.float64)
    return rng.choice(len(p), size=n, p=p / p.sum())


def _sphere_dir(rng, n):
    d = rng.normal(size=(n, 3))
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def _box(rng, n, dims):
    dx, dy, dz = dims
    face = _pick(rng, [dy * dz, dy * dz, dx * dz, dx * dz, dx * dy, dx * dy], n)
    p = rng.uniform(-1, 1, size=(n, 3))
    axis = face // 2
    p[np.arange(n), axis] = np.where(face % 2 == 0, -1.0, 1.0)
    return p * np.array(dims) / 2


def _cylinder(rng, n, r, h):
    part = _pick(rng, [2 * np.pi * r * h, np.pi * r * r, np.pi * r * r], n)
    t = rng.uniform(0, 2 * np.pi, n)
    rad = np.where(part == 0, r, r * np.sqrt(rng.random(n)))
    z = np.where(part == 0, rng.uniform(-h / 2, h / 2, n), np.where(part == 1, -h / 2, h / 2))
    return np.stack([rad * np.cos(t), rad * np.sin(t), z], 1)


def _capsule(rng, n, r, h):
    part = _pick(rng, [2 * np.pi * r * h, 4 * np.pi * r * r], n)
    t = rng.uniform(0, 2 * np.pi, n)
    side = np.stack([r * np.cos(t), r * np.sin(t), rng.uniform(-h / 2, h / 2, n)], 1)
    cap = _sphere_dir(rng, n) * r
    cap[:, 2] += np.sign(cap[:, 2]) * h / 2
    return np.where((part == 0)[:, None], side, cap)


def _cone(rng, n, r, h):
    slant = np.sqrt(r * r + h * h)
    part = _pick(rng, [np.pi * r * slant, np.pi * r * r], n)
    t = rng.uniform(0, 2 * np.pi, n)
    s = np.sqrt(rng.random(n))  # area-uniform radial fraction
    z = np.where(part == 0, h * (1 - s), 0.0) - h / 3
    rad = r * s
    return np.stack([rad * np.cos(t), rad * np.sin(t), z], 1)


def _pyramid(rng, n, a, h):
    base = np.array([[-a, -a, 0], [a, -a, 0], [a, a, 0], [-a, a, 0]], dtype=np.float64)
    apex = np.array([0, 0, h])
    side_area = 2 * a * np.sqrt(a * a + h * h)
    part = _pick(rng, [4 * a * a] + [side_area / 2] * 4, n)
    out = np.empty((n, 3))
    m = part == 0
    out[m] = np.stack([rng.uniform(-a, a, m.sum()), rng.uniform(-a, a, m.sum()), np.zeros(m.sum())], 1)
    for k in range(4):
        m = part == k + 1
        out[m] = _tri(rng, base[k], base[(k + 1) % 4], apex, m.sum())
    out[:, 2] -= h / 4
    return out


def _torus(rng, n, R, r):
    u, v = rng.uniform(0, 2 * np.pi, (2, n))
    return np.stack([(R + r * np.cos(v)) * np.cos(u), (R + r * np.cos(v)) * np.sin(u), r * np.sin(v)], 1)


def _disk(rng, n, r, thick):
    part = _pick(rng, [2 * np.pi * r * r, 2 * np.pi * r * thick], n)
    t = rng.uniform(0, 2 * np.pi, n)
    rad = np.where(part == 0, r * np.sqrt(rng.random(n)), r)
    z = np.where(part == 0, np.sign(rng.random(n) - 0.5) * thick / 2, rng.uniform(-thick / 2, thick / 2, n))
    return np.stack([rad * np.cos(t), rad * np.sin(t), z], 1)


def _helix(rng, n, r, turns, tube):
    t = rng.uniform(0, 2 * np.pi * turns, n)
    p = np.stack([r * np.cos(t), r * np.sin(t), t / (2 * np.pi * turns) - 0.5], 1)
    return p + rng.normal(scale=tube, size=(n, 3))


def _octahedron(rng, n):
    signs = rng.choice([-1.0, 1.0], size=(n, 3))
    return _tri(rng, np.zeros((n, 3)) + [1, 0, 0], np.zeros((n, 3)) + [0, 1, 0],
                np.zeros((n, 3)) + [0, 0, 1], n) * signs


def _sample(rng, cls, n):
    U = rng.uniform
    if cls == 0:
        return _sphere_dir(rng, n)
    if cls == 1:  # ellipsoid: one or two axes noticeably different
        return _sphere_dir(rng, n) * np.array([1.0, U(0.6, 0.8), U(0.6, 1.0)])[rng.permutation(3)]
    if cls == 2:
        return _box(rng, n, (1.0, 1.0, 1.0))
    if cls == 3:  # cuboid: not a cube
        return _box(rng, n, np.array([1.0, U(0.55, 0.8), U(0.55, 1.0)])[rng.permutation(3)])
    if cls == 4:
        return _cylinder(rng, n, U(0.35, 0.6), U(0.9, 1.6))
    if cls == 5:
        return _capsule(rng, n, U(0.35, 0.6), U(0.6, 1.2))
    if cls == 6:
        return _cone(rng, n, U(0.4, 0.7), U(0.9, 1.5))
    if cls == 7:
        return _pyramid(rng, n, U(0.35, 0.6), U(0.9, 1.5))
    if cls == 8:
        return _torus(rng, n, 1.0, U(0.2, 0.45))
    if cls == 9:
        return _disk(rng, n, 1.0, U(0.1, 0.3))
    if cls == 10:
        return _helix(rng, n, U(0.4, 0.8), U(1.5, 4.0), 0.04)
    return _octahedron(rng, n)


def _random_rotation(rng):
    """Uniform rotation about z composed with a random tilt of up to MAX_TILT_DEG."""
    def rot(axis, a):
        c, s = np.cos(a), np.sin(a)
        i, j = [k for k in range(3) if k != axis]
        m = np.eye(3)
        m[i, i], m[i, j], m[j, i], m[j, j] = c, -s, s, c
        return m
    tilt = np.deg2rad(MAX_TILT_DEG) * rng.random()
    return rot(2, rng.uniform(0, 2 * np.pi)) @ rot(0, tilt) @ rot(2, rng.uniform(0, 2 * np.pi))


def _make_one(rng, cls, n_points):
    p = _sample(rng, cls, n_points)
    p = p * rng.uniform(1 - SCALE_JITTER, 1 + SCALE_JITTER, size=3)
    p = p @ _random_rotation(rng).T
    p = p + rng.normal(scale=JITTER, size=p.shape)
    p = p - p.mean(0)
    p = p / np.linalg.norm(p, axis=1).max()
    k = rng.binomial(n_points, OUTLIER_FRAC)
    if k:
        idx = rng.choice(n_points, size=k, replace=False)
        p[idx] = _sphere_dir(rng, k) * rng.random(k)[:, None] ** (1 / 3)
    return p[rng.permutation(n_points)]


def make_dataset(n_train=2400, n_test=1200, n_points=256, seed=0):
    """Return x_train [N,P,3] float32, y_train [N] int64, x_test, y_test, class_names.

    Classes are balanced (up to rounding) and the same seed always gives the same arrays.
    """
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    y = rng.permutation(np.arange(n) % len(CLASS_NAMES)).astype(np.int64)
    x = np.stack([_make_one(rng, c, n_points) for c in y]).astype(np.float32)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:], list(CLASS_NAMES)
