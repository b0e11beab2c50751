"""Thread stress run: N threads, each with its own session on one device, run random op
sequences for a while and check every result against numpy.

    python tools/stress.py [--threads 8] [--seconds 60] [--device 0]

Prints per-thread op counts, failures (with the first few messages) and a total line
``stress: <ops> ops, <failures> failures``; exits 1 when anything failed.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tenferro_cuda as tc  # noqa: E402


def _shape(rng) -> tuple[int, ...]:
    return tuple(int(n) for n in rng.integers(1, 40, size=int(rng.integers(1, 4))))


def _pair(s, rng, shape=None):
    shape = shape or _shape(rng)
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    return a, b, s.upload_host_tensor(a), s.upload_host_tensor(b)


def op_add(s, rng):
    a, b, x, y = _pair(s, rng)
    return s.add(x, y), a + b


def op_mul_view(s, rng):
    a, b, x, y = _pair(s, rng, (int(rng.integers(2, 50)), int(rng.integers(2, 50))))
    return s.mul(x.T, y.T), (a * b).T


def op_exp(s, rng):
    a, _, x, _ = _pair(s, rng)
    return s.exp(x), np.exp(a)


def op_reduce(s, rng):
    a, _, x, _ = _pair(s, rng)
    axes = tuple(i for i in range(a.ndim) if rng.random() < 0.5)
    return s.reduce_sum(x, axes), a.sum(axis=axes, dtype=np.float64).astype(np.float32)


def op_transpose(s, rng):
    a, _, x, _ = _pair(s, rng)
    perm = tuple(int(p) for p in rng.permutation(a.ndim))
    return s.transpose(x, perm), a.transpose(perm)


def op_contiguous(s, rng):
    a, _, x, _ = _pair(s, rng, (int(rng.integers(2, 60)), int(rng.integers(2, 60))))
    return s.to_contiguous_read(x[::-1, ::2]), a[::-1, ::2]


def op_matmul(s, rng):
    m, k, n = (int(v) for v in rng.integers(1, 64, size=3))
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    cfg = tc.DotGeneralConfig((1,), (0,))
    return s.dot_general(s.upload_host_tensor(a), s.upload_host_tensor(b), cfg), a @ b


def op_slice(s, rng):
    a, _, x, _ = _pair(s, rng)
    starts = [int(rng.integers(0, n)) for n in a.shape]
    limits = [int(rng.integers(st, n + 1)) for st, n in zip(starts, a.shape)]
    steps = [int(rng.integers(1, 3)) for _ in a.shape]
    want = a[tuple(slice(st, lim, k) for st, lim, k in zip(starts, limits, steps))]
    return s.slice(x, tc.SliceConfig(starts, limits, steps)), want


def op_concat(s, rng):
    a, b, x, y = _pair(s, rng)
    axis = int(rng.integers(0, a.ndim))
    return s.concatenate([x, y], axis), np.concatenate([a, b], axis)


def op_cast(s, rng):
    a, _, x, _ = _pair(s, rng)
    return s.cast(x, tc.float64), a.astype(np.float64)


OPS = [op_add, op_mul_view, op_exp, op_reduce, op_transpose, op_contiguous, op_matmul,
       op_slice, op_concat, op_cast]


def worker(index: int, seconds: float, device: int, counts: list, failures: list) -> None:
    rng = np.random.default_rng(1000 + index)
    deadline = time.monotonic() + seconds
    with tc.cuda_exec_session(device) as s:
        while time.monotonic() < deadline:
            op = OPS[int(rng.integers(0, len(OPS)))]
            try:
                got, want = op(s, rng)
                value = s.download_to_host(got).numpy()
                if value.shape != want.shape or not np.allclose(value, want, rtol=2e-4,
                                                                atol=2e-4):
                    failures.append(f"thread {index} {op.__name__}: wrong values")
            except Exception as exc:  # noqa: BLE001 - every failure is counted and shown
                failures.append(f"thread {index} {op.__name__}: {type(exc).__name__}: {exc}")
            counts[index] += 1
        s.synchronize()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args()
    counts = [0] * args.threads
    failures: list[str] = []
    threads = [threading.Thread(target=worker, args=(i, args.seconds, args.device, counts,
                                                     failures)) for i in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("per thread:", counts)
    for line in failures[:10]:
        print(" ", line)
    print(f"stress: {sum(counts)} ops, {len(failures)} failures "
          f"({args.threads} threads x {args.seconds:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
