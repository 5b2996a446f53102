// Rendezvous through the c10d Store the process group is given: rank 0
// picks a listening address and a job key and publishes them; the others
// read them. So init_method env://, tcp://, file:// and torchrun all work
// without any TNT_* variable.
#pragma once

#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace tnt_torch {

struct Rendezvous {
    std::string root_addr;  // "ip:port" where rank 0's bootstrap listens
    std::string job_key;    // shared secret of this process group
};

// Collective over the group's ranks (every rank calls it once per
// process group; the store is the group's own, prefixed by torch).
Rendezvous rendezvous(c10d::Store& store, int rank);

}  // namespace tnt_torch
