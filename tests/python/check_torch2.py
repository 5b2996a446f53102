"""What users build on torch 2.x's process groups, run over the backend
"tnt" and over "gloo" (the reference) in the same run, the results
compared: "cpu:tnt,cuda:gloo" strings, new_group and destroy_process_group of a
subgroup with the world used again, init_device_mesh("cpu") in 1-D and
2-D, DTensor distribute_tensor / redistribute / full_tensor, FSDP2
fully_shard training, torch.distributed._functional_collectives, the
object collectives, the coalescing manager and the coalesced ops,
PREMUL_SUM, and DDP with a comm hook that chains futures.

    python check_torch2.py [RANKS]      (default 4; 2-D meshes need even)

Each backend's job spawns RANKS ranks that run every case and save what
they computed; then every tensor of "tnt" must equal gloo's (the
parameters trained by FSDP2 and DDP to 1e-6: the two sum in different
orders), and every rank's replicated results must be equal.
Exit status 0 when all agree.
"""
import datetime
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import tntcomm.torch  # noqa: F401  registers "tnt"

BACKENDS = ("tnt", "gloo")


def vals(rank, n, salt=0):
    """Rank `rank`'s distinct small integers as floats: sums are exact."""
    return (torch.arange(n, dtype=torch.float32) + 100 * rank + salt) % 251


# ---- the cases: each returns {name: tensor} of this rank's results ------

def init_string(backend):
    """The world's backend string: "tnt" serves CPU tensors beside another
    backend for CUDA ones (gloo: this torch may lack NCCL, and gloo's
    CUDA backend is made without a GPU)."""
    return "cpu:tnt,cuda:gloo" if backend == "tnt" else "cpu:gloo"


def case_strings(rank, size, backend):
    out = {}
    pg = dist.distributed_c10d._get_default_group()
    assert str(dist.get_backend()) == init_string(backend), \
        dist.get_backend()
    name = pg._get_backend(torch.device("cpu")).name()
    assert name == backend, (name, backend)
    if backend == "tnt":
        name = pg._get_backend(torch.device("cuda")).name()
        assert name == "gloo", name
    t = vals(rank, 9)
    dist.all_reduce(t)
    out["strings.all_reduce"] = t
    return out


def case_subgroups(rank, size, backend):
    out = {}
    for k in range(2):  # made, used, destroyed, then again
        ranks = [r for r in range(size) if r % 2 == k % 2]
        sub = dist.new_group(ranks, backend=backend)
        if rank in ranks:
            t = vals(rank, 5, k)
            dist.all_reduce(t, group=sub)
            out["sub%d.all_reduce" % k] = t
            o = [torch.empty(3) for _ in ranks]
            dist.all_gather(o, vals(rank, 3, k), group=sub)
            out["sub%d.all_gather" % k] = torch.stack(o)
            dist.destroy_process_group(sub)
        w = vals(rank, 7, k)
        dist.all_reduce(w)  # the world, after the subgroup is gone
        out["world%d.all_reduce" % k] = w
    return out


