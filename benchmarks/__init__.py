"""Benchmarks: thresher against Grain, the PyTorch DataLoader and bare loops.

Run ``python -m benchmarks.run --quick`` (see benchmarks/README.md).
"""
