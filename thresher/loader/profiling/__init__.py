"""Profiling: where the time goes (``it.stats()``), traces and timelines.

``stats`` holds the per-stage recorder and ``LoaderStats``; ``tracing`` records a
trace of every iterator (``thresher.trace(path)``); ``timeline`` plots one. The
public names are re-exported by ``thresher.loader`` and ``thresher``.

Example:
    >>> from thresher.loader.profiling.stats import LoaderStats
    >>> LoaderStats.__name__
    'LoaderStats'
"""
