"""One JAX process of the multi-process tests (tests/test_jax_multiprocess.py).

Run as ``python -m tests.jax_multiprocess_main PROCESS_ID CONFIG_JSON`` from the
repository root, with JAX_PLATFORMS=cpu and XLA_FLAGS giving 2 CPU devices. It joins
a ``jax.distributed`` job on 127.0.0.1, reads its shard of an ArrayRecord file
through a DataLoader with ShardByJaxProcess, turns the local batches into global
``jax.Array``s with ``thresher.jax.global_batches`` and, each step:

- gathers the global batch on every process (``process_allgather``: a collective) and
  runs a jitted global computation on it (sums over the sharded batch axis, which
  update the replicated integer "params");
- appends one JSON line to ``out/steps-<process>.jsonl``: the step, the record keys
  and digest of the gathered global batch, the digest of the local batch and the
  params after the step.

Config keys: port, num_processes, path (ArrayRecord file), num_records, num_epochs,
seed, global_batch, steps, worker_count, out (a directory), epoch_check (write the keys
of one drop_remainder=False epoch to ``out/epoch-<process>.json`` first), save_step
and ckpt_dir (save with Orbax after that step, then write ``out/saved-<process>``),
hold (after the last step, sleep until killed), restore_step (restore params and
iterator from ckpt_dir first), die_at_step and die_process (that process SIGKILLs
itself before that step), heartbeat_s, split_path (a prepared dataset directory: read
this process's ``split_for_jax_process("train")`` first and write its values to
``out/split-<process>.json``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any


def log(out: str, pid: int, msg: str) -> None:
    with open(os.path.join(out, f"log-{pid}.txt"), "a") as f:
        f.write(f"{time.time():.3f} {msg}\n")


def keep(x: dict[str, Any]) -> bool:
    return x["key"] % 5 != 2


def to_jax_dtypes(b: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    return {"key": b["key"].astype(np.int32), "data": b["data"].astype(np.float32)}


def build_loader(cfg: dict[str, Any], shard_options: Any, *, drop: bool = True,
                 epochs: int | None | str = "cfg") -> Any:
    """The loader every process builds (the test builds it too, in-process, to predict results)."""
    import thresher as th
    from tests.helpers import augment, decode

    n = shard_options.shard_count
    sampler = th.IndexSampler(cfg["num_records"], shuffle=True, seed=cfg["seed"],
                              num_epochs=cfg["num_epochs"] if epochs == "cfg" else epochs,
                              shard_options=shard_options)
    ops: list[Any] = [decode, th.RandomMapTransform(augment)]
    if cfg.get("filter"):
        ops.append(th.FilterTransform(keep))
    ops += [th.Batch(cfg["global_batch"] // n, drop_remainder=drop), to_jax_dtypes]
    source = th.sources.ArrayRecordSource(cfg["path"])
    return th.DataLoader(source, sampler, ops, worker_count=cfg.get("worker_count", 0))


def main(argv: list[str]) -> int:
    process_id = int(argv[0])
    cfg: dict[str, Any] = json.loads(argv[1])
    out = cfg["out"]
    n = cfg["num_processes"]

    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    hb = int(cfg.get("heartbeat_s", 10))
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{cfg['port']}", num_processes=n, process_id=process_id,
        initialization_timeout=60, heartbeat_timeout_seconds=hb, shutdown_timeout_seconds=hb,
    )
    log(out, process_id, f"initialized {jax.process_index()}/{jax.process_count()} devices={jax.device_count()}")

    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding, PartitionSpec

    import thresher as th
    import thresher.jax
    from tests.helpers import digest

    assert jax.process_count() == n and jax.process_index() == process_id
    if cfg.get("epoch_check"):
        epoch = build_loader(cfg, th.ShardByJaxProcess(drop_remainder=False), drop=False, epochs=1)
        keys = [int(k) for b in epoch for k in np.asarray(b["key"]).tolist()]
        with open(os.path.join(out, f"epoch-{process_id}.json"), "w") as f:
            json.dump(keys, f)

    if cfg.get("split_path"):
        # TFDS's way: each process reads a contiguous split of its own, shuffled alone.
        from thresher.splits import split_for_jax_process

        sub = split_for_jax_process("train", drop_remainder=False)
        split_source = th.data_source(cfg["split_path"], split=sub)
        split_loader = th.DataLoader(split_source, th.IndexSampler(len(split_source), shuffle=True, seed=1),
                                     [th.Batch(4)], worker_count=cfg.get("worker_count", 0))
        values = [int(v) for b in split_loader for v in np.asarray(b["n"]).reshape(-1).tolist()]
        with open(os.path.join(out, f"split-{process_id}.json"), "w") as f:
            json.dump({"split": str(sub), "values": values}, f)

    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    sharding = NamedSharding(mesh, PartitionSpec("data"))
    replicated = NamedSharding(mesh, PartitionSpec())

    @jax.jit
    def train_step(params: dict[str, Any], batch: dict[str, Any]) -> dict[str, Any]:
        # Integer sums over the sharded batch axis: exact on any number of devices.
        return {"steps": params["steps"] + 1,
                "key_sum": params["key_sum"] + jnp.sum(batch["key"]).astype(jnp.int32),
                "data_sum": params["data_sum"] + jnp.sum(batch["data"].astype(jnp.int32))}

    params = jax.device_put({"steps": np.int32(0), "key_sum": np.int32(0), "data_sum": np.int32(0)}, replicated)
    loader = build_loader(cfg, th.ShardByJaxProcess(drop_remainder=True))
    batches = thresher.jax.global_batches(iter(loader), sharding, prefetch=cfg.get("prefetch", 2))

    import orbax.checkpoint as ocp

    mngr = None
    if cfg.get("ckpt_dir"):
        mngr = ocp.CheckpointManager(cfg["ckpt_dir"])
    start = 0
    how = None
    if cfg.get("restore_step") is not None:
        assert mngr is not None
        abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=replicated), params)
        restore = thresher.jax.CheckpointRestore(batches, allow_approximate=cfg.get("allow_approximate", False))
        try:
            restored = mngr.restore(cfg["restore_step"], args=ocp.args.Composite(
                params=ocp.args.StandardRestore(abstract), data=restore))
        except Exception as e:
            with open(os.path.join(out, f"error-{process_id}.txt"), "w") as f:
                f.write(f"{type(e).__name__}: {e}")
            return 3
        params = restored["params"]
        start = cfg["restore_step"]
        how = restore.how
        log(out, process_id, f"restored step {start} ({how}): position {batches.get_state()['position']}")

    lines = open(os.path.join(out, f"steps-{process_id}.jsonl"), "a")
    for step in range(start, cfg["steps"]):
        if cfg.get("die_at_step") == step and cfg.get("die_process") == process_id:
            log(out, process_id, f"killing myself before step {step}")
            lines.close()
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            batch = next(batches)
        except StopIteration:
            break
        params = train_step(params, batch)
        gathered = multihost_utils.process_allgather(batch, tiled=True)
        local = jax.tree.map(lambda a: np.concatenate([np.asarray(s.data) for s in a.addressable_shards]), batch)
        p = {k: int(np.asarray(v.addressable_data(0))) for k, v in params.items()}  # replicated
        lines.write(json.dumps({"step": step, "keys": np.asarray(gathered["key"]).tolist(),
                                "global": digest(gathered), "local": digest(local), "params": p,
                                "restored": how}) + "\n")
        lines.flush()
        if mngr is not None and cfg.get("save_step") == step + 1:
            mngr.save(step + 1, args=ocp.args.Composite(params=ocp.args.StandardSave(params),
                                                         data=thresher.jax.CheckpointSave(batches)))
            mngr.wait_until_finished()
            open(os.path.join(out, f"saved-{process_id}"), "w").close()
            log(out, process_id, f"saved step {step + 1}")
    lines.close()
    log(out, process_id, "done")
    if cfg.get("hold"):
        while True:  # wait to be killed (SIGKILL), as a crashed job would be
            time.sleep(1)
    batches.close()
    if mngr is not None:
        mngr.close()
    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
