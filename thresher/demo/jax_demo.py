"""The JAX demo: an MLP on the digits, global batches, Orbax mid-epoch, an identical loss curve.

Run it with ``python -m thresher.demo --jax`` (one process) or
``python -m thresher.demo --processes 2`` (two JAX processes on localhost, CPU).
``--restore-processes M`` restores the checkpoint on another number of processes. It

1. writes the digits to ArrayRecord (as ``thresher.demo`` does),
2. run 1: every process reads its shard (``ShardByJaxProcess``) through a DataLoader;
   ``thresher.jax.global_batches`` makes global ``jax.Array`` batches, copied to the
   devices two batches ahead; a jitted JAX MLP trains on them; mid-epoch, Orbax saves
   the parameters and the iterator (``thresher.jax.CheckpointSave``) side by side;
   training goes on to the end,
3. run 2, in fresh processes: restores both (``thresher.jax.CheckpointRestore``) and
   trains to the end; the loss of every step after the checkpoint is compared with
   run 1's: identical, bit for bit, on the same number of processes.

The global batch is the same for any number of processes, so the data of a restore on
M processes is identical too; the losses then agree up to the order of float sums
(another device count reduces in another order).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import numpy as np

import thresher as th

__all__ = ["run"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _loader(cfg: dict[str, Any], shard_options: th.ShardOptions, train: bool = True) -> th.DataLoader:
    from thresher.demo.digits import decode, normalise, random_noise

    source = th.sources.ArrayRecordSource(cfg["train_path"] if train else cfg["test_path"])
    sampler = th.IndexSampler(len(source), shuffle=train, seed=cfg["seed"], num_epochs=cfg["epochs"] if train else 1,
                              shard_options=shard_options)
    ops: list[Any] = [decode] + ([th.RandomMapTransform(random_noise)] if train else []) + [normalise]
    ops.append(th.Batch(cfg["batch_size"] // shard_options.shard_count, drop_remainder=train))
    ops.append(lambda b: {"image": b["image"], "label": b["label"].astype(np.int32)})
    return th.DataLoader(source, sampler, ops, worker_count=cfg["workers"])


def _init_params(seed: int, hidden: int = 64) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"w1": rng.normal(0, np.sqrt(2 / 64), (64, hidden)).astype(np.float32),
            "b1": np.zeros(hidden, np.float32),
            "w2": rng.normal(0, np.sqrt(1 / hidden), (hidden, 10)).astype(np.float32),
            "b2": np.zeros(10, np.float32)}


def train(cfg: dict[str, Any]) -> dict[str, Any]:
    """One process's part of a run; ``cfg["restore_step"]`` restores from the checkpoint first."""
    import jax
    import jax.numpy as jnp
    import orbax.checkpoint as ocp
    from jax.sharding import NamedSharding, PartitionSpec

    import thresher.jax

    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    data_sharding = NamedSharding(mesh, PartitionSpec("data"))
    replicated = NamedSharding(mesh, PartitionSpec())
    lr = cfg["lr"]

    def loss_fn(params: dict[str, Any], batch: dict[str, Any]) -> Any:
        h = jax.nn.relu(batch["image"] @ params["w1"] + params["b1"])
        logits = h @ params["w2"] + params["b2"]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), batch["label"][:, None], axis=1))

    @jax.jit
    def step(params: dict[str, Any], batch: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss

    loader = _loader(cfg, th.ShardByJaxProcess(drop_remainder=True))
    steps_per_epoch = len(loader) // cfg["epochs"]
    batches = thresher.jax.global_batches(iter(loader), data_sharding, prefetch=2)
    params = jax.device_put(_init_params(cfg["seed"]), replicated)
    mngr = ocp.CheckpointManager(cfg["checkpoint_dir"])
    start = 0
    if cfg.get("restore_step") is not None:
        start = cfg["restore_step"]
        abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=replicated), params)
        restored = mngr.restore(start, args=ocp.args.Composite(
            params=ocp.args.StandardRestore(abstract), data=thresher.jax.CheckpointRestore(batches)))
        params = restored["params"]
    losses: dict[int, float] = {}
    records, t0 = 0, time.perf_counter()
    for t, batch in enumerate(batches, start=start + 1):
        params, loss = step(params, batch)
        losses[t] = float(np.asarray(loss.addressable_data(0)))
        records += int(batch["label"].shape[0])
        if t % steps_per_epoch == 0 and jax.process_index() == 0:
            print(f"  epoch {t // steps_per_epoch}: loss {losses[t]:.4f}", flush=True)
        if t == cfg.get("save_step"):
            mngr.save(t, args=ocp.args.Composite(params=ocp.args.StandardSave(params),
                                                 data=thresher.jax.CheckpointSave(batches)))
            mngr.wait_until_finished()
            if jax.process_index() == 0:
                print(f"  step {t} (mid-epoch): saved the parameters and the iterator with Orbax", flush=True)
    elapsed = time.perf_counter() - t0
    mngr.close()
    host = jax.tree.map(lambda a: np.asarray(a.addressable_data(0)), params)
    right = total = 0
    for b in _loader(cfg, th.ShardOptions(0, 1), train=False):  # every process evaluates the whole test set
        h = np.maximum(b["image"] @ host["w1"] + host["b1"], 0)
        right += int(((h @ host["w2"] + host["b2"]).argmax(1) == b["label"]).sum())
        total += len(b["label"])
    return {"losses": losses, "accuracy": right / total, "records_per_s": records / max(elapsed, 1e-9),
            "devices": jax.device_count(), "processes": jax.process_count()}


