"""Seed derivation by hashing: (seed, epoch) and (seed, position) never alias.

All randomness in thresher comes from 64-bit words derived here with a SplitMix64
finaliser chained over the inputs. Derivation is a hash, never a sum, so seed 0 at
epoch 1 is unrelated to seed 1 at epoch 0 (a classic bug of ``seed + epoch``).

Example:
    >>> from thresher.randomness.seeds import derive_seed
    >>> derive_seed(0, 1) != derive_seed(1, 0)
    True
"""

from __future__ import annotations

import numpy as np

from thresher.errors import ConfigError, ConfigTypeError

__all__ = [
    "DOMAIN_BATCH",
    "DOMAIN_BLOCKS",
    "DOMAIN_OPERATION",
    "DOMAIN_PERMUTATION",
    "DOMAIN_RECORD",
    "MASK64",
    "SALT_MIX_COMPONENT",
    "SALT_OPERATION_INDEX",
    "SALT_OPERATION_SEED",
    "SALT_RNG_STATE",
    "check_seed",
    "derive_seed",
    "derive_seeds",
    "mix64",
    "mix64_array",
    "mix64_inplace",
]

MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_IV = 0x6A09E667F3BCC908  # first 64 bits of the fractional part of sqrt(2)

DOMAIN_PERMUTATION = 0x5045524D  # "PERM"
DOMAIN_RECORD = 0x52454344  # "RECD"
DOMAIN_BATCH = 0x42415443  # "BATC"
DOMAIN_OPERATION = 0x4F504552  # "OPER"
DOMAIN_BLOCKS = 0x424C434B  # "BLCK": a BlockShuffle's epoch key

# Salts: mixed into a derived word so that two uses of one seed never give the same stream.
SALT_OPERATION_SEED = 0x53454544  # "SEED": a RandomMap keyed by its own seed
SALT_OPERATION_INDEX = 0x52414E44  # "RAND": a RandomMap keyed by its index in the operations
SALT_RNG_STATE = 0xD1B54A32D192ED03  # the second half of a generator's 128-bit state
SALT_MIX_COMPONENT = 0x434F4D50  # "COMP": a mixture's component (dataset.compile)

_U_GOLDEN = np.uint64(_GOLDEN)
_U_M1 = np.uint64(_M1)
_U_M2 = np.uint64(_M2)


def check_seed(seed: object, what: str = "seed") -> int:
    """Returns ``seed`` as an int in [0, 2**64); raises ConfigTypeError (also a TypeError, as
    in Grain) for a seed that is not an int, ConfigError for one out of range."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ConfigTypeError(f"{what} must be an int in [0, 2**64), got {seed!r}")
    s = int(seed)
    if not 0 <= s <= MASK64:
        raise ConfigError(f"{what} must be in [0, 2**64), got {s}")
    return s


def mix64(z: int) -> int:
    """SplitMix64's finaliser on a Python int (a bijection on 64-bit words)."""
    z = (z + _GOLDEN) & MASK64
    z = ((z ^ (z >> 30)) * _M1) & MASK64
    z = ((z ^ (z >> 27)) * _M2) & MASK64
    return z ^ (z >> 31)


_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def mix64_inplace(z: np.ndarray) -> np.ndarray:
    """:func:`mix64` on a uint64 array, in place (returns ``z``)."""
    z += _U_GOLDEN
    z ^= z >> _S30
    z *= _U_M1
    z ^= z >> _S27
    z *= _U_M2
    z ^= z >> _S31
    return z


def mix64_array(z: np.ndarray) -> np.ndarray:
    """:func:`mix64` on a uint64 array (returns a new array)."""
    z = z + _U_GOLDEN
    z ^= z >> np.uint64(30)
    z *= _U_M1
    z ^= z >> np.uint64(27)
    z *= _U_M2
    z ^= z >> np.uint64(31)
    return z


def derive_seed(*words: int) -> int:
    """Hashes a sequence of 64-bit words into one 64-bit seed (order matters)."""
    h = mix64(_IV)
    for w in words:
        h = mix64(h ^ (int(w) & MASK64))
    return h


def derive_seeds(prefix: int, words: np.ndarray) -> np.ndarray:
    """``derive_seed(*prefix_words, w)`` for each w, where ``prefix = derive_seed(*prefix_words)``."""
    return mix64_array(np.asarray(words, dtype=np.uint64) ^ np.uint64(prefix))
