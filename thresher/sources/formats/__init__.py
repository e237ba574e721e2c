"""Storage formats read in place, one package per format.

Example:
    >>> from thresher.sources.formats.shards import expand_braces
    >>> expand_braces("part-{0..2}.tar")
    ['part-0.tar', 'part-1.tar', 'part-2.tar']
"""
