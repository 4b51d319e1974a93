"""Process 1 dies in the middle of a run of collectives; process 0 must fail with a clear error in
bounded time, not hang (tests/test_distributed.py). Run with a small EMBER_COLLECTIVE_TIMEOUT."""
import os
import sys
import time

import numpy as np

import ember
from ember import lax

ember.distributed.initialize()
rank = ember.distributed.process_index()
f = ember.pmap(lambda a: lax.psum(a, "i"), "i")
print(f"rank {rank}: first psum {np.asarray(f(np.ones((1, 4), np.float32))).tolist()}", flush=True)
if rank == 1:
    os._exit(3)  # dies: never reaches the second psum
waiting_since = time.monotonic()
try:
    f(np.ones((1, 4), np.float32))
except Exception:
    # (the time from the peer's death to the error: the deadline's, whatever the machine's load)
    print(f"rank {rank}: the second psum failed after {time.monotonic() - waiting_since:.2f} s", flush=True)
    raise
print(f"rank {rank}: the second psum returned, which it must not", flush=True)
sys.exit(0)
