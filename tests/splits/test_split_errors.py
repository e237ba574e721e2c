"""Every bad split string raises a SplitError that quotes it and says what is wrong."""

from __future__ import annotations

import re

import pytest

from thresher.errors import ConfigError, SplitError
from thresher.splits import ReadInstruction, even_splits, resolve_split

SIZES = {"train": [25, 25, 25, 25], "test": [50]}


@pytest.mark.parametrize("spec, why", [
    ("trian", r"unknown split 'trian'; the dataset has 'train', 'test'"),
    ("train+tset[:10%]", r"unknown split 'tset'"),
    ("train[:101%]", r"101% is outside \[-100%, 100%\]"),
    ("train[-101%:]", r"outside \[-100%, 100%\]"),
    ("train[5shard]", r"shard 5 does not exist: split 'train' has 4 shards"),
    ("train[4shard]", r"shard 4 does not exist"),
    ("train[:5shard]", r"shard 5 is out of range"),
    ("train[:10%", r"unbalanced brackets"),
    ("train]", r"unbalanced brackets"),
    ("train[[1:2]]", r"unbalanced brackets|malformed"),
    ("[1:2]", r"name is missing"),
    ("train[1%:2]", r"mixes units"),
    ("train[1:2%]", r"mixes units"),
    ("train[1shard:2%]", r"mixes units"),
    ("all[:10%]", r"'all' .* cannot be sliced"),
    ("train[5]", r"single index .* only allowed for shards"),
    ("train[5%]", r"single index"),
    ("train[1.5:]", r"only percents can be fractional"),
    ("train[1.5shard]", r"only percents can be fractional"),
    ("train[:]", r"empty slice"),
    ("train[1:2:3]", r"steps are not supported"),
    ("train+", r"empty part"),
    ("train++test", r"empty part"),
    ("train[abc]", r"bad slice bound 'abc'"),
    ("train[--1:]", r"bad slice bound"),
    ("train[:10%](pct2)", r"unknown rounding \(pct2\)"),
    ("train[:1000]", r"index 1000 is out of range: split 'train' has 100 examples"),
    ("train[-101:]", r"index -101 is out of range"),
    ("test[:10%](pct1_dropremainder)", r"needs a split of at least 100 examples"),
    ("train[:1.5%](pct1_dropremainder)", r"whole percents"),
    ("tr ain", r"invalid split name"),
    ("train [1:2]", r"invalid split name"),
])
def test_bad_split_strings(spec, why):
    with pytest.raises(SplitError) as e:
        resolve_split(spec, SIZES)
    msg = str(e.value)
    assert repr(spec) in msg, msg  # the message quotes the string
    assert re.search(why, msg), msg


@pytest.mark.parametrize("spec", ["", "   ", None, 3, ["train"]])
def test_not_a_split(spec):
    with pytest.raises(SplitError):
        resolve_split(spec, SIZES)


def test_all_cannot_be_a_real_split_name():
    with pytest.raises(SplitError, match="'all'"):
        resolve_split("all", {"all": 3, "train": 4})
    with pytest.raises(SplitError, match="'all'"):
        resolve_split("train", {"all": 3, "train": 4}) and resolve_split("all", {"all": 3})


@pytest.mark.parametrize("kwargs, why", [
    (dict(split_name="train", unit="pct"), "unit"),
    (dict(split_name="train", rounding="floor"), "rounding"),
    (dict(split_name="train", to=1.5), "integer"),
    (dict(split_name="train", to=2.0, unit="shard"), "integer"),
    (dict(split_name="train", to=150, unit="%"), "outside"),
    (dict(split_name="train", to=float("nan"), unit="%"), "outside"),
    (dict(split_name="train", to="10"), "number"),
    (dict(split_name="train", to=True), "number"),
    (dict(split_name="all", to=10), "cannot be sliced"),
    (dict(split_name="a/b"), "invalid split name"),
])
def test_bad_read_instructions(kwargs, why):
    with pytest.raises(SplitError, match=why):
        ReadInstruction(**kwargs)


def test_bad_even_splits():
    with pytest.raises(ConfigError):
        even_splits("train", 0)
    with pytest.raises(SplitError, match="unbalanced"):
        even_splits("train[:10", 2)
    # Sizes are checked when the sub-split is resolved.
    sub = even_splits("nope", 2)[0]
    with pytest.raises(SplitError, match="unknown split 'nope'"):
        sub.to_absolute(SIZES)


def test_split_errors_are_value_errors():
    with pytest.raises(ValueError):
        resolve_split("train[", SIZES)
