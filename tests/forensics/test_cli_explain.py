"""``thresher explain --pipeline module:function --step N [--state ...]``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import thresher as th
from thresher.cli import main

PIPELINE = '''
import thresher as th

def loader():
    return th.DataLoader(th.sources.RangeDataSource(0, 40), th.IndexSampler(40, shuffle=True, seed=9),
                         [th.Batch(4)])
'''


@pytest.fixture()
def pipeline_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "forensics_cli_pipe.py").write_text(PIPELINE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("forensics_cli_pipe", None)
    return "forensics_cli_pipe:loader"


def test_cli_prints_the_steps_records(pipeline_module: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from forensics_cli_pipe import loader  # type: ignore[import-not-found]

    it = iter(loader())
    next(it)
    it.set_state(it.get_state(), skip_steps=range(3, 5))
    state_path = tmp_path / "state.json"
    state_path.write_text(json.dumps(it.get_state()))
    batches = [b.tolist() for b in loader()]
    assert main(["explain", "--pipeline", pipeline_module, "--step", "3", "--state", str(state_path),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["skipped"] is True
    assert [e["record_key"] for e in out["elements"]] == batches[3]
    assert main(["explain", "--pipeline", pipeline_module, "--step", "2"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("step 2: 4 elements") and "skipped" not in text


def test_cli_names_a_bad_pipeline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--pipeline", "no_such_module_xyz:f", "--step", "0"]) == 2
    assert "no_such_module_xyz" in capsys.readouterr().err
    assert main(["explain", "--pipeline", "nocolon", "--step", "0"]) == 2
    assert "MODULE:FUNCTION" in capsys.readouterr().err
    assert th.explain is th.forensics.explain
