"""The worker pools' machinery: worker processes and the schedule both pools keep.

The producers that use it live in thresher.loader.producers: ``WorkerPoolProducer``
(processes.py, ``worker_count > 0``) runs ``workers.WorkerProcesses``; ``worker_start``
starts the processes (forkserver, the pickled pipeline), ``worker_main`` is what runs in
them, ``wire`` and ``shm`` carry the results back through shared memory, ``remote_errors``
carries a worker's exception home, ``watchdog`` notices a stuck worker. ``ThreadPoolProducer``
(threads.py, ``worker_mode="thread"``) keeps the same schedule (``schedule``) and stacking
(``stacking``) on threads of this process, with nothing pickled. All of these modules are
internal: the public way in is ``DataLoader(..., worker_count=n, worker_mode=...)``.

Example:
    >>> from thresher.loader.pool.worker_start import start_method
    >>> start_method() in ("forkserver", "spawn")
    True
"""
