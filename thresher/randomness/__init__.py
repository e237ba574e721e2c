"""Keyed randomness: seed derivation, the keyed permutation, per-record generators.

A leaf package: it imports only numpy and ``thresher.errors``, so every stage can use
it without an import cycle. ``seeds`` derives 64-bit words by hashing (with the table
of domain constants that keep the uses apart), ``permutation`` is the O(1)-memory
keyed shuffle of one epoch.

Example:
    >>> from thresher.randomness.seeds import derive_seed
    >>> derive_seed(0, 1) != derive_seed(1, 0)
    True
"""
