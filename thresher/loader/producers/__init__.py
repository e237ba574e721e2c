"""The producers: what computes the chunks of an iterator and hands them out in order.

All six run one loop (``base.ChunkLoop``) and differ in how they get a chunk; ``base``
says which producer does what. They are internal: the Engine makes them
(``Engine.producer``), and the public way in is ``DataLoader(..., worker_count=...)``.
Nothing is imported here, so that a loader without workers never loads the pool's modules.

Example:
    >>> from thresher.loader.producers.base import ChunkLoop
    >>> from thresher.loader.producers.coalescing import CoalescingProducer
    >>> issubclass(CoalescingProducer, ChunkLoop)
    True
"""