def case_mesh(rank, size, backend):
    from torch.distributed.device_mesh import init_device_mesh
    out = {}
    m1 = init_device_mesh("cpu", (size,), mesh_dim_names=("dp",))
    t = vals(rank, 6)
    dist.all_reduce(t, group=m1.get_group("dp"))
    out["mesh1d.all_reduce"] = t
    if size % 2 == 0:
        m2 = init_device_mesh("cpu", (2, size // 2),
                              mesh_dim_names=("dp", "tp"))
        for dim in ("dp", "tp"):
            g = m2.get_group(dim)
            name = g._get_backend(torch.device("cpu")).name()
            assert name == backend, (name, backend)
            t = vals(rank, 4, 7)
            dist.all_reduce(t, group=g)
            out["mesh2d.%s.all_reduce" % dim] = t
            o = torch.empty(4 * g.size())
            dist.all_gather_into_tensor(o, vals(rank, 4), group=g)
            out["mesh2d.%s.all_gather" % dim] = o
    return out


def case_dtensor(rank, size, backend):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import (DTensor, Partial, Replicate,
                                          Shard, distribute_tensor)
    out = {}
    full = torch.arange(size * 6 * 5, dtype=torch.float32).reshape(
        size * 6, 5)
    meshes = [("1d", init_device_mesh("cpu", (size,)), [Shard(0)])]
    if size % 2 == 0:
        meshes.append(("2d", init_device_mesh("cpu", (2, size // 2)),
                       [Shard(0), Shard(1)]))
    for label, mesh, places in meshes:
        d = distribute_tensor(full, mesh, places)
        out["dtensor%s.local" % label] = d.to_local().clone()
        r = d.redistribute(mesh, [Replicate()] * mesh.ndim)
        out["dtensor%s.replicate" % label] = r.to_local().clone()
        out["dtensor%s.full" % label] = d.full_tensor()
        # Partial -> Replicate is an all_reduce, -> Shard a reduce_scatter.
        p = DTensor.from_local(full + rank, mesh, [Partial()] * mesh.ndim)
        out["dtensor%s.partial_sum" % label] = p.redistribute(
            mesh, [Replicate()] * mesh.ndim).to_local().clone()
        out["dtensor%s.partial_shard" % label] = p.redistribute(
            mesh, places).to_local().clone()
        # a matmul on sharded operands (a collective inside)
        w = distribute_tensor(torch.ones(5, 3), mesh,
                              [Replicate()] * mesh.ndim)
        out["dtensor%s.matmul" % label] = (d @ w).full_tensor()
    return out


def case_fsdp2(rank, size, backend):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)  # the same model and data on every rank
    model = torch.nn.Sequential(torch.nn.Linear(13, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 7))
    mesh = init_device_mesh("cpu", (size,))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank its data
    for _ in range(5):
        x = torch.randn(8, 13, generator=gen)
        y = torch.randn(8, 7, generator=gen)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return {"fsdp2." + n: p.full_tensor().detach()
            for n, p in model.named_parameters()}


def case_funcol(rank, size, backend):
    import torch.distributed._functional_collectives as funcol
    g = dist.group.WORLD
    out = {}
    out["funcol.all_reduce"] = funcol.all_reduce(vals(rank, 8), "sum", g)
    out["funcol.all_reduce_max"] = funcol.all_reduce(vals(rank, 8), "max", g)
    out["funcol.all_gather"] = funcol.all_gather_tensor(vals(rank, 3), 0, g)
    out["funcol.reduce_scatter"] = funcol.reduce_scatter_tensor(
        vals(rank, 2 * size), "sum", 0, g)
    out["funcol.all_to_all"] = funcol.all_to_all_single(
        vals(rank, 3 * size), None, None, g)
    out["funcol.broadcast"] = funcol.broadcast(vals(rank, 4), 1 % size, g)
    ag = funcol.all_gather_into_tensor_coalesced(
        [vals(rank, 2), vals(rank, 3, 1)], g)
    out.update({"funcol.ag_coalesced%d" % i: t for i, t in enumerate(ag)})
    rs = funcol.reduce_scatter_tensor_coalesced(
        [vals(rank, size), vals(rank, 2 * size, 3)], "sum", [0, 0],
        g)
    out.update({"funcol.rs_coalesced%d" % i: t for i, t in enumerate(rs)})
    return {k: funcol.wait_tensor(v) if isinstance(v, torch.Tensor) else v
            for k, v in out.items()}


def case_objects(rank, size, backend):
    out = {}
    objs = [None] * size
    dist.all_gather_object(objs, {"rank": rank, "s": "x" * rank})
    assert objs == [{"rank": r, "s": "x" * r} for r in range(size)], objs
    out["objects.all_gather"] = torch.tensor([o["rank"] for o in objs])
    lst = [("from", rank), list(range(rank + 3))]
    dist.broadcast_object_list(lst, src=size - 1)
    assert lst == [("from", size - 1), list(range(size + 2))], lst
    out["objects.broadcast"] = torch.tensor(lst[1])
    got = [None]
    dist.scatter_object_list(got, [{"to": r} for r in range(size)]
                             if rank == 0 else None, src=0)
    assert got[0] == {"to": rank}, got
    gathered = [None] * size if rank == 0 else None
    dist.gather_object(rank * 10, gathered, dst=0)
    if rank == 0:
        assert gathered == [r * 10 for r in range(size)], gathered
    return out


def case_coalesced(rank, size, backend):
    from torch.distributed.distributed_c10d import _coalescing_manager
    out = {}
    ts = [vals(rank, 5), vals(rank, 1, 2), vals(rank, 11, 4)]
    with _coalescing_manager(async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    out.update({"cm.all_reduce%d" % i: t for i, t in enumerate(ts)})
    outs = [torch.empty(3 * size), torch.empty(2 * size)]
    with _coalescing_manager(async_ops=True) as cm:
        dist.all_gather_into_tensor(outs[0], vals(rank, 3))
        dist.all_gather_into_tensor(outs[1], vals(rank, 2, 5))
    cm.wait()
    out.update({"cm.all_gather%d" % i: t for i, t in enumerate(outs)})
    rs = [torch.empty(2), torch.empty(3)]
    with _coalescing_manager(async_ops=True) as cm:
        dist.reduce_scatter_tensor(rs[0], vals(rank, 2 * size))
        dist.reduce_scatter_tensor(rs[1], vals(rank, 3 * size, 1))
    cm.wait()
    out.update({"cm.reduce_scatter%d" % i: t for i, t in enumerate(rs)})
    ac = [vals(rank, 4, 9), vals(rank, 6, 8)]
    dist.all_reduce_coalesced(ac)
    out.update({"all_reduce_coalesced%d" % i: t for i, t in enumerate(ac)})
    # PREMUL_SUM: gloo lacks it, so its reference is the SUM of the
    # tensors multiplied here.
    factor = 0.25
    for kind in ("double", "tensor"):
        t = vals(rank, 7, 3)
        if backend == "tnt":
            f = factor if kind == "double" else torch.tensor([factor])
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(f))
        else:
            t.mul_(factor)
            dist.all_reduce(t)
        out["premul_sum.%s" % kind] = t
    rs = torch.empty(3)
    inp = vals(rank, 3 * size, 6)
    if backend == "tnt":
        dist.reduce_scatter_tensor(rs, inp, op=dist._make_nccl_premul_sum(
            factor))
    else:
        dist.reduce_scatter_tensor(rs, inp * factor)
    out["premul_sum.reduce_scatter"] = rs
    return out


def case_ddp_hook(rank, size, backend):
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(1)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(6, 10),
                                    torch.nn.Tanh(), torch.nn.Linear(10, 2)),
                bucket_cap_mb=0.0001)  # several buckets

    def hook(state, bucket):
        # Average, then halve in a chained future: DDP waits on the chain.
        buf = bucket.buffer()
        fut = dist.all_reduce(buf, async_op=True).get_future()

        def halve(f):
            return f.value()[0].div_(2 * size)
        return fut.then(halve)

    model.register_comm_hook(None, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(7 + rank)
    for _ in range(3):
        x = torch.randn(5, 6, generator=gen)
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
    return {"ddp_hook." + n: p.detach().clone()
            for n, p in model.module.named_parameters()}


CASES = [case_strings, case_subgroups, case_mesh, case_dtensor, case_fsdp2,
         case_funcol, case_objects, case_coalesced, case_ddp_hook]


def run(rank, size, backend, tmp):
    dist.init_process_group(init_string(backend),
                            init_method="file://" + os.path.join(
                                tmp, backend + ".init"),
                            rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=120))
    results = {}
    for case in CASES:
        results.update(case(rank, size, backend))
        dist.barrier()
    torch.save(results, os.path.join(tmp, "%s.%d.pt" % (backend, rank)))
    dist.destroy_process_group()


