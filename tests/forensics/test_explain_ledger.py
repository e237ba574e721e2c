"""``explain(..., ledger=DIR)``: the provenance of a step whose records depend on the data (a Filter),
read from the positions the run's ledger recorded, across restarts and worker counts."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from thresher.cli import main
from thresher.errors import ConfigError, IncompatibleStateError
from thresher.loader.ledger import ledger_path

N = 60


def keep(x: int) -> bool:
    """The filter: records whose key is a multiple of 3 are dropped."""
    return x % 3 != 0


def build(ledger: str, seed: int, P: int = 1, i: int = 0, workers: int = 0, batch: int = 4,
          keep_fn=keep, mode: str = "process") -> th.DataLoader:  # type: ignore[no-untyped-def]
    sampler = th.IndexSampler(N, shuffle=True, seed=seed, num_epochs=2, shard_options=th.ShardOptions(i, P))
    return th.DataLoader(th.sources.RangeDataSource(0, N), sampler, [th.FilterTransform(keep_fn), th.Batch(batch)],
                         worker_count=workers, worker_mode=mode, ledger=ledger)


def check_step(p: th.StepProvenance, delivered: list[int]) -> None:
    """The step's elements are exactly its consumed records that pass the filter, in order."""
    assert [k for k in p.record_keys.tolist() if keep(k)] == delivered
    assert p.delivered == len(delivered)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), P=st.integers(1, 3), workers=st.sampled_from([0, 0, 2]),
       mode=st.sampled_from(["process", "thread"]), stop=st.integers(0, 12), data=st.data())
def test_explain_from_the_ledger_equals_what_was_delivered(seed: int, P: int, workers: int, mode: str,
                                                           stop: int, data: st.DataObject) -> None:
    d = tempfile.mkdtemp()
    delivered: list[list[list[int]]] = []
    for i in range(P):
        # a run that is preempted after `stop` steps, loses the batches after its checkpoint, and resumes
        it = iter(build(d, seed, P, i, workers, mode=mode))
        got = []
        for _ in range(stop):
            try:
                got.append(next(it).tolist())
            except StopIteration:
                break
        state = it.get_state()
        for _ in range(data.draw(st.integers(0, 3), label="lost")):  # delivered after the checkpoint: lost
            try:
                next(it)
            except StopIteration:
                break
        it.close()
        again = iter(build(d, seed, P, i, data.draw(st.sampled_from([0, 2]), label="workers after")))
        again.set_state(state)
        got += [b.tolist() for b in again]
        delivered.append(got)
    loader = build(d, seed, P)
    for i in range(P):
        for t, batch in enumerate(delivered[i]):
            check_step(th.explain(loader, t, i, ledger=d), batch)
    steps = min(len(x) for x in delivered)
    if steps:
        everyone = th.explain(loader, steps - 1, ledger=d)
        assert sorted(set(everyone.process_indices.tolist())) == list(range(P))
        assert everyone.delivered == sum(len(x[steps - 1]) for x in delivered)


def test_without_a_ledger_a_filtered_pipeline_is_refused_and_past_steps_are_named() -> None:
    d = tempfile.mkdtemp()
    loader = build(d, 1)
    batches = [b.tolist() for b in loader]
    with pytest.raises(ConfigError, match="cannot be computed from the step number"):
        th.explain(loader, 0)
    with pytest.raises(ConfigError, match=f"records {len(batches)} steps of process 0"):
        th.explain(loader, len(batches), ledger=d)
    with pytest.raises(ConfigError, match="does not exist"):
        th.explain(loader, 0, ledger=tempfile.mkdtemp())


def test_a_ledger_of_another_stream_is_refused() -> None:
    d = tempfile.mkdtemp()
    list(build(d, 1))
    with pytest.raises(IncompatibleStateError, match="another global stream"):
        th.explain(build(tempfile.mkdtemp(), 2), 0, ledger=d)


def test_a_ledger_begun_mid_run_is_refused() -> None:
    d = tempfile.mkdtemp()
    it = iter(build(tempfile.mkdtemp(), 1))
    next(it)
    it.ledger(d)
    list(it)
    with pytest.raises(ConfigError, match="after the run's start"):
        th.explain(build(d, 1), 0, ledger=d)


def test_a_torn_last_line_is_ignored() -> None:
    d = tempfile.mkdtemp()
    loader = build(d, 4)
    batches = [b.tolist() for b in loader]
    with open(ledger_path(d, 0), "a") as f:
        f.write('{"k":"s","t":99,"a":0,"e":4,"n":4')  # a kill in the middle of a write
    check_step(th.explain(loader, len(batches) - 1, ledger=d), batches[-1])


PIPELINE = '''
import thresher as th

def loader():
    return th.DataLoader(th.sources.RangeDataSource(0, 30), th.IndexSampler(30, shuffle=True, seed=5),
                         [th.FilterTransform(lambda x: x % 2 == 0), th.Batch(3)], ledger=LEDGER)
'''


def test_cli_explains_a_filtered_step_from_the_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    ledger = tmp_path / "ledger"
    (tmp_path / "explain_ledger_pipe.py").write_text(PIPELINE.replace("LEDGER", repr(str(ledger))))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("explain_ledger_pipe", None)
    from explain_ledger_pipe import loader  # type: ignore[import-not-found]

    batches = [b.tolist() for b in loader()]
    assert main(["explain", "--pipeline", "explain_ledger_pipe:loader", "--step", "2",
                 "--ledger", str(ledger), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    keys = [e["record_key"] for e in out["elements"]]
    assert [k for k in keys if k % 2 == 0] == batches[2] and out["delivered"] == len(batches[2])
    assert main(["explain", "--pipeline", "explain_ledger_pipe:loader", "--step", "2",
                 "--ledger", str(ledger)]) == 0
    assert "positions consumed, 3 delivered" in capsys.readouterr().out
    assert main(["explain", "--pipeline", "explain_ledger_pipe:loader", "--step", "0"]) == 2
    assert "--ledger DIR" in capsys.readouterr().err  # without the ledger: the error names the way out
