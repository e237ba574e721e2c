import atexit
import os
import shutil
import tempfile

# Tests run on a shared 2-core machine: keep BLAS and JAX from spawning extra threads.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Property tests explore new random examples on every local run (and remember failures in
# .hypothesis/). In CI (CI=true, set by .ci/run) they run a fixed, derandomized sequence so a
# verdict is reproducible; a failure found locally is added as an explicit regression test.
from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")


# Apache Beam's portable runner (used by the Beam tests) and its worker processes leave empty
# "beam-temp*" and "tmp*" folders in the temporary directory, and multiprocessing's servers
# their "pymp-*" folders; a CI run left about 250 of them. Every test process (and every
# process it starts, which inherits TMPDIR) writes its temporaries under one folder of this
# session, removed when the session ends. THRESHER_KEEP_TEST_TMP=1 keeps it (its path is
# printed) for looking at a failure.
if "THRESHER_TEST_TMP" not in os.environ:  # not again in a subprocess that imports this file
    _SESSION_TMP = tempfile.mkdtemp(prefix="thresher-tests-")
    os.environ["THRESHER_TEST_TMP"] = os.environ["TMPDIR"] = _SESSION_TMP
    tempfile.tempdir = None  # tempfile reads TMPDIR again on its next use

    def _remove_session_tmp() -> None:
        if os.environ.get("THRESHER_KEEP_TEST_TMP"):
            print(f"\ntest temporaries kept in {_SESSION_TMP}")
            return
        shutil.rmtree(_SESSION_TMP, ignore_errors=True)

    atexit.register(_remove_session_tmp)
