"""thresher.trace: Chrome trace JSON with events from the main process and every worker, on
one clock; plot_timeline draws it; with no trace open nothing is collected or written."""

from __future__ import annotations

import json
import os
import threading
from collections import defaultdict
from typing import Any

import pytest

import thresher as th
from tests.loader import worker_helpers as wh
from thresher.loader.profiling import tracing
from thresher.loader.chunk import READ, SAMPLE
from thresher.loader.profiling.stats import BATCH, NEXT, OUTSIDE, PACK, TRANSFER, WAIT_WORKERS

WORKERS = 3


def _complete(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


def _assert_sequential(events: list[dict[str, Any]], where: str) -> None:
    """Events of one thread that must not overlap: each starts after the previous ended."""
    events = sorted(events, key=lambda e: e["ts"])
    for a, b in zip(events, events[1:]):
        assert a["ts"] + a["dur"] <= b["ts"] + 1e-3, f"{where}: {a} overlaps {b}"
    assert all(e["dur"] >= 0 for e in events)


@pytest.fixture(scope="module")
def worker_trace(records_path: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    path = str(tmp_path_factory.mktemp("trace") / "trace.json")
    loader = wh.build(records_path, random_map=True, batch=8, batch_op=True, workers=WORKERS, chunk_size=16)
    with th.trace(path):
        with iter(loader) as it:
            for _ in it:
                pass
    with open(path) as f:
        return json.load(f), path


def test_events_from_the_main_process_and_every_worker(worker_trace: tuple[dict[str, Any], str]) -> None:
    doc, _ = worker_trace
    events = _complete(doc)
    main = os.getpid()
    by_pid: dict[int, set[str]] = defaultdict(set)
    for e in events:
        assert isinstance(e["ts"], float) and isinstance(e["dur"], float) and e["cat"] == "thresher"
        by_pid[e["pid"]].add(e["name"])
    workers = set(by_pid) - {main}
    assert main in by_pid and len(workers) == WORKERS
    assert {NEXT, OUTSIDE, WAIT_WORKERS, TRANSFER, "Map(label_sum)"} <= by_pid[main]
    for pid in workers:
        assert by_pid[pid] == {SAMPLE, READ, "Map(decode)", "RandomMap(flip)", BATCH, PACK}, pid
    named = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert named[main] == f"thresher main (pid {main})"
    assert sorted(named[pid].split(" (")[0] for pid in workers) == [f"thresher worker {w}" for w in range(WORKERS)]


def test_each_worker_and_the_training_loop_are_sequential(worker_trace: tuple[dict[str, Any], str]) -> None:
    doc, _ = worker_trace
    events = _complete(doc)
    main = os.getpid()
    for pid in {e["pid"] for e in events} - {main}:
        _assert_sequential([e for e in events if e["pid"] == pid], f"worker pid {pid}")
    loop = [e for e in events if e["pid"] == main and e["name"] in (NEXT, OUTSIDE)]
    _assert_sequential(loop, "the training loop")
    nexts = [e for e in loop if e["name"] == NEXT]
    inner = [e for e in events if e["pid"] == main and e["name"] not in (NEXT, OUTSIDE)]
    for e in inner:  # every main-process stage runs inside a next() call
        assert any(n["ts"] - 1e-3 <= e["ts"] and e["ts"] + e["dur"] <= n["ts"] + n["dur"] + 1e-3
                   for n in nexts), e


def test_worker_and_main_clocks_agree(worker_trace: tuple[dict[str, Any], str]) -> None:
    """A chunk is packed in its worker before the main process finishes receiving it."""
    doc, _ = worker_trace
    events = _complete(doc)
    main = os.getpid()
    packs = sorted((e for e in events if e["name"] == PACK), key=lambda e: e["args"]["chunk"])
    transfers = sorted((e for e in events if e["pid"] == main and e["name"] == TRANSFER), key=lambda e: e["ts"])
    assert len(packs) == len(transfers) > WORKERS
    for pack, transfer in zip(packs, transfers):
        assert pack["ts"] + pack["dur"] <= transfer["ts"] + transfer["dur"], (pack, transfer)
    other = doc["otherData"]
    assert all(other["start_us"] <= e["ts"] and e["ts"] + e["dur"] <= other["end_us"] for e in events)


def test_plot_timeline_writes_a_png(worker_trace: tuple[dict[str, Any], str], tmp_path: Any) -> None:
    _, path = worker_trace
    out = th.plot_timeline(path, tmp_path / "timeline.png")
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(out) > 1000


def test_in_process_stages_nest_inside_next_and_threads_are_named(tmp_path: Any) -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 100), th.IndexSampler(100),
                           [lambda x: x * 2, th.Batch(10)], chunk_size=20)
    got: list[Any] = []
    with th.trace() as tracer:
        thread = threading.Thread(target=lambda: got.extend(loader), name="consumer")
        thread.start()
        thread.join()
    assert len(got) == 10
    doc = tracer.to_json()
    events = _complete(doc)
    assert {e["pid"] for e in events} == {os.getpid()}
    tids = {e["tid"] for e in events}
    assert tids == {thread.native_id}
    assert {"thread_name"} <= {e["name"] for e in doc["traceEvents"] if e["ph"] == "M"}
    reads = [e for e in events if e["name"] == READ]
    assert 1 <= len(reads) <= 5  # one per call of the chunk processor (cheap chunks coalesce), never per record
    th.plot_timeline(tracer, tmp_path / "t.png")


def test_tracing_off_collects_nothing_and_writes_nothing(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 100), th.IndexSampler(100), [th.Batch(10)])
    with th.trace(tmp_path / "t.json") as tracer:
        list(loader)
    kept = len(tracer.events)
    assert kept > 0
    monkeypatch.chdir(tmp_path)
    before = set(os.listdir(tmp_path))
    assert tracing.active_tracer() is None
    with iter(loader) as it:
        list(it)
        assert it._stats.tracer is None
    assert len(tracer.events) == kept
    assert set(os.listdir(tmp_path)) == before


def test_nested_traces_go_to_the_innermost_and_a_failing_block_still_writes(tmp_path: Any) -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 40), th.IndexSampler(40), [th.Batch(10)])
    with pytest.raises(RuntimeError):
        with th.trace(tmp_path / "outer.json") as outer:
            with th.trace() as inner:
                list(loader)
            raise RuntimeError("the training loop failed")
    assert inner.events and not outer.events
    with open(tmp_path / "outer.json") as f:
        assert json.load(f)["traceEvents"]


def test_max_events_counts_what_it_drops() -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 100), th.IndexSampler(100), [th.Batch(10)])
    with th.trace(max_events=5) as tracer:
        list(loader)
    assert len(tracer.events) == 5 and tracer.dropped > 0
    assert tracer.to_json()["otherData"]["dropped_events"] == tracer.dropped
