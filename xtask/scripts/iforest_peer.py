#!/usr/bin/env python3
"""Peer of the anomaly model for `cargo xtask bench`: scikit-learn's IsolationForest.

Fits a forest of the same shape as Steward's native model (100 trees, 256 samples per tree) on
N rows of synthetic numeric features (64 columns, a few heavy-tailed), then times
  - scoring one event at a time (`score_samples` on a 1-row array: what a policy check or an
    anomaly report needs per request), N_SINGLE calls, p50/p99 in microseconds;
  - scoring in batches of 1,000 rows (scikit-learn's best case), rows per second.
Prints one JSON line. Features are given: the time to extract them from an event is not
counted here (Steward's figure includes it).

Usage: iforest_peer.py [N_TRAIN]   (run by `cargo xtask bench` in a cached venv:
$STEWARD_CACHE_DIR/iforest-venv, default ~/.cache/steward/iforest-venv)
"""

import json
import sys
import time

import numpy as np
import sklearn
from sklearn.ensemble import IsolationForest

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
D = 64
N_SINGLE = 300

rng = np.random.default_rng(7)
X = rng.normal(size=(N, D)).astype(np.float32)
X[:, :8] = rng.lognormal(mean=1.0, sigma=1.0, size=(N, 8))

t = time.perf_counter()
forest = IsolationForest(n_estimators=100, max_samples=256, random_state=7, n_jobs=1).fit(X)
fit_s = time.perf_counter() - t

rows = rng.normal(size=(N_SINGLE, D)).astype(np.float32)
for i in range(50):  # warm up
    forest.score_samples(rows[i : i + 1])
times = []
for i in range(N_SINGLE):
    t = time.perf_counter()
    forest.score_samples(rows[i : i + 1])
    times.append((time.perf_counter() - t) * 1e6)
times.sort()

batch = rng.normal(size=(1000, D)).astype(np.float32)
n = 0
t = time.perf_counter()
while time.perf_counter() - t < 3.0:
    forest.score_samples(batch)
    n += len(batch)
batch_rate = n / (time.perf_counter() - t)

print(json.dumps({
    "peer": f"scikit-learn {sklearn.__version__} IsolationForest (100 trees, 256 samples, n_jobs=1)",
    "scenario": "anomaly scoring",
    "backend": "in process",
    "train_rows": N,
    "features": D,
    "fit_s": round(fit_s, 3),
    "single_p50_us": times[len(times) // 2],
    "single_p99_us": times[int(len(times) * 0.99)],
    "batch_rows_per_s": batch_rate,
}))
