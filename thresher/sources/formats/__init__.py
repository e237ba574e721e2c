"""Storage formats read in place: one package per format.

``array_record/`` (ArrayRecord files, local or in buckets), ``prepared/`` (directories written by
``thresher.prepare``), ``tfds/`` (directories written by TensorFlow Datasets), ``tfrecord/``
(TFRecord files), ``webdataset/`` (WebDataset tar shards), ``image_folder/`` (torchvision's
ImageFolder layout), ``parquet/`` (Parquet files, local or in buckets; Hub-layout directories),
``huggingface/`` (Hugging Face ``datasets``: Arrow files, memory-mapped). Each package reads its
format into the random-access source protocol (:mod:`thresher.sources.protocol`); writing lives in
:mod:`thresher.sources.write`. The formats read through a per-shard index share ``shards`` (shard
lists, brace patterns), ``shard_files`` (byte ranges, local or by URL) and ``index_cache`` (indexes
cached on disk).
"""
