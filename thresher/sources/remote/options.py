"""The options of the byte-range reader (:class:`RemoteReadOptions`).

Example:
    >>> RemoteReadOptions(cache_bytes=0).max_concurrency
    64
"""

from __future__ import annotations

import dataclasses

from thresher.errors import ConfigError

__all__ = ["RemoteReadOptions"]


@dataclasses.dataclass(frozen=True)
class RemoteReadOptions:
    """How records are read over byte ranges.

    Args:
        max_request_bytes: the largest range one request may cover when neighbouring
            chunks are coalesced (a single chunk larger than this is still one request).
        max_gap_bytes: chunks this close are read by one request (the gap is read too, as
            long as gaps stay under half of the bytes wanted).
        max_concurrency: requests in flight at once, per process.
        timeout: seconds a batch (or a footer) may take before a SourceError.
        footer_cache_dir: a local directory where footer indexes are kept between
            processes and runs (None: in memory only).
        cache_bytes: decoded chunks kept in memory per process, in bytes (least recently
            used evicted first; 0: none kept). A chunk in the cache costs no request.
        fill_cache: when all the objects together take at most a quarter of
            ``cache_bytes``, a missing chunk is fetched with the other chunks of the aligned
            ``max_request_bytes`` window around it: a small dataset is then fetched in a
            few large requests, once per process, and read from memory after that. Filling
            stops at the first eviction (the decoded chunks did not fit after all).
        lookahead: positions of the sampler, after the ones being read, whose record keys
            the loader tells the reader (0, the default: none, plain LRU). With a chunk cache,
            eviction then spares the chunks those keys need (least recently used among the
            others first; Belady's policy within the window): about 40% fewer chunk bytes
            fetched when the cache holds a quarter of the data, but misses then coalesce less,
            so requests do not fall as much (see the object-storage guide; e.g. 8192). Memory
            and CPU grow with the window, never with the dataset; what is read never depends
            on it.
        client: ``"lean"`` (the default): ``s3://`` and ``http(s)://`` ranges are read by
            thresher's own HTTP client (kept-alive connections, requests signed here; about a
            tenth of s3fs's CPU per request), unless ``storage_options`` hold an option only
            fsspec knows; ``"fsspec"``: every URL is read through fsspec (s3fs, ...). Other
            schemes, listings and globs always go through fsspec.
        verify_headers: check the HighwayHash of every chunk header and block header read
            (footers are always checked). The hash of every chunk's data is checked whatever
            this says (see ``thresher.sources.remote.format``): a chunk that fails is fetched
            again once, then the read raises CorruptSourceError.

    Example:
        >>> RemoteReadOptions(max_concurrency=8).timeout
        60.0
        >>> RemoteReadOptions(client="fsspec").client
        'fsspec'
    """

    max_request_bytes: int = 8 << 20
    max_gap_bytes: int = 4 << 10
    max_concurrency: int = 64
    timeout: float = 60.0
    footer_cache_dir: str | None = None
    verify_headers: bool = True
    cache_bytes: int = 256 << 20
    fill_cache: bool = True
    client: str = "lean"
    lookahead: int = 0

    def __post_init__(self) -> None:
        for name in ("max_request_bytes", "max_gap_bytes", "max_concurrency", "cache_bytes", "lookahead"):
            value = getattr(self, name)
            low = 0 if name in ("max_gap_bytes", "cache_bytes", "lookahead") else 1
            high = 20 if name == "lookahead" else 48
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 1 << high:
                raise ConfigError(f"RemoteReadOptions.{name} must be an int in [{low}, 2**{high}], got {value!r}")
        for flag in ("verify_headers", "fill_cache"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"RemoteReadOptions.{flag} must be True or False, got {getattr(self, flag)!r}")
        if self.client not in ("lean", "fsspec"):
            raise ConfigError(f"RemoteReadOptions.client must be 'lean' or 'fsspec', got {self.client!r}")
        if not isinstance(self.timeout, (int, float)) or self.timeout <= 0:
            raise ConfigError(f"RemoteReadOptions.timeout must be > 0 seconds, got "
                              f"{self.timeout!r}")
