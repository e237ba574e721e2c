"""Grain's Dataset tutorial (MapDataset, IterDataset, DatasetIterator), retold as a script.

The first import line is the only thing that changes between Grain and thresher
(tests/grain/test_tutorials.py runs it both ways). It prints one JSON object: what
each part produced, for the test to compare.

Usage: python dataset_tutorial.py
"""
import grain  # the line that changes

import json

import numpy as np


class MySource(grain.sources.RandomAccessDataSource):
    def __init__(self):
        self._data = [0, 1, 2, 3, 4, 5, 6, 7]

    def __getitem__(self, idx):
        return self._data[idx]

    def __len__(self):
        return len(self._data)


class Square(grain.transforms.Map):
    def map(self, x):
        return x * x


class AddNoise(grain.transforms.RandomMap):
    def random_map(self, x, rng):
        return {"value": x, "noise": rng.random()}


def flat(batches):
    return sorted(int(x) for b in batches for x in np.asarray(b).ravel().tolist())


def shapes(batches):
    return [list(np.shape(b)) for b in batches]


def main():
    out = {}
    # A MapDataset from a list: shuffle, map, batch; random access and iteration.
    dataset = (grain.MapDataset.source([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
               .shuffle(seed=10)
               .map(lambda x: x + 1)
               .batch(batch_size=2))
    out["first_shape"] = list(dataset[0].shape)
    batches = list(dataset)
    out["batches"] = {"count": len(batches), "shapes": shapes(batches), "values": flat(batches)}
    out["random_access_matches_iteration"] = all(
        np.array_equal(dataset[i], b) for i, b in enumerate(batches))

    # The same from a RandomAccessDataSource subclass.
    from_source = (grain.MapDataset.source(MySource()).shuffle(seed=10).map(lambda x: x + 1).batch(batch_size=2))
    out["from_source"] = {"count": len(from_source), "values": flat(from_source)}

    # filter on a MapDataset keeps the length; dropped positions read as None.
    filtered = dataset.filter(lambda e: (e[0] + e[1]) % 2 == 0)
    items = [filtered[i] for i in range(len(filtered))]
    out["filtered_len"] = len(filtered)
    out["filter_ok"] = all(e is None or (int(e[0]) + int(e[1])) % 2 == 0 for e in items) and (
        len(list(filtered)) == sum(e is not None for e in items))

    # Slicing shards a MapDataset.
    sharded = dataset[0::2]
    out["sharded"] = {"len": len(sharded), "shapes": [list(sharded[0].shape), list(sharded[1].shape)]}

    # To an IterDataset, read ahead in threads.
    iter_dataset = sharded.to_iter_dataset(grain.ReadOptions(num_threads=16, prefetch_buffer_size=500))
    out["iter_count"] = len(list(iter_dataset))

    # A DatasetIterator: its state is small and restores exactly.
    dataset_iter = iter(dataset)
    out["is_dataset_iterator"] = isinstance(dataset_iter, grain.DatasetIterator)
    next(dataset_iter)
    checkpoint = dataset_iter.get_state()
    expected = next(dataset_iter)
    dataset_iter.set_state(checkpoint)
    out["restore_exact"] = bool(np.array_equal(next(dataset_iter), expected))

    # More steps: a pipeline seed, transforms as objects, repeat, filter and batch on
    # an IterDataset, and worker processes.
    pipeline = (grain.MapDataset.range(20).seed(7).shuffle().map(Square()).repeat(2)
                .to_iter_dataset()
                .filter(lambda x: x % 3 != 0)
                .batch(4, drop_remainder=False))
    local = list(pipeline)
    in_workers = list(pipeline.mp_prefetch(grain.MultiprocessingOptions(num_workers=2)))
    kept = sorted(x * x for x in range(20) if (x * x) % 3 != 0)
    out["pipeline"] = {"count": len(local), "shapes": shapes(local), "epochs_ok": flat(local) == sorted(kept * 2)}
    out["workers_same_multiset"] = flat(in_workers) == flat(local)
    noisy = list(grain.MapDataset.range(6).random_map(AddNoise(), seed=3))
    out["random_map"] = {"count": len(noisy), "values": sorted(e["value"] for e in noisy),
                         "in_unit": all(0 <= e["noise"] < 1 for e in noisy)}
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    try:  # Grain's worker processes read absl flags; a plain script must mark them parsed
        from absl import flags
        flags.FLAGS.mark_as_parsed()
    except ImportError:
        pass
    main()
