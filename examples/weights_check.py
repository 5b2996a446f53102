"""Checks the examples share: a digest of a model's weights, and whether
every rank of the job holds bitwise the same weights.

Data parallelism keeps one replica per rank, and the replicas must stay
identical (the broadcast at the start, the same summed gradients at every
step); a digest gathered from every rank is the cheapest way to prove it
on a whole model. Imported from the examples' own folder.
"""
import hashlib

import numpy as np

DIGEST_BYTES = hashlib.sha256().digest_size


def weights_digest(weights):
    """SHA-256 over the weights' bytes, in order: the same on two ranks
    exactly when every tensor is bitwise the same."""
    h = hashlib.sha256()
    for w in weights:
        h.update(np.ascontiguousarray(w).tobytes())
    return h.digest()


def ranks_agree(weights, allgather):
    """Whether every rank's weights_digest equals every other's.
    Collective: every rank of the job must call it. `allgather` is the
    frontend's (tntcomm.allgather): one uint8 array in, every rank's
    arrays concatenated out."""
    mine = np.frombuffer(weights_digest(weights), np.uint8).copy()
    every = np.asarray(allgather(mine)).reshape(-1, DIGEST_BYTES)
    return bool((every == every[0]).all())
