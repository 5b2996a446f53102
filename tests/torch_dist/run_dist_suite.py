"""PyTorch's own distributed test suite
(torch/testing/_internal/distributed/distributed_test.py, shipped inside
torch's wheel) run against a backend, the way PyTorch's
test/distributed/test_distributed_spawn.py runs it for gloo, nccl and ucc:
every test spawns WORLD_SIZE ranks that meet through a temporary file.

    BACKEND=tnt WORLD_SIZE=3 python3 run_dist_suite.py [-k PATTERN ...]

BACKEND=gloo runs the same tests against Gloo, the reference.

For "tnt", the suite is told what the backend implements, through the
suite's own tables (DistTestCases): it is a plugin backend, and it does
DDP and subgroups as Gloo does on CPU (a receive from any source too,
which the tables assume unless a backend is listed as lacking it). GPU
and CUDA features are not claimed, so those tests skip, as they do for
gloo on this machine.
"""
import os
import sys

# expecttest: the real one where installed (.venv has it), else the
# stand-in beside this file.
sys.path.append(os.path.dirname(os.path.abspath(__file__)))
# With CI set in the environment, torch's test harness writes XML reports
# through the xmlrunner module, which is not installed; the report is not
# used here.
os.environ.pop("CI", None)

import torch.distributed as dist  # noqa: E402

if not dist.is_available():
    print("torch.distributed is not available in this torch build")
    sys.exit(77)

BACKEND = os.environ.setdefault("BACKEND", "tnt")
os.environ.setdefault("WORLD_SIZE", "2")

if BACKEND == "tnt":
    import tntcomm.torch  # noqa: F401,E402  registers "tnt"
    from tntcomm import _torch_backend  # noqa: E402
    if not _torch_backend.available():
        print("the torch.distributed backend 'tnt' is not built: %s"
              % _torch_backend.MISSING)
        sys.exit(77)

from torch.testing._internal.common_distributed import (  # noqa: E402
    DistTestCases)

if BACKEND == "tnt":
    for feature in ("plugin", "ddp", "subgroup"):
        DistTestCases.backend_feature[feature].add("tnt")

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa
    DistributedTest, TestDistBackend)


class TestDistBackendWithSpawn(TestDistBackend,
                               DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    run_tests()
