# Started by torchrun as each worker: replaces itself with the C program
# given as arguments, which inherits torchrun's RANK, WORLD_SIZE,
# LOCAL_RANK, MASTER_ADDR and MASTER_PORT.
import os
import sys

os.execv(sys.argv[1], sys.argv[1:])
