"""Split strings resolve exactly as TFDS resolves them (hypothesis against an oracle)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.errors import SplitError
from thresher.splits import AbstractSplit, ReadInstruction, even_splits, resolve_split


def records(spec, sizes):
    """The (split, index) pairs a split reads, in order."""
    return [(a.split, i) for a in resolve_split(spec, sizes) for i in range(a.from_, a.to)]


def oracle_part(name, lo, hi, unit, rounding, lengths):
    """TFDS's rules written as Python slicing of the list of records (independent of thresher)."""
    n = sum(lengths)
    items = [(name, i) for i in range(n)]

    def conv(b):
        if unit == "%":
            if rounding == "closest":
                return int(round(b * n / 100.0))
            if n < 100 or b * (n // 100) != int(b * (n // 100)):
                raise SplitError("pct1 needs 100 records and whole percents")
            return int(b * (n // 100))
        if unit == "shard":
            if abs(b) > len(lengths):
                raise SplitError("shard")
            return sum(lengths[:b])
        if abs(b) > n:
            raise SplitError("abs")
        return b

    lo_i = None if lo is None else conv(lo)
    hi_i = None if hi is None else conv(hi)
    return items[lo_i:hi_i]


def fmt(name, lo, hi, unit, rounding):
    u = {"abs": "", "%": "%", "shard": "shard"}[unit]
    text = name
    if lo is not None or hi is not None:
        text += "[" + ("" if lo is None else f"{lo}{u}") + ":" + ("" if hi is None else f"{hi}{u}") + "]"
    if rounding != "closest":
        text += f"({rounding})"
    return text


@st.composite
def split_parts(draw, sizes):
    name = draw(st.sampled_from(sorted(sizes)))
    lengths = sizes[name]
    n = sum(lengths)
    unit = draw(st.sampled_from(["abs", "%", "shard"]))
    rounding = draw(st.sampled_from(["closest", "pct1_dropremainder"])) if unit == "%" else "closest"
    if unit == "abs":
        bound = st.integers(-n - 2, n + 2)
    elif unit == "%":
        bound = st.integers(-100, 100) | st.integers(-1000, 1000).map(lambda x: x / 10)
    else:
        bound = st.integers(-len(lengths) - 1, len(lengths) + 1)
    lo = draw(st.none() | bound)
    hi = draw(st.none() | bound)
    if lo is None and hi is None and draw(st.booleans()):
        return (name, None, None, "abs", "closest")
    return (name, lo, hi, unit, rounding)


@st.composite
def datasets_and_specs(draw):
    sizes = {
        name: draw(st.lists(st.integers(0, 300), min_size=1, max_size=5))
        for name in draw(st.sets(st.sampled_from(["train", "test", "validation"]), min_size=1))
    }
    parts = draw(st.lists(split_parts(sizes), min_size=1, max_size=3))
    return sizes, parts


@settings(max_examples=400, deadline=None)
@given(datasets_and_specs())
def test_random_split_strings_match_the_tfds_rules(case):
    sizes, parts = case
    spec = "+".join(fmt(*p) for p in parts)
    try:
        expected = [r for p in parts for r in oracle_part(*p, sizes[p[0]])]
    except SplitError:
        with pytest.raises(SplitError, match=r"split '"):
            records(spec, sizes)
        return
    assert records(spec, sizes) == expected
    # The same split built from ReadInstructions resolves identically.
    ri = sum((ReadInstruction(n, lo, hi, u, r) for n, lo, hi, u, r in parts[1:]),
             ReadInstruction(*parts[0]))
    assert [(a.split, a.from_, a.to) for a in ri.to_absolute(sizes)] == [
        (a.split, a.from_, a.to) for a in resolve_split(spec, sizes)]
    # str() of a parsed split parses back to the same thing.
    assert records(str(AbstractSplit.from_spec(spec)), sizes) == expected


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 5000), st.integers(0, 99), st.integers(1, 50))
def test_percent_slices_tile_the_split(n, k, width):
    sizes = {"train": n}
    hi = min(100, k + width)
    whole = set(records(f"train[{k}%:{hi}%]", sizes))
    mid = (k + hi) // 2
    left = set(records(f"train[{k}%:{mid}%]", sizes))
    right = set(records(f"train[{mid}%:{hi}%]", sizes))
    assert whole == left | right and not left & right


def test_20_percent_is_10_plus_10():
    for n in [0, 1, 7, 99, 100, 101, 999, 12345]:
        s = {"train": n}
        assert set(records("train[:20%]", s)) == (
            set(records("train[:10%]", s)) | set(records("train[10%:20%]", s)))


@pytest.mark.parametrize("n", [10, 99, 100, 101, 999, 1000, 60000, 12345])
def test_ten_fold_cross_validation_strings_from_the_tfds_guide(n):
    s = {"train": n}
    every = set(records("train", s))
    vals = [records(f"train[{k}%:{k + 10}%]", s) for k in range(0, 100, 10)]
    trains = [records(f"train[:{k}%]+train[{k + 10}%:]", s) for k in range(0, 100, 10)]
    assert sorted(r for v in vals for r in v) == sorted(every)  # a partition
    for v, t in zip(vals, trains):
        assert set(v).isdisjoint(t) and set(v) | set(t) == every
    # The ReadInstruction form of the guide gives the same folds.
    for k, v in zip(range(0, 100, 10), vals):
        ri = ReadInstruction("train", from_=k, to=k + 10, unit="%")
        assert records(ri, s) == v
        t = ReadInstruction("train", to=k, unit="%") + ReadInstruction("train", from_=k + 10, unit="%")
        assert records(t, s) == trains[k // 10]


@pytest.mark.parametrize("n", [100, 101, 150, 199, 999, 60000])
def test_pct1_dropremainder_makes_every_percent_the_same_size(n):
    s = {"train": n}
    one = len(records("train[:1%](pct1_dropremainder)", s))
    assert one == n // 100
    for k in range(0, 100, 5):
        assert len(records(f"train[{k}%:{k + 5}%](pct1_dropremainder)", s)) == 5 * one
    ri = ReadInstruction("train", to=5, unit="%", rounding="pct1_dropremainder")
    assert len(records(ri, s)) == 5 * one


def test_closest_rounding_spreads_the_remainder():
    # 999 records: TFDS's example, percents of 9 or 10 records that cover everything.
    s = {"train": 999}
    sizes = [len(records(f"train[{k}%:{k + 1}%]", s)) for k in range(100)]
    assert set(sizes) == {9, 10} and sum(sizes) == 999
    assert len(records("train[:1%]", s)) == 10  # round(9.99)


def test_examples_from_the_tfds_guide():
    s = {"train": [15000, 15000, 15000, 15000], "test": [5000, 5000]}
    assert len(records("train", s)) == 60000
    assert records("train+test", s) == records("train", s) + records("test", s)
    assert records("train[10:20]", s) == [("train", i) for i in range(10, 20)]
    assert records("train[123:450]", s) == [("train", i) for i in range(123, 450)]
    assert len(records("train[:4000]", s)) == 4000
    assert len(records("train[:10%]", s)) == 6000
    assert len(records("train[:75%]", s)) == 45000
    assert records("train[25%:75%]", s) == [("train", i) for i in range(15000, 45000)]
    assert records("train[:10%]+train[-80%:]", s) == (
        [("train", i) for i in range(6000)] + [("train", i) for i in range(12000, 60000)])
    assert len(records("train[:25%]+test", s)) == 15000 + 10000
    assert len(records("test+train[:75%]", s)) == 10000 + 45000
    assert len(records("test[:50%]", s)) == 5000
    assert records("train[:4shard]", s) == records("train", s)
    assert records("train[:2shard]", s) == [("train", i) for i in range(30000)]
    assert records("train[3shard]", s) == [("train", i) for i in range(45000, 60000)]
    assert records("train[-1shard]", s) == records("train[3shard]", s)
    assert records("all", s) == records("train+test", s)
    assert len(records("train[:1.5%]", s)) == 900
    assert records("train[-10:]", s) == [("train", i) for i in range(59990, 60000)]
    # ReadInstruction API of the guide.
    assert records(ReadInstruction("train") + ReadInstruction("test"), s) == records("train+test", s)
    assert records(ReadInstruction("train", from_=10, to=20, unit="abs"), s) == records("train[10:20]", s)
    assert records(ReadInstruction("train", to=10, unit="%"), s) == records("train[:10%]", s)
    assert records(ReadInstruction("train", to=10, unit="%") + ReadInstruction("train", from_=-80, unit="%"), s) == (
        records("train[:10%]+train[-80%:]", s))
    # even_splits examples.
    thirds = even_splits("train", n=3)
    assert [len(records(x, s)) for x in thirds] == [20000] * 3
    assert [len(records(x, s)) for x in even_splits("train[:75%]", n=3)] == [15000] * 3


def test_plus_works_with_strings_on_both_sides():
    s = {"train": 10, "test": 4}
    a = ReadInstruction("train", to=3)
    assert records(a + "test", s) == records("train[:3]+test", s)
    assert records("test" + a, s) == records("test+train[:3]", s)
    assert records(even_splits("train", 2)[0] + "test", s) == records("train[:5]+test", s)


def test_unions_keep_duplicates_and_order():
    s = {"train": 5}
    assert records("train[3:]+train[:2]+train[3:]", s) == [
        ("train", 3), ("train", 4), ("train", 0), ("train", 1), ("train", 3), ("train", 4)]


def test_from_past_to_reads_nothing():
    assert records("train[7:3]", {"train": 10}) == []


@pytest.mark.parametrize("spec", ["train", " train + test ", "train[1_000:]"])
def test_whitespace_and_underscores(spec):
    records(spec, {"train": 2000, "test": 1})


def test_fractional_percent_is_a_float_in_the_instruction():
    ri = ReadInstruction.from_spec("train[:1.5%]")
    assert ri == ReadInstruction("train", to=1.5, unit="%")
    assert str(ri) == "train[:1.5%]"
    assert math.isclose(ri.to, 1.5)
