"""A process worker makes its result files again once the main process dropped them
(shm.ResultArena.release): never while anything, on either side, still points into one."""

from __future__ import annotations

import gc
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.helpers import answer_of_child
from thresher.loader.pool.shm import MAX_FREE, MAX_SENT, ResultArena, pack, shared_memory_available, unpack

pytestmark = pytest.mark.skipif(not shared_memory_available(), reason="memfd_create is Linux-only")


def _send(arena: ResultArena, obj: Any, released: list[int]) -> Any:
    packed = pack(obj, arena)
    return unpack(packed.meta, packed.layout, packed.sizes, packed.fds, packed.idents, released.append)


def test_a_file_is_made_again_only_once_both_sides_dropped_it() -> None:
    arena, released = ResultArena(), []
    a = arena.empty((64, 64), np.float64)
    a[:] = 1.0
    out = _send(arena, a, released)
    del a
    gc.collect()
    assert released == [] and arena.free == 0  # the receiver still reads it
    other = arena.empty((64, 64), np.float64)
    assert arena.made == 2  # so a new file is made
    del out
    gc.collect()
    assert released == [1]  # the receiver dropped it: its ident goes back to the worker
    arena.release(released)
    b = arena.empty((64, 64), np.float64)
    assert arena.made == 2 and float(b[0, 0]) == 1.0  # the same file, as it was
    c = arena.empty((32, 64), np.float64)  # another size: a file of its own
    assert arena.made == 3 and c.shape == (32, 64)
    del b, c, other
    arena.clear()


def test_a_view_on_either_side_keeps_its_file_from_being_made_again() -> None:
    arena, released = ResultArena(), []
    a = arena.empty((64, 64), np.float64)
    a[:] = 2.0
    out = _send(arena, a, released)
    mine, theirs = a[::2], out[3:5, ::-1]
    del a, out
    gc.collect()
    assert released == []  # a view of the receiver's array keeps its mapping
    del theirs
    gc.collect()
    arena.release(released)
    assert released == [1] and arena.free == 0  # released, but a view here still points into it
    b = arena.empty((64, 64), np.float64)
    b[:] = 9.0
    assert arena.made == 2 and float(mine.min()) == float(mine.max()) == 2.0
    del mine
    gc.collect()
    assert arena.free == 1
    del b
    arena.clear()


def test_a_file_sent_twice_comes_back_free_after_both_are_released() -> None:
    arena, released = ResultArena(), []
    a = arena.empty((64, 64), np.float64)
    first, second = _send(arena, [a, a.view()], released)  # two buffers on one file: mapped twice
    del a
    del first
    gc.collect()
    arena.release(released)
    assert released == [1] and arena.free == 0
    del second
    gc.collect()
    arena.release(released[1:])
    assert released == [1, 1] and arena.free == 1
    arena.clear()


def test_past_max_sent_the_oldest_sent_file_is_closed_not_made_again() -> None:
    arena, released = ResultArena(), []
    outs = []
    for i in range(MAX_SENT + 3):
        a = arena.empty((1024,), np.float64)
        a[:] = i
        outs.append(_send(arena, a, released))
        del a
    gc.collect()
    del outs
    gc.collect()
    arena.release(released)  # the first three are forgotten: their releases are ignored
    assert len(released) == MAX_SENT + 3 and arena.free == MAX_FREE  # the rest are closed
    outs = [arena.empty((1024,), np.float64) for _ in range(MAX_FREE + 1)]
    assert arena.made == MAX_SENT + 3 + 1
    del outs
    arena.clear()


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX's warning: the child only exits
def test_a_file_mapped_when_this_process_forked_is_never_released() -> None:
    """A forked child shares the mapping: writing the file again would change what it reads."""
    arena, released = ResultArena(), []
    a = arena.empty((64, 64), np.float64)
    before_fork = _send(arena, a, released)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    after_fork = _send(arena, arena.empty((32, 64), np.float64), released)
    del a, before_fork, after_fork
    gc.collect()
    assert released == [2]  # only the file mapped after the fork
    arena.clear()


_SIZES = [(32, 32), (64, 32)]


@settings(max_examples=60, deadline=None)
@given(program=st.lists(st.tuples(st.sampled_from(["make", "drop", "release"]), st.integers(0, 1 << 16)),
                        min_size=1, max_size=40))
