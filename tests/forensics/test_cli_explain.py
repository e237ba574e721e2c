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


CONSOLE_SCRIPT = '''\
import re
import sys
from thresher.cli import main
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(main())
'''


def test_console_script_imports_a_pipeline_beside_the_user(tmp_path: Path) -> None:
    # What pip writes as bin/thresher: sys.path[0] is the bin folder, not the current directory.
    import os
    import subprocess

    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir()
    work.mkdir()
    (bin_dir / "thresher").write_text(CONSOLE_SCRIPT)
    (work / "my_cwd_pipeline.py").write_text(PIPELINE)
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=root)
    proc = subprocess.run([sys.executable, "-P", str(bin_dir / "thresher"), "explain", "--pipeline",
                           "my_cwd_pipeline:loader", "--step", "1", "--json"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["elements"]) == 4
