"""Storage formats read in place: one package per format.

``array_record/`` (ArrayRecord files, local or in buckets), ``prepared/`` (directories written by
``thresher.prepare``), ``tfds/`` (directories written by TensorFlow Datasets). Each package
reads its format into the random-access source protocol (:mod:`thresher.sources.protocol`);
writing lives in :mod:`thresher.sources.write`.
"""
