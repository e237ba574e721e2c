import os

# Tests run on a shared 2-core machine: keep BLAS and JAX from spawning extra threads.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Property tests explore new random examples on every local run (and remember failures in
# .hypothesis/). In CI (CI=true, set by .ci/run) they run a fixed, derandomized sequence so a
# verdict is reproducible; a failure found locally is added as an explicit regression test.
from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")
