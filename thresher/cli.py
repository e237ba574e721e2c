"""The ``thresher`` command: ``info``, ``prepare``, ``convert``, ``explain``, ``audit`` and ``demo``.

::

    thresher --version
    thresher info PATH [--json] [--verify]
    thresher prepare OUT --split train train.npz --split test test.npz [options]
    thresher prepare OUT --split train images/train --split test images/test
    thresher prepare OUT --split train a.csv --class-label species
    thresher convert TFDS_DIR [--out DIR] [--no-verify] [--quiet]
    thresher demo [ARGS...]
    thresher explain --pipeline MODULE:FUNCTION --step N [--state STATE.json] [--process-index I] [--ledger DIR]
                     [--json]
    thresher audit LEDGER_DIR [--json]

Example:
    >>> from thresher.cli import main
    >>> main(["info", "/no/such/dataset"])
    2
    >>> main(["--version"])  # doctest: +ELLIPSIS
    thresher ...
    0
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from thresher._validate import user_path
from thresher.errors import ConfigError, ThresherError, WriteError

__all__ = ["main"]


def _fmt_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"  # pragma: no cover


def _feature_lines(feature: Any, indent: str = "  ") -> list[str]:
    from thresher.features import FeaturesDict
    from thresher.sources.formats.tfds.features import FeaturesDict as TfdsFeaturesDict

    dicts = (FeaturesDict, TfdsFeaturesDict)
    if not isinstance(feature, dicts):
        return [f"{indent}{feature!r}"]
    lines = []
    width = max((len(k) for k in feature), default=0)
    for key, f in feature.items():
        if isinstance(f, dicts):
            lines.append(f"{indent}{key}:")
            lines.extend(_feature_lines(f, indent + "  "))
        else:
            lines.append(f"{indent}{key:<{width}}  {f!r}")
    return lines


def _print_splits(info: Any) -> None:
    print("splits:")
    width = max([len(s) for s in info.splits] + [5])
    for s in info.splits.values():
        print(f"  {s.name:<{width}}  {s.num_examples:>12,} examples  {s.num_shards:>5} "
              f"shard{'s' if s.num_shards != 1 else ' '}  {_fmt_size(s.num_bytes):>10}")
    print(f"  {'all':<{width}}  {info.splits.total_num_examples:>12,} examples")


def _tfds_info(b: Any, as_json: bool) -> None:
    import json

    info = b.info
    if as_json:
        print(json.dumps(info.raw, indent=2))
        return
    print(f"{info.full_name}   ({b.data_dir})")
    if info.description:
        print(info.description)
    formats = ", ".join((info.file_format, *info.alternative_file_formats))
    if info.has_array_record:
        note = ""
    elif info.file_format == "tfrecord":
        note = " (read in place through cached offset indexes; `thresher convert` makes an ArrayRecord copy)"
    else:
        note = " (run `thresher convert` for random access)"
    print(f"format: written by TensorFlow Datasets, shards: {formats}{note}")
    _print_splits(info)
    print("features:")
    print("\n".join(_feature_lines(info.features)))


def _prepared_info(b: Any, as_json: bool) -> None:
    info = b.info
    if as_json:
        print(info.dumps(), end="")
    else:
        print(f"{info.name} {info.version}   ({b.data_dir})")
        if info.description:
            print(info.description)
        print(f"format: thresher.prepared v1, records shuffled: {'yes' if info.shuffled else 'no'}")
        _print_splits(info)
        print("features:")
        print("\n".join(_feature_lines(info.features)))


def _info(args: argparse.Namespace) -> int:
    from thresher.sources.directory import builder
    from thresher.sources.formats.tfds import TfdsBuilder

    b = builder(args.path)
    if isinstance(b, TfdsBuilder):
        _tfds_info(b, args.json)
    else:
        _prepared_info(b, args.json)
    if args.verify:
        for name, source in b.as_data_source().items():
            for lo in range(0, len(source), 1024):
                source.__getitems__(range(lo, min(lo + 1024, len(source))))
            print(f"verified {name}: {len(source):,} records decode", file=sys.stderr)
    return 0


def _prepare(args: argparse.Namespace) -> int:
    from thresher.sources.write.inputs import load_inputs
    from thresher.sources.write.prepare import prepare

    splits: dict[str, list[str]] = {}
    for name, *inputs in args.split:
        if name in splits:
            raise ConfigError(f"split {name!r} is given twice")
        splits[name] = inputs
    features, examples = load_inputs(splits, class_labels=args.class_label, images=args.image,
                                     image_encoding=args.image_encoding, channels=args.channels)
    prepare(args.out, examples, features=features, num_shards=args.num_shards, name=args.name,
            version=args.version, description=args.description, shuffle=not args.no_shuffle,
            overwrite=args.overwrite, progress=not args.quiet)
    return 0


def _convert(args: argparse.Namespace) -> int:
    from thresher.sources.formats.tfds.convert import convert

    out = convert(args.path, args.out, progress=not args.quiet, verify=not args.no_verify)
    if not args.quiet:
        print(f"converted: read it with thresher.data_source({out!r})", file=sys.stderr)
    return 0


def _demo(argv: Sequence[str]) -> int:
    import importlib

    try:
        demo = importlib.import_module("thresher.demo")
    except ModuleNotFoundError as e:
        if e.name != "thresher.demo":
            raise
        print("thresher: the demo is not part of this build of thresher", file=sys.stderr)
        return 2
    result = demo.main(list(argv))
    return int(result or 0)


def _explain(args: argparse.Namespace) -> int:
    from thresher.forensics.cli import run_explain

    return run_explain(args.pipeline, args.step, args.state, args.process_index, args.json, args.ledger)


def _audit(args: argparse.Namespace) -> int:
    import json

    from thresher.forensics.audit import audit

    report = audit(args.directory)
    print(json.dumps(report.to_json()) if args.json else report)
    return 0 if report.ok else 1


def _version() -> str:
    import thresher

    return thresher.__version__


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="thresher", description="thresher datasets and runs: inspect (info), "
                                "prepare, convert, explain a step, audit a run's ledgers, demo.")
    p.add_argument("--version", action="version", version=f"thresher {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = sub.add_parser("info", help="print a prepared dataset's splits, sizes and features")
    info.add_argument("path", type=user_path, help="a prepared dataset directory, or one written by "
                                   "TensorFlow Datasets")
    info.add_argument("--json", action="store_true", help="print dataset_info.json")
    info.add_argument("--verify", action="store_true",
                      help="also open every shard and decode every record")

    prep = sub.add_parser(
        "prepare", help="convert local files into a prepared dataset",
        description="Inputs per split: .npz files, .npy files (KEY=file.npy names the "
                    "feature), one folder with a subfolder per class, or .csv/.jsonl tables.")
    prep.add_argument("out", type=user_path, help="the dataset directory to create")
    prep.add_argument("--split", nargs="+", action="append", required=True,
                      metavar=("NAME", "INPUT"), help="a split and its input(s); repeat per split")
    prep.add_argument("--class-label", action="append", default=[], metavar="KEY",
                      help="treat this column/array as a class label (repeatable)")
    prep.add_argument("--image", action="append", default=[], metavar="KEY",
                      help="treat this array (or table column of file paths) as an image")
    prep.add_argument("--image-encoding", choices=["original", "png", "jpeg", "none"],
                      help="how images are stored (default: original from files, i.e. their bytes as "
                           "they are; none from arrays); png/jpeg re-encode")
    prep.add_argument("--channels", type=int, choices=[1, 3, 4], default=3,
                      help="channels of images read from files (default 3)")
    prep.add_argument("--num-shards", type=int,
                      help="shard files per split (default: 1 per 256 MiB)")
    prep.add_argument("--name", help="dataset name (default: the directory name)")
    prep.add_argument("--version", default="1.0.0")
    prep.add_argument("--description", default="")
    prep.add_argument("--no-shuffle", action="store_true", help="keep the input order on disk")
    prep.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    prep.add_argument("--quiet", action="store_true", help="no progress bars or summary")

    conv = sub.add_parser(
        "convert", help="convert a tfrecord TFDS dataset to ArrayRecord (random access)",
        description="Reads the tfrecord shards of a TFDS-written dataset (no TensorFlow "
                    "needed) and writes the same records to array_record shards.")
    conv.add_argument("path", type=user_path, help="a TFDS version directory, or a dataset directory "
                                   "(its newest version)")
    conv.add_argument("--out", type=user_path, help="write a converted copy here (default: in place, beside "
                                    "the tfrecord shards)")
    conv.add_argument("--no-verify", action="store_true",
                      help="skip the per-record data CRC32C check (faster)")
    conv.add_argument("--quiet", action="store_true", help="no progress bar")
    exp = sub.add_parser("explain", help="which records make a training step (reads no record)")
    exp.add_argument("--pipeline", required=True, metavar="MODULE:FUNCTION",
                     help="a function that takes no argument and returns the run's DataLoader")
    exp.add_argument("--step", required=True, type=int, help="the step (counted as in the run without skips)")
    exp.add_argument("--state", type=user_path, help="a state saved by the run (its skipped steps are shown)")
    exp.add_argument("--process-index", type=int, help="one process (default: all)")
    exp.add_argument("--ledger", metavar="DIR", type=user_path,
                     help="the run's ledger (DataLoader(..., ledger=DIR) or it.ledger(DIR)): needed when a "
                          "Filter or pack makes steps depend on the data")
    exp.add_argument("--json", action="store_true", help="print JSON")

    aud = sub.add_parser("audit", help="check from the ledgers that every record was delivered exactly once "
                                       "(exit status 1 if not)")
    aud.add_argument("directory", type=user_path, help="the ledger directory (DataLoader(..., ledger=DIR))")
    aud.add_argument("--json", action="store_true", help="print JSON")

    sub.add_parser("demo", help="run the thresher demo (arguments are passed to it)",
                   add_help=False)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status (0 ok, 2 bad input or data, 1 OS errors)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["demo"]:
        return _demo(args_list[1:])
    parser = _parser()
    try:
        args = parser.parse_args(args_list)
    except SystemExit as e:
        return int(e.code or 0)
    try:
        if args.command == "info":
            return _info(args)
        if args.command == "convert":
            return _convert(args)
        if args.command == "explain":
            return _explain(args)
        if args.command == "audit":
            return _audit(args)
        return _prepare(args)
    except ThresherError as e:
        print(f"thresher {args.command}: error: {e}", file=sys.stderr)
        return 1 if isinstance(e, WriteError) else 2
    except OSError as e:
        print(f"thresher {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
