"""init_process_group("tnt") with no arguments, as a user writes it under
a launcher (torchrun, tnt-run, mpirun with MASTER_ADDR/PORT): the ranks
meet through env://, sum their rank numbers, and each prints a line."""
import torch
import torch.distributed as dist

import tntcomm.torch  # noqa: F401  registers "tnt"

dist.init_process_group("tnt")
rank, size = dist.get_rank(), dist.get_world_size()
t = torch.full((5,), float(rank + 1))
dist.all_reduce(t)
want = size * (size + 1) / 2
assert torch.equal(t, torch.full((5,), want)), t
dist.barrier()
print("rank %d of %d: launched, sum %g" % (rank, size, t[0]), flush=True)
dist.destroy_process_group()
