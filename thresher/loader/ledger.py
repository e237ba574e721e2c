"""The delivery ledger: one append-only file per process, one short line per step.

``DataLoader(..., ledger=DIR)`` or ``it.ledger(DIR)`` makes the iterator append to
``DIR/process-<i>.ledger`` (i: the process's shard index):

- a ``begin`` line whenever it starts or is restored: the stream (what
  ``IndexSampler`` needs to name records), the geometry, the local position it
  starts at, what it leaves out (positions consumed before a host change, blocked
  records, skipped steps) and, after a restore from ``merge_states``, which earlier
  run segment the merged checkpoint ended;
- one step line per delivered batch: its number ``t`` since the begin line, the
  local positions ``[a, e)`` the step consumed and its number of elements ``n``;
- an ``end`` line when the stream is exhausted (the positions consumed after the
  last batch: filtered elements, a dropped remainder).

A packed Dataset's iterator (``Dataset.pack``) adds two kinds: a ``pw`` line per
packed window it loads (the window's local position ``w``, its first stream position
``a``, the offsets of its placed records as runs ``o``, their lengths ``n`` and rows
``r`` as ``encode_ints`` writes them: a few bytes a record) and a ``pk`` line per
delivered step (the windows and rows it took, ``p``: ``[w, first row, end row, ...]``);
its begin lines carry ``pack``, the rows of the window it resumes in.

Each line is JSON followed by its CRC-32 and written with a single ``write`` on a
file opened for appending, so a kill leaves whole lines (at most the last one torn,
which its checksum shows); ``get_state`` (a checkpoint) also syncs the file to disk.
``thresher.forensics.audit`` reads the ledgers of all processes and checks that every
record was delivered exactly once. A line is ~60 bytes a step.

Example:
    >>> line = encode_line({"k": "s", "t": 0, "a": 0, "e": 4, "n": 4})
    >>> line
    b'{"k":"s","t":0,"a":0,"e":4,"n":4} 9c2269b7\\n'
    >>> decode_line(line.decode())
    {'k': 's', 't': 0, 'a': 0, 'e': 4, 'n': 4}
    >>> decode_line(line.decode()[:-5]) is None      # torn: no checksum, or a wrong one
    True
"""

from __future__ import annotations

import base64
import json
import os
import zlib
from typing import Any

import numpy as np

__all__ = ["LEDGER_SUFFIX", "LedgerWriter", "as_runs", "decode_ints", "decode_line", "encode_ints", "encode_line",
           "ledger_path"]

LEDGER_SUFFIX = ".ledger"


def ledger_path(directory: str, process_index: int) -> str:
    """The ledger file of one process."""
    return os.path.join(directory, f"process-{process_index}{LEDGER_SUFFIX}")


def encode_line(obj: dict[str, Any]) -> bytes:
    """One ledger line: compact JSON, a space, its CRC-32 in hex, a newline."""
    text = json.dumps(obj, separators=(",", ":"))
    return f"{text} {zlib.crc32(text.encode()):08x}\n".encode()


def decode_line(line: str) -> dict[str, Any] | None:
    """The record of a ledger line, or None when it is torn or corrupt (no newline, bad checksum)."""
    if not line.endswith("\n"):
        return None
    text, _, crc = line[:-1].rpartition(" ")
    try:
        if int(crc, 16) != zlib.crc32(text.encode()) or len(crc) != 8:
            return None
        obj = json.loads(text)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def as_runs(values: np.ndarray) -> list[int]:
    """Increasing ints as runs ``[first, end, first, end, ...]`` (consecutive values cost one pair).

    Example:
        >>> as_runs(np.array([0, 1, 2, 5, 6, 9]))
        [0, 3, 5, 7, 9, 10]
    """
    v = np.asarray(values, dtype=np.int64)
    if not v.size:
        return []
    cut = np.nonzero(np.diff(v) != 1)[0] + 1
    starts, ends = v[np.concatenate([[0], cut])], v[np.concatenate([cut - 1, [v.size - 1]])] + 1
    return np.stack([starts, ends], axis=1).reshape(-1).tolist()


