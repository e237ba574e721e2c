"""One module per loader family; each is imported only in its own benchmark subprocess.

Every module exposes ``pipeline(workload, config, data) -> (factory, count)`` for the
throughput workloads (``factory()`` builds the loader and returns an iterator over
batches; ``count(batch)`` is the number of records in a batch), and may expose
``restore(config, data)`` (W4) and ``sampler_first_indices(config)`` (W5), which
return result dicts. A configuration the loader cannot run raises ``Unavailable``.
"""


class Unavailable(Exception):
    """This loader/configuration does not exist (yet); recorded, not a failure."""
