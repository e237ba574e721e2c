"""The thresher command line: info, prepare from every input kind, demo, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

import thresher as th
from thresher.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def npz_dataset(tmp_path):
    rng = np.random.default_rng(1)
    for split, n in (("train", 30), ("test", 10)):
        np.savez(tmp_path / f"{split}.npz", image=rng.integers(0, 255, (n, 6, 6), dtype=np.uint8),
                 label=np.arange(n) % 4, weight=rng.random((n, 2)).astype(np.float32))
    out = tmp_path / "ds"
    rc = main(["prepare", str(out), "--split", "train", str(tmp_path / "train.npz"),
               "--split", "test", str(tmp_path / "test.npz"), "--num-shards", "2", "--quiet"])
    assert rc == 0
    return out


def test_prepare_from_npz_and_info(npz_dataset, capsys):
    info = th.builder(npz_dataset).info
    assert info.features["image"] == th.features.Image((6, 6, 1), encoding="none")
    assert info.features["label"].num_classes == 4
    assert info.features["weight"] == th.features.Tensor((2,), "float32")
    assert main(["info", str(npz_dataset), "--verify"]) == 0
    out, err = capsys.readouterr()
    for text in ("ds 1.0.0", "train", "30 examples", "test", "10 examples", "2 shards",
                 "Image(shape=(6, 6, 1), encoding='none')", "ClassLabel(num_classes=4)", "all"):
        assert text in out, text
    assert "verified train: 30 records decode" in err
    assert main(["info", str(npz_dataset), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["format"] == "thresher.prepared" and [s["name"] for s in d["splits"]] == ["train", "test"]


def test_prepare_from_npy_files(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(20, dtype=np.int16).reshape(10, 2))
    np.save(tmp_path / "y.npy", np.arange(10) % 2)
    out = tmp_path / "npy"
    assert main(["prepare", str(out), "--split", "train", str(tmp_path / "x.npy"),
                 f"target={tmp_path / 'y.npy'}", "--class-label", "target", "--quiet",
                 "--no-shuffle"]) == 0
    src = th.data_source(out, split="train")
    assert src[3]["x"].tolist() == [6, 7] and src[3]["target"] == 1
    assert th.builder(out).info.features["target"].num_classes == 2


def test_prepare_from_an_image_folder(tmp_path):
    from PIL import Image as PILImage

    for split, n in (("train", 3), ("test", 1)):
        for c, color in (("cat", 10), ("dog", 200)):
            d = tmp_path / "imgs" / split / c
            d.mkdir(parents=True)
            for i in range(n):
                PILImage.fromarray(np.full((5, 4 + i, 3), color + i, np.uint8)).save(d / f"{i}.png")
    out = tmp_path / "folder_ds"
    assert main(["prepare", str(out), "--split", "train", str(tmp_path / "imgs" / "train"),
                 "--split", "test", str(tmp_path / "imgs" / "test"), "--quiet"]) == 0
    info = th.builder(out).info
    assert info.features["label"].names == ["cat", "dog"]
    assert info.features["image"].shape == (None, None, 3)
    src = th.data_source(out, split="train")
    seen = {}
    for k in range(len(src)):
        ex = src[k]
        seen[ex["filename"]] = (int(ex["label"]), ex["image"].shape, int(ex["image"][0, 0, 0]))
    assert seen == {f"{c}/{i}.png": (ci, (5, 4 + i, 3), color + i)
                    for ci, (c, color) in enumerate((("cat", 10), ("dog", 200))) for i in range(3)}


def test_prepare_from_csv(tmp_path):
    (tmp_path / "train.csv").write_text("length,species,name\n1.5,setosa,a\n2,virginica,b\n3.25,setosa,c\n")
    (tmp_path / "test.csv").write_text("length,species,name\n7,versicolor,d\n")
    out = tmp_path / "csv_ds"
    assert main(["prepare", str(out), "--split", "train", str(tmp_path / "train.csv"),
                 "--split", "test", str(tmp_path / "test.csv"), "--class-label", "species",
                 "--quiet", "--no-shuffle"]) == 0
    info = th.builder(out).info
    assert info.features["species"].names == ["setosa", "versicolor", "virginica"]
    assert info.features["length"] == th.features.Scalar("float64")
    assert info.features["name"] == th.features.Text()
    ex = th.data_source(out, split="train")[1]
    assert (ex["length"], int(ex["species"]), ex["name"]) == (2.0, 2, "b")


def test_prepare_from_jsonl_with_image_paths(tmp_path):
    from PIL import Image as PILImage

    PILImage.fromarray(np.zeros((3, 3), np.uint8)).save(tmp_path / "a.png")
    rows = [{"id": i, "tokens": list(range(i + 1)), "meta": {"ok": i % 2 == 0, "src": "x"},
             "pic": "a.png", "vec": [[1.0, 2.0]]} for i in range(4)]
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "jsonl_ds"
    assert main(["prepare", str(out), "--split", "train", str(tmp_path / "rows.jsonl"),
                 "--image", "pic", "--channels", "1", "--quiet", "--no-shuffle"]) == 0
    f = th.builder(out).info.features
    assert f["tokens"] == th.features.Tensor((None,), "int64")
    assert f["vec"] == th.features.Tensor((1, 2), "float64")
    assert f["meta"]["ok"] == th.features.Scalar("bool")
    assert f["pic"] == th.features.Image((None, None, 1), encoding="original")
    ex = th.data_source(out, split="train")[2]
    assert ex["tokens"].tolist() == [0, 1, 2] and ex["meta"]["ok"] and ex["pic"].shape == (3, 3, 1)


@pytest.mark.parametrize("make_args, why", [
    (lambda d: ["--split", "train", str(d / "nope.npz")], "does not exist"),
    (lambda d: ["--split", "train", str(d / "bad.txt")], "unknown kind"),
    (lambda d: ["--split", "train", str(d / "a.npz"), "--split", "train", str(d / "a.npz")], "given twice"),
    (lambda d: ["--split", "train", str(d / "a.npz"), "--split", "all", str(d / "a.npz")], "'all' cannot be"),
    (lambda d: ["--split", "train", str(d / "a.npz"), str(d / "short.npy")], "different lengths"),
    (lambda d: ["--split", "train", str(d / "ragged.jsonl")], "different keys"),
    (lambda d: ["--split", "train", str(d / "a.npz"), "--split", "test", str(d / "t.csv")], "one kind"),
])
def test_prepare_errors(tmp_path, capsys, make_args, why):
    np.savez(tmp_path / "a.npz", x=np.arange(4))
    np.save(tmp_path / "short.npy", np.arange(3))
    (tmp_path / "bad.txt").write_text("hi")
    (tmp_path / "t.csv").write_text("a\n1\n")
    (tmp_path / "ragged.jsonl").write_text('{"a": 1}\n{"b": 2}\n')
    rc = main(["prepare", str(tmp_path / "out"), "--quiet"] + make_args(tmp_path))
    assert rc == 2
    assert why in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_existing_output_needs_overwrite(npz_dataset, tmp_path, capsys):
    args = ["prepare", str(npz_dataset), "--split", "train", str(tmp_path / "test.npz"), "--quiet"]
    assert main(args) == 2 and "already exists" in capsys.readouterr().err
    assert main(args + ["--overwrite"]) == 0
    assert list(th.builder(npz_dataset).info.splits) == ["train"]


def test_info_errors(tmp_path, capsys):
    assert main(["info", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main([]) == 2
    assert main(["frobnicate"]) == 2
    assert main(["--help"]) == 0


def test_demo_is_forwarded(monkeypatch):
    calls = []
    fake = types.ModuleType("thresher.demo")
    fake.main = lambda argv: calls.append(argv) or 0
    monkeypatch.setitem(sys.modules, "thresher.demo", fake)
    assert main(["demo", "--steps", "3", "--help"]) == 0
    assert calls == [["--steps", "3", "--help"]]


def test_python_dash_m_in_a_real_process(npz_dataset):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "thresher", "info", str(npz_dataset)],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "30 examples" in out.stdout


def test_version_is_the_installed_distribution_version():
    from importlib.metadata import version

    proc = subprocess.run([sys.executable, "-m", "thresher", "--version"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"thresher {version('thresher')}" == f"thresher {th.__version__}"


def test_help_names_every_command_and_the_docs_cover_them(capsys):
    from thresher.cli import _parser

    commands = sorted(_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert main(["--help"]) == 0
    description = capsys.readouterr().out.split("positional arguments")[0]
    with open(os.path.join(REPO, "docs", "cli.md"), encoding="utf-8") as f:
        cli_md = f.read()
    for command in commands:
        assert command in description, command
        assert f"thresher {command}" in cli_md, command


def test_demo_help_names_the_command_that_ran_it():
    env = dict(os.environ, PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, "-m", "thresher.demo", "--help"], capture_output=True, text=True,
                         env=env, timeout=120).stdout
    assert out.startswith("usage: python -m thresher.demo ")


def test_extras_table_lists_every_extra():
    import re
    import tomllib

    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        extras = set(tomllib.load(f)["project"]["optional-dependencies"])
    with open(os.path.join(REPO, "docs", "index.md"), encoding="utf-8") as f:
        table = [line for line in f if line.startswith("| `")]
    listed = {name for line in table for name in re.findall(r"`([a-z]+)`", line.split("|")[1])}
    assert extras <= listed, sorted(extras - listed)


@pytest.mark.parametrize("option", ["--class-label", "--image"])
def test_a_misspelt_column_lists_the_real_ones(tmp_path, capsys, option):
    (tmp_path / "iris.csv").write_text("length,species\n1.5,setosa\n2,virginica\n")
    assert main(["prepare", str(tmp_path / "out"), "--split", "train", str(tmp_path / "iris.csv"),
                 option, "specie", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "'specie'" in err and "['length', 'species']" in err


def test_a_misspelt_array_lists_the_real_ones(tmp_path, capsys):
    np.savez(tmp_path / "train.npz", x=np.zeros((3, 2)), target=np.arange(3))
    assert main(["prepare", str(tmp_path / "out"), "--split", "train", str(tmp_path / "train.npz"),
                 "--class-label", "targets", "--quiet"]) == 2
    assert "['target', 'x']" in capsys.readouterr().err
