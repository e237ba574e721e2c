"""even_splits / split_for_jax_process: disjoint, equal (+-1 per part), TFDS's formula."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.splits import even_splits, resolve_split, split_for_jax_process


def records(spec, sizes):
    return [(a.split, i) for a in resolve_split(spec, sizes) for i in range(a.from_, a.to)]


@settings(max_examples=200, deadline=None)
@given(st.integers(10, 500), st.integers(0, 200), st.integers(1, 17), st.booleans(),
       st.sampled_from(["train", "train[75%:]+test", "test+train[:10]+train[-3:]", "all"]))
def test_even_splits_partition_any_expression(n_train, n_test, n, drop, spec):
    sizes = {"train": n_train, "test": n_test}
    whole = records(spec, sizes)
    parts = [records(s, sizes) for s in even_splits(spec, n, drop_remainder=drop)]
    flat = [r for p in parts for r in p]
    # Disjoint: together the sub-splits read each record of the expression at most once
    # (an expression may itself read a record twice, e.g. train[:10]+train[-3:]).
    assert not Counter(flat) - Counter(whole)
    n_parts = len(resolve_split(spec, sizes))
    lengths = [len(p) for p in parts]
    if drop:
        assert len(set(lengths)) == 1
        assert len(whole) - len(flat) <= n_parts * (n - 1)
    else:
        assert Counter(flat) == Counter(whole)
        assert max(lengths) - min(lengths) <= n_parts
        assert lengths == sorted(lengths, reverse=True)
    if n_parts == 1:
        assert max(lengths) - min(lengths) <= 1


def test_tfds_example_eleven_into_three():
    subs = even_splits("train", 3)
    assert [len(records(s, {"train": 11})) for s in subs] == [4, 4, 3]
    subs = even_splits("train", 3, drop_remainder=True)
    assert [records(s, {"train": 11}) for s in subs] == [
        [("train", i) for i in range(a, a + 3)] for a in (0, 3, 6)]


def test_nested_even_splits():
    s = {"train": 100}
    quarter = even_splits(even_splits("train", 2)[1], 2)[0]
    assert records(quarter, s) == [("train", i) for i in range(50, 75)]


def test_split_for_jax_process_with_explicit_index():
    s = {"train": 10}
    got = [records(split_for_jax_process("train", process_index=i, process_count=3), s)
           for i in range(3)]
    assert got == [records(x, s) for x in even_splits("train", 3)]


def test_split_for_jax_process_uses_jax():
    import jax

    sub = split_for_jax_process("train[:50%]", drop_remainder=True)
    assert sub.count == jax.process_count() and sub.index == jax.process_index()
    assert len(records(sub, {"train": 10})) == 5 // jax.process_count()
