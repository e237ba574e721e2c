"""``explain(ds, step, ledger=DIR)`` for packed Datasets: the segments it names, re-read, given their
random maps' draws from the explained seeds and cut as it says, rebuild every delivered row bit for bit
(tokens, segment ids, positions), across shuffles, epochs, filters, truncation, several processes,
preemptions and resumes with other worker counts."""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from thresher.cli import main
from thresher.errors import ConfigError, IncompatibleStateError, InvalidStateError
from thresher.loader.ledger import encode_ints, encode_line, ledger_path
from thresher.randomness.record_rng import RecordRng


def record(key: int, n: int) -> np.ndarray:
    """Record ``key``: ``n`` tokens that name it (key * 1000 + 1, + 2, ...)."""
    return np.arange(1, n + 1, dtype=np.int64) + key * 1000


def jitter(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random map: every token of the record + the same draw in [0, 5)."""
    return x + int(rng.integers(0, 5))


class Keep:
    def __init__(self, dropped: frozenset[int]) -> None:
        self.dropped = dropped

    def __call__(self, x: np.ndarray) -> bool:
        return int(x[0]) // 1000 not in self.dropped if x.size else True


@dataclass(frozen=True)
class Packed:
    lengths: tuple[int, ...]
    seed: int
    shuffle: bool
    epochs: int
    dropped: frozenset[int]
    seq_len: int
    window: int
    truncate: bool
    batch: int | None
    drop_remainder: bool
    shards: int
    random: bool

    def records(self) -> list[np.ndarray]:
        return [record(k, n if self.truncate else min(n, self.seq_len)) for k, n in enumerate(self.lengths)]

    def dataset(self, i: int = 0, workers: int = 0) -> th.Dataset:
        ds = th.Dataset.source(self.records())
        if self.shuffle:
            ds = ds.shuffle(self.seed)
        if self.epochs > 1:
            ds = ds.repeat(self.epochs)
        if self.random:
            ds = ds.random_map(jitter, seed=self.seed)
        ds = ds.filter(Keep(self.dropped)).pack(self.seq_len, window=self.window, truncate=self.truncate)
        if self.batch is not None:
            ds = ds.batch(self.batch, drop_remainder=self.drop_remainder)
        if self.shards > 1:
            ds = ds.shard(th.ShardOptions(i, self.shards))
        return ds.prefetch(workers) if workers else ds


packs = st.builds(Packed, lengths=st.lists(st.integers(0, 12), min_size=1, max_size=40).map(tuple),
                  seed=st.integers(0, 2**32), shuffle=st.booleans(), epochs=st.integers(1, 2),
                  dropped=st.frozensets(st.integers(0, 39), max_size=8), seq_len=st.integers(4, 10),
                  window=st.integers(1, 9), truncate=st.booleans(), batch=st.sampled_from([None, 1, 2, 3]),
                  drop_remainder=st.booleans(), shards=st.integers(1, 2), random=st.booleans())


def rebuild(spec: Packed, p: th.StepProvenance, process: int) -> dict[str, np.ndarray]:
    """The rows of ``process`` at this step, made from the records ``p`` names, cut as it says."""
    seg = p.segments
    assert seg is not None and seg.seq_len == spec.seq_len
    mine = p.process_indices == process
    rows = int(seg.rows[mine].max()) + 1 if mine.any() else 0
    out = {k: np.zeros((rows, spec.seq_len), dtype=np.int64) for k in ("tokens", "segment_ids", "positions")}
    records = spec.records()
    for key, seed, row, sid, start, n, full in zip(p.record_keys[mine], p.rng_seeds[mine], seg.rows[mine],
                                                   seg.segment_ids[mine], seg.starts[mine], seg.lengths[mine],
                                                   seg.record_lengths[mine], strict=True):
        rec = records[key]
        for _, salt in p.random_maps:  # the generator the random map received, from the explained seed
            rec = jitter(rec, RecordRng().seeded(int(seed), salt))
        assert full == len(rec) and n == min(len(rec), spec.seq_len)
        out["tokens"][row, start:start + n] = rec[:n]
        out["segment_ids"][row, start:start + n] = sid
        out["positions"][row, start:start + n] = np.arange(n)
    return out


def run(spec: Packed, d: str, i: int, stop: int, lost: int, workers: tuple[int, int],
        ledger_first: bool = True) -> list[dict[str, Any]]:
    """Process i: ``stop`` steps, a checkpoint, ``lost`` steps that a preemption loses, then a resume to the end
    (its ledger turned on before or after ``set_state``)."""
    it = iter(spec.dataset(i, workers[0]))
    it.ledger(d)
    got = [next(it) for _ in range(stop)]
    state = json.loads(json.dumps(it.get_state()))
    for _ in range(lost):
        next(it, None)
    it.close()
    again = iter(spec.dataset(i, workers[1]))
    if ledger_first:
        again.ledger(d)
    again.set_state(state)
    again.ledger(d)
    return got + list(again)


@settings(max_examples=30, deadline=None, report_multiple_bugs=False)
@given(packs, st.data())
def test_explained_segments_rebuild_every_delivered_step(spec: Packed, data: st.DataObject) -> None:
    d = tempfile.mkdtemp()
    full = [list(spec.dataset(i)) for i in range(spec.shards)]
    delivered = []
    for i in range(spec.shards):
        stop = data.draw(st.integers(0, len(full[i])), label=f"stop{i}")
        lost = data.draw(st.integers(0, 3), label=f"lost{i}")
        workers = data.draw(st.sampled_from([(0, 0), (0, 2), (2, 0)]), label=f"workers{i}")
        delivered.append(run(spec, d, i, stop, lost, workers, data.draw(st.booleans(), label=f"first{i}")))
        assert len(delivered[i]) == len(full[i])  # the resume is exact
    ds = spec.dataset()
    for i in range(spec.shards):
        for t, batch in enumerate(delivered[i]):
            p = th.explain(ds, t, process_index=i, ledger=d)
            made = rebuild(spec, p, i)
            for k, rows in made.items():
                assert np.array_equal(np.atleast_2d(batch[k]), rows), (t, k)
            assert p.global_positions.tolist() == p.positions.tolist()
            assert [k not in spec.dropped for k in p.record_keys.tolist()] == [True] * len(p)
    assert th.audit(d).ok


def test_a_packed_step_names_epoch_file_and_seed_of_each_record(tmp_path: Path) -> None:
    paths = []
    for part in range(2):
        path = str(tmp_path / f"part-{part}.array_record")
        th.sources.write_array_record(path, [np.arange(n, dtype=np.int64).tobytes() for n in (3, 5, 2, 7, 4)])
        paths.append(path)
    source = th.sources.ArrayRecordSource(str(tmp_path / "part-*.array_record"))
    ds = (th.Dataset.source(source).shuffle(3).repeat(2).map(lambda b: np.frombuffer(b, dtype=np.int64))
          .random_map(lambda x, rng: x + int(rng.integers(0, 2)), seed=5).pack(8, window=4).batch(2))
    it = iter(ds)
    it.ledger(tmp_path / "ledger")
    batches = list(it)
    last = th.explain(ds, len(batches) - 1, ledger=tmp_path / "ledger")
    assert set(last.epochs.tolist()) <= {1} and last.locations is not None
    assert {f for f, _ in last.locations} <= set(paths)
    assert [name for name, _ in last.random_maps] and len(set(last.rng_seeds.tolist())) == len(last)
    text = str(last)
    assert "packed rows" in text and "record_length" in text
    assert last.to_json()["elements"][0].keys() >= {"row", "segment_id", "start", "length", "record_key", "file"}


def test_without_a_ledger_or_past_the_end_a_packed_step_is_refused(tmp_path: Path) -> None:
    ds = th.Dataset.source([record(k, 3) for k in range(6)]).pack(4).batch(2)
    with pytest.raises(ConfigError, match="depend on the lengths"):
        th.explain(ds, 0)
    it = iter(ds)
    it.ledger(tmp_path)
    n = len(list(it))
    with pytest.raises(ConfigError, match=f"records {n} steps of process 0"):
        th.explain(ds, n, ledger=tmp_path)
    loader = th.DataLoader(th.sources.RangeDataSource(0, 8), th.IndexSampler(8),
                           [th.FilterTransform(lambda x: x > 2), th.Batch(2)], ledger=tmp_path / "other")
    list(loader)
    with pytest.raises(IncompatibleStateError, match=r"process-0\.ledger, line 1 was written by another global"):
        th.explain(ds, 0, ledger=tmp_path / "other")


@pytest.mark.parametrize("line", [
    {"k": "pw", "w": 0, "a": 0, "o": [0, 2**40], "n": "1:Aw==", "r": "1:AA=="},    # more offsets than lengths
    {"k": "pw", "w": 0, "a": 0, "o": [0, 1], "n": encode_ints(np.array([2**62 + 1])), "r": "1:AA=="},  # past 2**62
    {"k": "pw", "w": 0, "a": 0, "o": [0, 1], "n": [3], "r": "1:AA=="},     # lengths not encoded
    {"k": "pw", "w": 0, "a": 0, "o": [0, 1], "n": "3:Aw==", "r": "1:AA=="},        # no such width
    {"k": "pk", "p": [0, 3, 1]},                                          # end row before first row
    {"k": "pk", "p": [True, 0, 1]},                                       # not an int
])
def test_a_corrupt_packed_line_names_file_and_line(tmp_path: Path, line: dict[str, Any]) -> None:
    ds = th.Dataset.source([record(k, 3) for k in range(6)]).pack(4).batch(2)
    it = iter(ds)
    it.ledger(tmp_path)
    list(it)
    path = ledger_path(str(tmp_path), 0)
    with open(path, "ab") as f:
        f.write(encode_line(line))
    n = sum(1 for _ in open(path))
    with pytest.raises(InvalidStateError, match=rf"process-0\.ledger, line {n}"):
        th.explain(ds, 0, ledger=tmp_path)


def test_garbage_in_the_middle_of_a_ledger_names_its_line(tmp_path: Path) -> None:
    ds = th.Dataset.source([record(k, 3) for k in range(6)]).pack(4)
    it = iter(ds)
    it.ledger(tmp_path)
    list(it)
    path = ledger_path(str(tmp_path), 0)
    lines = open(path).read().splitlines(keepends=True)
    lines.insert(2, "not a ledger line\n")
    open(path, "w").write("".join(lines))
    with pytest.raises(InvalidStateError, match=r"line 3: not a ledger line"):
        th.explain(ds, 0, ledger=tmp_path)


PIPELINE = '''
import numpy as np
import thresher as th

def packed():
    docs = [np.arange(1, n + 1) for n in (5, 2, 7, 3, 1, 4, 6)]
    return th.Dataset.source(docs).shuffle(1).pack(8, window=4).batch(2)
'''


def test_cli_explains_a_packed_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "explain_packed_pipe.py").write_text(PIPELINE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("explain_packed_pipe", None)
    from explain_packed_pipe import packed  # type: ignore[import-not-found]

    it = iter(packed())
    it.ledger(tmp_path / "ledger")
    batches = list(it)
    assert main(["explain", "--pipeline", "explain_packed_pipe:packed", "--step", "1",
                 "--ledger", str(tmp_path / "ledger"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    tokens = np.zeros_like(batches[1]["tokens"])
    for e in out["elements"]:
        tokens[e["row"], e["start"]:e["start"] + e["length"]] = np.arange(1, e["length"] + 1)
    assert np.array_equal(tokens, batches[1]["tokens"])
