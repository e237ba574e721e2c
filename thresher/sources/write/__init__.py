"""Writing datasets: ``prepare`` (:mod:`.prepare`) in this process (:mod:`.local`) or on
Apache Beam (:mod:`.beam`), the plan that cuts splits into shards (:mod:`.plan`), spill runs
(:mod:`.spill`), committing to a directory or a bucket (:mod:`.commit`), and turning local files
into ``prepare`` inputs (:mod:`.inputs`).

Nothing here is imported by the readers: a dataset is read through :mod:`thresher.sources.formats`.
"""
