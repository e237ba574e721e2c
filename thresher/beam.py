"""``thresher.beam``: preparing datasets on Apache Beam (the public path of :mod:`thresher.sources.write.beam`).

Importing it needs the ``beam`` extra (``pip install "thresher[beam]"``); ``docs/beam.md`` is the guide.
"""

from thresher.sources.write.beam import EXCHANGES, METRICS, WriteDataset, prepare_on_beam

__all__ = ["EXCHANGES", "METRICS", "WriteDataset", "prepare_on_beam"]
