"""Grain's DataLoader tutorial, retold as a script with its data made locally.

The first import line is the only thing that changes between Grain and thresher
(tests/grain/test_tutorials.py runs it both ways). It prints one JSON object: what
each part of the tutorial produced, for the test to compare.

Usage: python data_loader_tutorial.py WORKDIR
"""
import grain.python as grain  # the line that changes

import json
import os
import sys

import cv2
import numpy as np
import orbax.checkpoint as ocp
from array_record.python import array_record_module

NUM_RECORDS = 40


def make_records(path):
    """Writes NUM_RECORDS small "images" of several sizes, with a label and an id."""
    writer = array_record_module.ArrayRecordWriter(path, "group_size:1")
    rng = np.random.default_rng(0)
    for i in range(NUM_RECORDS):
        h, w = 20 + (i % 3) * 7, 24 + (i % 4) * 5
        image = rng.integers(0, 255, size=(h, w, 3), dtype=np.uint8)
        header = np.array([i, i % 5, h, w], dtype=np.int32).tobytes()
        writer.write(header + image.tobytes())
    writer.close()


class Parse(grain.MapTransform):
    def map(self, raw):
        record_id, label, h, w = np.frombuffer(raw[:16], dtype=np.int32).tolist()
        image = np.frombuffer(raw[16:], dtype=np.uint8).reshape(h, w, 3)
        return {"id": record_id, "label": label, "image": image}


class ResizeAndCrop(grain.MapTransform):
    def map(self, element):
        image = cv2.resize(element["image"], dsize=(32, 32), interpolation=cv2.INTER_LINEAR)
        element["image"] = image[:28, :28]
        return element


class RandomFlip(grain.RandomMapTransform):
    def random_map(self, element, rng):
        if rng.random() < 0.5:
            element["image"] = element["image"][:, ::-1].copy()
        return element


class DropLabelThree(grain.FilterTransform):
    def filter(self, element):
        return element["label"] != 3


def structure(batch):
    return {k: [list(v.shape), str(v.dtype)] for k, v in sorted(batch.items())}


def epochs(ids, per_epoch):
    return [sorted(ids[i:i + per_epoch]) for i in range(0, len(ids), per_epoch)]


def main(workdir):
    out = {}
    # Sampler: shuffled, two epochs, one shard; iterating it gives record metadata.
    sampler = grain.IndexSampler(num_records=5, num_epochs=2,
                                 shard_options=grain.ShardOptions(shard_index=0, shard_count=1, drop_remainder=True),
                                 shuffle=True, seed=0)
    keys = [m.record_key for m in sampler]
    out["sampler_epochs"] = epochs(keys, 5)

    # Data source: an ArrayRecord file.
    path = os.path.join(workdir, "images.array_record")
    make_records(path)
    source = grain.ArrayRecordDataSource([path])
    out["num_records"] = len(source)

    # Transformations and the DataLoader.
    operations = [Parse(), ResizeAndCrop(), RandomFlip(), DropLabelThree(), grain.Batch(batch_size=4)]

    def loader(workers, **kwargs):
        return grain.DataLoader(
            data_source=source, operations=operations,
            sampler=grain.IndexSampler(num_records=len(source), num_epochs=2, shard_options=grain.NoSharding(),
                                       shuffle=True, seed=0),
            worker_count=workers, **kwargs)

    batches = list(loader(0))
    out["num_batches"] = len(batches)
    out["structure"] = sorted({json.dumps(structure(b)) for b in batches})
    ids = [int(x) for b in batches for x in b["id"]]
    kept = sum(1 for i in range(NUM_RECORDS) if i % 5 != 3)
    out["epochs"] = epochs(ids, kept)
    out["labels_kept"] = sorted({int(x) for b in batches for x in b["label"]})

    # Checkpointing through Orbax: save after 5 steps, read 5 more, restore, read them again.
    data_iter = iter(loader(0))
    for _ in range(5):
        next(data_iter)
    with ocp.CheckpointManager(os.path.join(workdir, "orbax")) as mngr:
        mngr.save(step=5, args=grain.PyGrainCheckpointSave(data_iter), force=True)
        mngr.wait_until_finished()
        first = [next(data_iter)["id"].tolist() for _ in range(5)]
        mngr.restore(5, args=grain.PyGrainCheckpointRestore(data_iter))
        again = [next(data_iter)["id"].tolist() for _ in range(5)]
    out["orbax_restore_exact"] = first == again == [b["id"].tolist() for b in batches[5:10]]

    # The state itself: bytes of JSON; a new iterator continues from it (with workers;
    # Grain needs the same worker count, thresher takes any).
    with_workers = list(loader(2))
    data_iter = iter(loader(2))
    for _ in range(3):
        next(data_iter)
    state = data_iter.get_state()
    out["state_is_bytes"] = isinstance(state, bytes) and isinstance(json.loads(state.decode()), dict)
    resumed = iter(loader(2, read_options=grain.ReadOptions(num_threads=8, prefetch_buffer_size=500)))
    resumed.set_state(state)
    rest = list(resumed)
    out["bytes_resume_exact"] = len(rest) == len(with_workers) - 3 and all(
        np.array_equal(a["image"], b["image"]) and np.array_equal(a["id"], b["id"])
        for a, b in zip(rest, with_workers[3:]))
    out["workers_epochs"] = epochs([int(x) for b in with_workers for x in b["id"]], kept)

    # In-memory source with worker processes.
    in_memory = grain.InMemoryDataSource(range(5))
    data_loader = grain.DataLoader(
        data_source=in_memory,
        sampler=grain.IndexSampler(num_records=len(in_memory), num_epochs=2, shard_options=grain.NoSharding(),
                                   shuffle=True, seed=0),
        worker_count=2)
    data_iter = iter(data_loader)
    values = [int(next(data_iter)) for _ in range(len(in_memory) * 2)]
    out["in_memory_epochs"] = epochs(values, 5)
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    try:  # Grain's worker processes read absl flags; a plain script must mark them parsed
        from absl import flags
        flags.FLAGS.mark_as_parsed()
    except ImportError:
        pass
    main(sys.argv[1])
