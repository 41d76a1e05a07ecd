"""ringtrain's Python module under mpirun, every rank checking itself: NumPy all-reduce and
broadcast, the gradient exchange on NumPy buffers, and bad use as one clear error.
    numpy_test.py [BACKEND]   (default ring)"""
import sys

import numpy as np

import ringtrain

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)


try:
    ringtrain.allreduce_(np.ones(3, dtype=np.float32))
    check(False, "allreduce_ before init() did not raise")
except ringtrain.Error as e:
    check(str(e) == "ringtrain.allreduce_ called before ringtrain.init()", f"message: {e}")

backend = sys.argv[1] if len(sys.argv) > 1 else "ring"
ringtrain.init(backend=backend, overlap=True)
r, n = ringtrain.rank(), ringtrain.size()
for dtype in (np.float32, np.float64, np.float16, np.int32, np.int64):
    a = np.arange(10, dtype=dtype) * (r + 1)
    ringtrain.allreduce_(a, op="sum")
    check(np.array_equal(a, np.arange(10, dtype=dtype) * (n * (n + 1) // 2)), f"sum {dtype}: {a}")
a = np.full(7, float(r), dtype=np.float32)
ringtrain.allreduce_(a)
check(np.all(a == np.float32((n - 1) / 2)), f"average: {a}")
b = np.full(5, r, dtype=np.int64)
ringtrain.broadcast_(b, root_rank=n - 1)
check(np.all(b == n - 1), f"broadcast: {b}")

exchange = ringtrain.GradientExchange(ringtrain.Compression.none)
grads = [np.full(c, float(r + 1), dtype=np.float32) for c in (3, 1000, 5)]
for i, g in enumerate(grads):
    check(exchange.add_parameter(f"p{i}", g.size) == i, "index")
for step in range(2):
    for i, g in enumerate(grads):
        g[:] = r + 1 + step
        exchange.gradient_ready(i, g.ctypes.data)
    exchange.wait()
    for g in grads:
        check(np.all(g == np.float32((n + 1) / 2 + step)), f"exchange step {step}: {g[:3]}")

for bad, kind in ((np.ones(4, dtype=np.float32)[::2], ValueError), ([1.0, 2.0], TypeError),
                  (np.ones(2, dtype=np.complex64), TypeError)):
    try:
        ringtrain.allreduce_(bad)
        check(False, f"{kind.__name__} not raised for {bad!r}")
    except kind as e:
        check(str(e).startswith("ringtrain.allreduce_: "), f"message: {e}")

if n > 1:  # sizes that differ across ranks: every rank hears of it, naming both
    try:
        ringtrain.allreduce_(np.ones(10 + (r == 1), dtype=np.float32))
        check(False, "mismatched sizes not reported")
    except ringtrain.Error as e:
        check("rank 0 calls all-reduce" in str(e) and "rank 1 calls all-reduce" in str(e) and
              "of 11 float32" in str(e), f"mismatch message: {e}")

ringtrain.shutdown()
for f in failures:
    print(f"FAIL rank {r}/{n}: {f}", flush=True)
if not failures:
    print(f"ok rank {r}/{n}: numpy collectives, gradient exchange, bad use ({backend})",
          flush=True)
sys.exit(1 if failures else 0)
