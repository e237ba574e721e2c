"""Storage formats read in place: one package per format (Parquet, Hugging Face datasets, ...)."""
