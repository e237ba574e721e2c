import os

# Tests run on a shared 2-core machine: keep BLAS and JAX from spawning extra threads.
os.environ.setdefault("OMP_NUM_THREADS", "1")