def main():
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    with tempfile.TemporaryDirectory() as tmp:
        for backend in BACKENDS:
            ctx = mp.spawn(run, args=(size, backend, tmp), nprocs=size,
                           join=False)
            while not ctx.join():
                pass
        bad = 0
        count = 0
        for rank in range(size):
            got = torch.load(os.path.join(tmp, "tnt.%d.pt" % rank))
            want = torch.load(os.path.join(tmp, "gloo.%d.pt" % rank))
            if set(got) != set(want):
                print("rank %d: tnt made %s, gloo %s"
                      % (rank, sorted(set(got) ^ set(want)), ""))
                bad += 1
            for name in sorted(want):
                if name not in got:
                    continue
                count += 1
                a, b = got[name], want[name]
                if name.startswith(("fsdp2.", "ddp_hook.")):
                    # trained: float sums in another order than gloo's
                    ok = a.shape == b.shape and torch.allclose(
                        a, b, rtol=0, atol=1e-6)
                else:
                    ok = a.dtype == b.dtype and torch.equal(a, b)
                if not ok:
                    bad += 1
                    print("rank %d: %s differs from gloo's:\n  tnt  %s\n"
                          "  gloo %s" % (rank, name, a, b))
        # the replicated results agree across ranks
        first = torch.load(os.path.join(tmp, "tnt.0.pt"))
        for rank in range(1, size):
            other = torch.load(os.path.join(tmp, "tnt.%d.pt" % rank))
            for name in first:
                if name.startswith(("fsdp2.", "ddp_hook.", "funcol.all_red",
                                    "strings.", "dtensor1d.full",
                                    "dtensor1d.replicate")) and \
                        not torch.equal(first[name], other[name]):
                    bad += 1
                    print("tnt: %s differs between rank 0 and %d"
                          % (name, rank))
    if bad:
        print("%d of %d results differ" % (bad, count))
        sys.exit(1)
    print("%d results of %d ranks: tnt equals gloo (trained parameters "
          "to 1e-6)"
          % (count, size))


if __name__ == "__main__":
    main()