def test_no_array_or_view_ever_sees_its_memory_written_by_a_later_result(program: list[tuple[str, int]]) -> None:
    """A random run of makes (an array filled with its own number, sent; the sender's array, the
    receiver's and views of either kept or not), drops and releases: everything alive keeps its
    number, and files are made again."""
    arena, released = ResultArena(), []
    alive: list[tuple[np.ndarray, float]] = []
    made = 0
    for op, n in program:
        if op == "make":
            made += 1
            a = arena.empty(_SIZES[n % 2], np.float64)
            a[...] = made
            out = _send(arena, a, released)
            choices = [a, out, a[1:, ::2], out[::3]]
            alive.extend((x, float(made)) for k, x in enumerate(choices) if n >> (1 + k) & 1)
            del a, out, choices
        elif op == "drop" and alive:
            del alive[n % len(alive)]
        elif op == "release":
            arena.release(released)
            released.clear()
        gc.collect()
        for x, value in alive:
            assert float(x.min()) == float(x.max()) == value
    assert arena.made <= made
    alive.clear()
    gc.collect()
    arena.release(released)
    arena.clear()


def _inode(a: np.ndarray) -> int | None:
    """The result file an array of this process is on (None: not on one)."""
    address = a.__array_interface__["data"][0]
    with open("/proc/self/maps") as f:
        for line in f:
            if "thresher-result" in line:
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                if lo <= address < hi:
                    return int(line.split()[4])
    return None


def _image(x: int) -> dict[str, Any]:
    return {"image": np.full((16, 16, 4), x % 251, dtype=np.uint8), "label": np.int64(x)}


def _loader(workers: int) -> th.DataLoader:
    return th.DataLoader(list(range(1600)), th.IndexSampler(1600, shuffle=True, seed=5, num_epochs=1),
                         [_image, th.Batch(8)], worker_count=workers, chunk_size=8)


def test_kept_batches_and_views_from_process_workers_never_change_while_files_are_made_again() -> None:
    expected = [b["image"].copy() for b in _loader(0)]
    kept: list[tuple[int, np.ndarray]] = []
    files = []
    with iter(_loader(2)) as it:
        for i, b in enumerate(it):
            files.append(_inode(b["image"]))
            if i % 7 == 0:
                kept.append((i, b["image"]))
            elif i % 11 == 0:
                kept.append((i, b["image"][2:5, ::2]))
    assert len(files) == len(expected) == 200 and None not in files
    assert len(set(files)) < 60  # most batches came in a file made again (200 without recycling)
    for i, x in kept:
        want = expected[i] if x.shape == expected[i].shape else expected[i][2:5, ::2]
        assert np.array_equal(x, want), i


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX's warning: the child does almost nothing
def test_a_batch_held_when_the_training_process_forks_is_never_written_again() -> None:
    """The user forks (a data-logging child, a fork-started helper) while holding a batch and
    drops it in the parent: the child's view of it must not change as the workers go on."""
    expected = [b["image"].copy() for b in _loader(0)]
    go_read, go_write = os.pipe()
    answer_read, answer_write = os.pipe()
    with iter(_loader(2)) as it:
        first = next(it)["image"]
        pid = os.fork()
        if pid == 0:  # waits until the parent has gone on, then checks the batch it inherited
            os.close(go_write)
            os.close(answer_read)
            os.read(go_read, 1)
            os.write(answer_write, b"1" if np.array_equal(first, expected[0]) else b"0")
            os._exit(0)
        os.close(go_read)
        os.close(answer_write)
        del first
        gc.collect()
        rest = [b["image"][0, 0, 0, 0] for b in it]  # every file the workers have is made again meanwhile
    assert len(rest) == 199
    os.write(go_write, b"1")
    os.close(go_write)
    answer = answer_of_child(pid, answer_read)
    assert answer == b"1", answer


def test_arrays_jax_and_torch_made_without_a_copy_keep_their_batch_from_being_written_again() -> None:
    """``torch.from_numpy`` never copies and JAX on CPU may not: both keep the NumPy array, so
    the memory under them is never handed back to a worker while they live."""
    import jax.numpy as jnp
    import torch

    expected = [b["image"].copy() for b in _loader(0)]
    kept: list[tuple[int, Any]] = []
    with iter(_loader(2)) as it:
        for i, b in enumerate(it):
            if i % 9 == 0:
                kept.append((i, torch.from_numpy(b["image"])))
            elif i % 13 == 0:
                kept.append((i, jnp.asarray(b["image"])))
    assert len(kept) == 37
    for i, x in kept:
        assert np.array_equal(np.asarray(x), expected[i]), i
