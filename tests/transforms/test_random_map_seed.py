"""A RandomMapTransform with its own seed keeps its draws when other operations come and go."""

from __future__ import annotations

import numpy as np

import thresher as th


def draw(x: int, rng: np.random.Generator) -> tuple[int, int]:
    return x, int(rng.integers(2**31))


def _run(ops: list) -> list:
    return list(th.DataLoader(th.sources.RangeDataSource(0, 20), th.IndexSampler(20, shuffle=True, seed=3), ops))


def test_seeded_random_map_ignores_its_index() -> None:
    seeded = th.RandomMapTransform(draw, seed=11)
    assert _run([seeded]) == _run([abs, abs, seeded])
    assert _run([th.RandomMapTransform(draw)]) != _run([abs, th.RandomMapTransform(draw)])  # by index
    assert _run([seeded]) != _run([th.RandomMapTransform(draw, seed=12)])


def test_the_seed_is_part_of_the_fingerprint() -> None:
    def loader(seed: int) -> th.DataLoader:
        return th.DataLoader(th.sources.RangeDataSource(0, 20), th.IndexSampler(20),
                             [th.RandomMapTransform(draw, seed=seed)])

    it = iter(loader(1))
    next(it)
    state = it.get_state()
    assert state["operations"] == ["RandomMap(draw, seed=1)"]
    try:
        iter(loader(2)).set_state(state)
    except th.errors.IncompatibleStateError as e:
        assert "seed=1" in str(e)
    else:
        raise AssertionError("a state of another seed was accepted")


def test_process_reads_any_positions() -> None:
    from thresher.loader.chunk import ChunkProcessor
    from thresher.transforms import plan_operations

    proc = ChunkProcessor(th.sources.RangeDataSource(0, 10), th.IndexSampler(10, shuffle=True, seed=1, num_epochs=3),
                          plan_operations([lambda x: x * 2]))
    whole = proc(0, 30).elements
    picks = np.array([29, 3, 17, 3])
    assert proc.process(picks).elements == [whole[i] for i in picks.tolist()]
