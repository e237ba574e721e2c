"""The worker pools: worker processes or threads that compute chunks ahead of the training loop.

``workers.WorkerPoolProducer`` is the producer the Engine uses when
``worker_count > 0``; ``worker_start`` starts the processes (forkserver, the pickled
pipeline), ``worker_main`` is what runs in them, ``wire`` and ``shm`` carry the
results back through shared memory, ``remote_errors`` carries a worker's exception
home. ``threads.ThreadPoolProducer`` is the second pool (``worker_mode="thread"``):
the same schedule (``schedule``) and stacking (``stacking``) on threads of this
process, with nothing pickled. All of these modules are internal: the public way in
is ``DataLoader(..., worker_count=n, worker_mode=...)``.

Example:
    >>> from thresher.loader.pool.worker_start import start_method
    >>> start_method() in ("forkserver", "spawn")
    True
"""