def encode_ints(values: np.ndarray) -> str:
    """Ints in [0, 2**63) as ``"<bytes each>:<base64 of them, little-endian>"`` (the narrowest of 1, 2, 4, 8).

    Example:
        >>> encode_ints(np.array([3, 300]))
        '2:AwAsAQ=='
    """
    v = np.asarray(values, dtype=np.int64)
    top = int(v.max()) if v.size else 0
    width = 1 if top < 2**8 else 2 if top < 2**16 else 4 if top < 2**32 else 8
    return f"{width}:{base64.b64encode(v.astype(f'<u{width}').tobytes()).decode()}"


def decode_ints(text: Any, limit: int) -> np.ndarray | None:
    """The ints of ``encode_ints`` (int64), or None when ``text`` is not such a string or one exceeds ``limit``.

    Example:
        >>> decode_ints('2:AwAsAQ==', 1000).tolist(), decode_ints('2:AwAsAQ==', 100)
        ([3, 300], None)
    """
    if not isinstance(text, str) or len(text) > 2**28 or text[1:2] != ":" or text[:1] not in ("1", "2", "4", "8"):
        return None
    width = int(text[0])
    try:
        raw = base64.b64decode(text[2:], validate=True)
    except ValueError:
        return None
    if len(raw) % width:
        return None
    v = np.frombuffer(raw, dtype=f"<u{width}").astype(np.uint64)
    if v.size and int(v.max()) > limit:
        return None
    return v.astype(np.int64)


class LedgerWriter:
    """Appends one process's ledger lines (see the module docstring).

    Example:
        >>> import tempfile
        >>> w = LedgerWriter(tempfile.mkdtemp(), 0)
        >>> w.step(0, 4, 4); w.sync(); w.close()
        >>> open(w.path).read().startswith('{"k":"s"')
        True
    """

    def __init__(self, directory: str, process_index: int) -> None:
        os.makedirs(directory, exist_ok=True)
        self.path = ledger_path(directory, process_index)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._step = 0

    def _write(self, obj: dict[str, Any]) -> None:
        if self._fd is not None:
            os.write(self._fd, encode_line(obj))

    def _write_text(self, text: str) -> None:
        """A line whose JSON text is already made (the lines of every step: formatting beats json.dumps)."""
        if self._fd is not None:
            os.write(self._fd, f"{text} {zlib.crc32(text.encode()):08x}\n".encode())

    def begin(self, info: dict[str, Any]) -> None:
        """A (re)start: ``info`` says where and how (built by the iterator)."""
        self._step = 0
        self._write({"k": "begin", **info})

    def step(self, start: int, stop: int, count: int) -> None:
        """A delivered step: local positions [start, stop) consumed, ``count`` elements."""
        self._write_text(f'{{"k":"s","t":{self._step},"a":{start},"e":{stop},"n":{count}}}')
        self._step += 1

    def window(self, position: int, start: int, layout: np.ndarray) -> None:
        """A packed window loaded at local position ``position`` (see ``PackedBlock.layout``)."""
        self._write({"k": "pw", "w": position, "a": start, "o": as_runs(layout[0] - start),
                     "n": encode_ints(layout[1]), "r": encode_ints(layout[2])})

    def packed(self, parts: list[int]) -> None:
        """A delivered packed step: ``[w, first row, end row, ...]`` of the windows it took."""
        self._write_text('{"k":"pk","p":[' + ",".join(map(str, parts)) + "]}")

    def end(self, start: int, stop: int) -> None:
        """The stream is exhausted: positions [start, stop) were consumed without a batch."""
        self._write({"k": "end", "a": start, "e": stop})

    def sync(self) -> None:
        """Makes the lines written so far durable (called at each checkpoint)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
