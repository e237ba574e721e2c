"""Random maps under repeat draw anew in every epoch, as Grain's repeat(reseed_each_epoch=True) does.

Grain is the oracle for what must match: that draws differ between epochs (or not,
with the opt-out), which records each epoch holds, and the per-epoch distribution
of the draws. The random values themselves are thresher's own. Then thresher's
invariants: the same stream for every worker count, exact resume in a fresh process.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

import thresher as th
from tests.dataset.grain_chains import CHAINS, EPOCHS, build_grain, build_thresher, epoch_length
from tests.dataset.spec import run_in_fresh_process

N = 200


def _epochs(stream: list[tuple[int, int]], length: int) -> list[dict[int, int]]:
    """The draws of each epoch, by record."""
    assert len(stream) == EPOCHS * length
    return [dict(stream[e * length:(e + 1) * length]) for e in range(EPOCHS)]


def _changed(a: dict[int, int], b: dict[int, int]) -> float:
    """The share of records whose draw differs between two epochs."""
    assert a.keys() == b.keys()
    return sum(a[k] != b[k] for k in a) / len(a)


@pytest.mark.parametrize("name", CHAINS)
def test_draws_differ_between_epochs_as_in_grain(name: str) -> None:
    length = epoch_length(name, N)
    ours = _epochs(list(build_thresher(name, N)), length)
    grains = _epochs([tuple(x) for x in build_grain(name, N)], length)
    for epochs in (ours, grains):
        # every epoch holds the same records (Grain's are the oracle) ...
        assert all(e.keys() == grains[0].keys() for e in epochs)
        # ... and each epoch draws anew for (almost) every record
        for e in range(1, EPOCHS):
            assert _changed(epochs[0], epochs[e]) > 0.97
            assert _changed(epochs[e - 1], epochs[e]) > 0.97


@pytest.mark.parametrize("name", CHAINS)
def test_opt_out_repeats_the_first_epoch_as_in_grain(name: str) -> None:
    length = epoch_length(name, N)
    ours = list(build_thresher(name, N, reseed=False))
    grains = [tuple(x) for x in build_grain(name, N, reseed=False)]
    for stream in (ours, grains):
        # the same order and the same draws in every epoch
        assert all(stream[e * length:(e + 1) * length] == stream[:length] for e in range(EPOCHS))
    # the opt-out's first epoch is the default's first epoch
    assert ours[:length] == list(build_thresher(name, N))[:length]


@pytest.mark.parametrize("name", CHAINS)
def test_per_epoch_distribution_matches_grain(name: str) -> None:
    """Draws of 0..9: uniform within each epoch, independent between epochs (agreeing
    for ~1/10 of the records), in thresher as in Grain."""
    n = 2000
    length = epoch_length(name, n)
    for stream in (list(build_thresher(name, n, fn="draw10")),
                   [tuple(x) for x in build_grain(name, n, fn="draw10")]):
        epochs = _epochs(stream, length)
        for e in epochs:
            counts = Counter(e.values())
            expected = length / 10
            chi2 = sum((counts.get(v, 0) - expected) ** 2 / expected for v in range(10))
            assert chi2 < 30, chi2  # 9 degrees of freedom: P(chi2 > 30) < 0.001
        for e in range(1, EPOCHS):
            assert 0.06 < 1 - _changed(epochs[0], epochs[e]) < 0.14


@pytest.mark.parametrize("name", CHAINS)
def test_same_draws_for_worker_counts_0_and_2(name: str) -> None:
    alone = list(build_thresher(name, 60))
    with_workers = iter(build_thresher(name, 60, workers=2))
    try:
        assert list(with_workers) == alone
    finally:
        with_workers.close()


def _resume_in_fresh_process(jobs: list[dict[str, Any]]) -> list[list[list[int]]]:
    code = (
        "import json, sys\n"
        "from tests.dataset.grain_chains import build_thresher\n"
        "out = []\n"
        "for job in json.loads(sys.stdin.read()):\n"
        "    it = iter(build_thresher(job['name'], job['n'], reseed=job['reseed'], workers=job['workers']))\n"
        "    it.set_state(job['state'])\n"
        "    out.append([list(x) for x in it])\n"
        "    it.close()\n"
        "print(json.dumps(out))\n"
    )
    return run_in_fresh_process(code, jobs)


def test_exact_resume_mid_second_epoch_in_a_fresh_process() -> None:
    n = 40
    jobs, want = [], []
    for name in CHAINS:
        for reseed, workers in ((True, 0), (True, 2), (False, 0)):
            full = [list(x) for x in build_thresher(name, n, reseed=reseed)]
            k = epoch_length(name, n) + 7  # in the middle of the second epoch
            it = iter(build_thresher(name, n, reseed=reseed))
            for _ in range(k):
                next(it)
            state = json.loads(json.dumps(it.get_state()))
            jobs.append({"name": name, "n": n, "reseed": reseed, "workers": workers, "state": state})
            want.append(full[k:])
    assert _resume_in_fresh_process(jobs) == want


def test_reseeding_changes_the_fingerprint() -> None:
    """A state of the first-epoch-only stream must not restore into the reseeding one."""
    reseeding = build_thresher("shuffle", 10)
    cycling = build_thresher("shuffle", 10, reseed=False)
    assert reseeding.fingerprint() != cycling.fingerprint()
    it = iter(cycling)
    next(it)
    with pytest.raises(ValueError, match="differ"):  # IncompatibleStateError is a ValueError
        iter(reseeding).set_state(it.get_state())


def test_interleaved_components_draw_anew_each_epoch() -> None:
    """Grain has no random-access interleave to compare with; thresher's interleave reads
    each component's epoch e in repeat epoch e, like every other view."""
    from tests.dataset.grain_chains import draw

    parts = [th.Dataset.range(k * 100, k * 100 + 20).random_map(draw, seed=k) for k in range(3)]
    ds = th.Dataset.interleave(parts, cycle_length=2).shuffle(seed=4).repeat(EPOCHS)
    epochs = _epochs(list(ds), 60)
    assert all(e.keys() == epochs[0].keys() for e in epochs)
    assert all(_changed(epochs[0], e) > 0.97 for e in epochs[1:])
    full = list(ds)
    assert [ds[i] for i in range(len(full))] == full
    it = iter(ds.prefetch(worker_count=2))
    try:
        assert list(it) == full
    finally:
        it.close()
    it = iter(ds)
    for _ in range(75):
        next(it)
    state = json.loads(json.dumps(it.get_state()))
    resumed = iter(ds)
    resumed.set_state(state)
    assert list(resumed) == full[75:]
