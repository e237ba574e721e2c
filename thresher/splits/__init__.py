"""Split strings and ReadInstruction with TFDS's semantics; even_splits; split_for_jax_process.

Split strings select records of a prepared dataset::

    "train"                      the whole split
    "train[123:450]"             records 123..449;  "train[-10:]" the last 10
    "train[:75%]"  "train[25%:75%]"  "train[:1.5%]"   percents (rounded to the closest)
    "train[:25%](pct1_dropremainder)"               every 1% the same size
    "train[:4shard]"  "train[4shard]"                shards (files) of the split
    "train+test"  "train[:25%]+test"                unions, read in order
    "all"                                            every split, in dataset order

Example:
    >>> from thresher.splits import ReadInstruction, even_splits
    >>> sizes = {"train": 1000, "test": 200}
    >>> ReadInstruction.from_spec("train[:75%]+test").num_examples(sizes)
    950
    >>> folds = [f"train[{k}%:{k + 10}%]" for k in range(0, 100, 10)]
    >>> sum(ReadInstruction.from_spec(f).num_examples(sizes) for f in folds)
    1000
    >>> [s.num_examples(sizes) for s in even_splits("train[75%:]+test", 2)]
    [225, 225]
"""

from thresher.splits.base import (
    ALL,
    AbsoluteInstruction,
    AbstractSplit,
    SplitArg,
    SplitSizes,
    check_split_name,
    split_sizes,
)
from thresher.splits.even import EvenSplit, even_splits, split_for_jax_process
from thresher.splits.parse import parse_split, resolve_split
from thresher.splits.read_instruction import ROUNDINGS, UNITS, ReadInstruction
from thresher.splits.union import SplitUnion

__all__ = [
    "ALL",
    "ROUNDINGS",
    "UNITS",
    "AbsoluteInstruction",
    "AbstractSplit",
    "EvenSplit",
    "ReadInstruction",
    "SplitArg",
    "SplitSizes",
    "SplitUnion",
    "check_split_name",
    "even_splits",
    "parse_split",
    "resolve_split",
    "split_for_jax_process",
    "split_sizes",
]