def _child(process_id: int, cfg: dict[str, Any]) -> int:
    """Entry point of one of several processes: join the job, train, write the result."""
    import jax

    n = cfg["processes"]
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{cfg['port']}", num_processes=n,
                               process_id=process_id, initialization_timeout=120,
                               heartbeat_timeout_seconds=20, shutdown_timeout_seconds=20)
    result = train(cfg)
    if process_id == 0:
        with open(cfg["result"], "w") as f:
            json.dump(result, f)
    jax.distributed.shutdown()
    return 0


def _run_processes(cfg: dict[str, Any], n: int, timeout_s: float = 600) -> dict[str, Any]:
    cfg = dict(cfg, processes=n, port=_free_port(), result=os.path.join(cfg["checkpoint_dir"], f"result-{n}.json"))
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
    code = ("import sys, json; from thresher.demo.jax_demo import _child; "
            "sys.exit(_child(int(sys.argv[1]), json.loads(sys.argv[2])))")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i), json.dumps(cfg)], env=env,
                              stdout=None if i == 0 else subprocess.DEVNULL, start_new_session=True)
             for i in range(n)]
    try:
        deadline = time.monotonic() + timeout_s
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        if any(p.returncode for p in procs):
            raise RuntimeError(f"the demo's processes exited with {[p.returncode for p in procs]}")
        with open(cfg["result"]) as f:
            out = json.load(f)
        out["losses"] = {int(k): v for k, v in out["losses"].items()}
        return out
    finally:
        for p in procs:  # nothing outlives the demo
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def run(args: Any) -> int:
    """Runs the JAX demo; ``args`` are thresher.demo's parsed arguments."""
    from thresher._optional import require
    from thresher.demo.digits import write_digits

    for module in ("jax", "orbax.checkpoint"):
        require(module, "the JAX demo (--jax, --processes)", extra="demo")

    data_dir = args.data_dir  # thresher.demo.main made it (and removes it unless asked to keep it)
    train_path, test_path = write_digits(data_dir)
    checkpoint_dir = os.path.join(data_dir, f"checkpoints-{os.getpid()}")
    processes = max(1, args.processes)
    restore_processes = args.restore_processes or processes
    steps_per_epoch = (1500 // args.batch_size)
    save_step = steps_per_epoch * (args.epochs // 2) + steps_per_epoch // 2  # mid-epoch
    cfg = {"train_path": train_path, "test_path": test_path, "checkpoint_dir": checkpoint_dir, "seed": args.seed,
           "epochs": args.epochs, "batch_size": args.batch_size, "workers": args.workers, "lr": args.lr}
    print(f"wrote the digits to {data_dir}; global batch {args.batch_size}, {args.epochs} epochs")

    def launch(n: int, **extra: Any) -> dict[str, Any]:
        if n == 1 and processes == 1 and restore_processes == 1:
            return train(dict(cfg, **extra))  # one process: this one
        return _run_processes(dict(cfg, **extra), n)

    print(f"run 1: training on {processes} JAX process(es), Orbax checkpoint at step {save_step}")
    first = launch(processes, save_step=save_step)
    where = ("a fresh loader and model in this process" if processes == restore_processes == 1
             else f"{restore_processes} fresh JAX process(es)")
    print(f"run 2: {where}, restoring step {save_step} with Orbax and training on")
    second = launch(restore_processes, restore_step=save_step)
    after = sorted(second["losses"])
    a = np.array([first["losses"][t] for t in after])
    b = np.array([second["losses"][t] for t in after])
    identical = bool(np.array_equal(a, b))
    if identical:
        verdict = f"the loss curve after the restore is identical, bit for bit ({len(after)} steps)"
    else:
        verdict = (f"the loss curve after the restore differs by at most {np.abs(a - b).max():.2e} over "
                   f"{len(after)} steps")
        if restore_processes != processes:
            verdict += " (the data is identical; another device count sums floats in another order)"
    print(verdict)
    print(f"test accuracy {second['accuracy']:.3f} (run 1: {first['accuracy']:.3f}); "
          f"{first['records_per_s']:,.0f} records/s in run 1 on {first['devices']} device(s), "
          f"{first['processes']} process(es), training included")
    ok = identical or (restore_processes != processes and float(np.abs(a - b).max()) < 1e-4)
    return 0 if ok else 1
