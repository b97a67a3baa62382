"""Generates the topic's series from the Mackey-Glass delay differential equation (run once; the
CSVs are shipped):

    dx/dt = 0.2 x(t - 17) / (1 + x(t - 17)^10) - 0.1 x(t)

(M. C. Mackey and L. Glass, Science 197, 1977; tau = 17 is the chaotic setting of the forecasting
benchmarks), with x = 1.2 for t <= 0, integrated by fourth-order Runge-Kutta with step 0.1 (the
delayed value at a half step linearly interpolated), sampled once per time unit, the first 500
units dropped as the transient. Plain arithmetic, no randomness: the files are reproduced exactly.

train.csv holds the first 2000 samples; the held-out windows start 100 samples after them: each
has the 30 latest values up to its origin (lag_29 .. lag_0, lag_0 at the origin) and the target
is the value HORIZON samples after the origin.

    python prepare_data.py
"""
import csv

TAU, BETA, GAMMA, POWER = 17.0, 0.2, 0.1, 10
DT, PER_UNIT = 0.1, 10            # integration step; steps per sample
TRANSIENT, TRAIN, GAP, TEST_SPAN = 500, 2000, 100, 900
LAGS, HORIZON, STRIDE = 30, 20, 3


def series(n_samples):
    delay = int(round(TAU / DT))
    xs = [1.2] * (delay + 1)  # x at steps -delay..0

    def f(x, x_tau):
        return BETA * x_tau / (1 + x_tau ** POWER) - GAMMA * x

    for _ in range((TRANSIENT + n_samples) * PER_UNIT):
        x = xs[-1]
        d0, d1 = xs[-1 - delay], xs[-delay]  # x(t - tau) and x(t + dt - tau)
        dh = (d0 + d1) / 2
        k1 = f(x, d0)
        k2 = f(x + DT / 2 * k1, dh)
        k3 = f(x + DT / 2 * k2, dh)
        k4 = f(x + DT * k3, d1)
        xs.append(x + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4))
    samples = xs[delay::PER_UNIT]
    return samples[TRANSIENT:TRANSIENT + n_samples]


x = series(TRAIN + GAP + TEST_SPAN + HORIZON)
with open("train.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["t", "x"])
    w.writerows([t, f"{x[t]:.6f}"] for t in range(TRAIN))
origins = range(TRAIN + GAP + LAGS - 1, TRAIN + GAP + TEST_SPAN, STRIDE)
with open("test_inputs.csv", "w", newline="") as f, open("test_labels.csv", "w", newline="") as g:
    w, v = csv.writer(f), csv.writer(g)
    w.writerow(["id"] + [f"lag_{k}" for k in range(LAGS - 1, -1, -1)])
    v.writerow(["id", "target"])
    for j, o in enumerate(origins):
        w.writerow([f"w{j:03d}"] + [f"{x[o - k]:.6f}" for k in range(LAGS - 1, -1, -1)])
        v.writerow([f"w{j:03d}", f"{x[o + HORIZON]:.6f}"])
print(f"{TRAIN} training samples, {len(origins)} held-out windows, horizon {HORIZON}")
