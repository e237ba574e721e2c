"""The worker pool: worker processes that compute chunks ahead of the training loop.

``workers.WorkerPoolProducer`` is the producer the Engine uses when
``worker_count > 0``; ``worker_start`` starts the processes (forkserver, the pickled
pipeline), ``worker_main`` is what runs in them, ``wire`` and ``shm`` carry the
results back through shared memory, ``remote_errors`` carries a worker's exception
home. All of these modules are internal: the public way in is ``DataLoader(...,
worker_count=n)``.

Example:
    >>> from thresher.loader.pool.worker_start import start_method
    >>> start_method() in ("forkserver", "spawn")
    True
"""
