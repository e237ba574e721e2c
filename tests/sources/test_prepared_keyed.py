"""prepare(keyed=True): the bytes are a function of the keys, never of the input order."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from thresher import features as F

_keys = st.one_of(st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=30, unique=True),
                  st.lists(st.text(max_size=6), max_size=30, unique=True),
                  st.lists(st.binary(max_size=6), max_size=30, unique=True))


def _files(path: str) -> dict[str, bytes]:
    return {n: open(os.path.join(path, n), "rb").read() for n in sorted(os.listdir(path))}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=_keys, shuffle=st.booleans(), shards=st.sampled_from([None, 1, 2, 5]), data=st.data())
def test_keyed_prepare_ignores_input_order(tmp_path_factory, keys, shuffle, shards, data) -> None:
    tmp = str(tmp_path_factory.mktemp("keyed"))
    pairs = [(k, {"i": i}) for i, k in enumerate(keys)]
    other = data.draw(st.permutations(pairs))
    opts = dict(features={"i": F.Scalar("int64")}, keyed=True, shuffle=shuffle, num_shards=shards,
                progress=False, name="k")
    th.prepare(os.path.join(tmp, "a"), {"train": pairs}, **opts)
    th.prepare(os.path.join(tmp, "b"), {"train": other}, **opts)
    assert _files(os.path.join(tmp, "a")) == _files(os.path.join(tmp, "b"))
    stored = [keys[int(e["i"])] for e in th.data_source(os.path.join(tmp, "a"), split="train")]
    assert sorted(stored, key=repr) == sorted(keys, key=repr)
    if not shuffle:
        assert stored == sorted(keys)
