// The torch.distributed backend "tnt": a c10d::Backend over one
// libtntcomm communicator, which torch wraps in its own ProcessGroup (the
// design of torch 2.x: the group has a registered backend per device type,
// so group names, subgroups, DeviceMesh, DTensor, FSDP2 and functional
// collectives work, and "cpu:tnt,cuda:nccl" pairs it with another).
// Every operation is posted with the library's nonblocking call on the
// calling thread and finished by the group's completion thread or by a
// Work::wait() that gets there first, or, if blocking (async_op=False),
// on the calling thread before the call returns (tnt_work.hpp). CPU
// and CUDA tensors (the library stages device memory through pinned host
// memory); one tensor per process and call, as Gloo and MPI take.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "tnt/tnt.h"
#include "tensor_map.hpp"
#include "tnt_work.hpp"

namespace tnt_torch {

class ProcessGroupTnt : public c10d::Backend {
 public:
  ProcessGroupTnt(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                  int size, std::chrono::milliseconds timeout);
  ~ProcessGroupTnt() override;

  const std::string getBackendName() const override { return "tnt"; }
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;
  // A later group timeout (dist's _set_pg_timeout): operations posted
  // after it end when it passes, if it is shorter than the library's
  // deadline, which was fixed when the group was made.
  void setTimeout(std::chrono::milliseconds timeout) override;

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors,
      const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output, at::Tensor& input,
      std::vector<int64_t>& output_split_sizes,
      std::vector<int64_t>& input_split_sizes,
      const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors,
                                      int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors,
                                      int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(
      std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts) override;

 private:
  // async_op: the options' asyncOp; false: a blocking call, finished on
  // the calling thread before it returns (tnt_work.hpp).
  c10::intrusive_ptr<WorkTnt> make_work(
      c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
      const std::vector<at::Tensor>& inputs,
      std::chrono::milliseconds timeout, bool async_op);
  // The work of a call on one tensor: b (its staging tensor or itself)
  // copied back into tensors[0] afterwards if the call `writes` it, kept
  // alive, and one request slot; these two not where the op
  // `has_blocking` (uses the library's blocking call when direct(),
  // below) and the work is direct: it runs before the op returns.
  c10::intrusive_ptr<WorkTnt> single_work(
      c10d::OpType type, const char* name, std::vector<at::Tensor>& tensors,
      const Buf& b, bool writes, std::chrono::milliseconds timeout,
      bool async_op, bool has_blocking = false);
  // Posts n library calls (one(i, &request)) into one work; if one is
  // refused, those in flight are finished by the completion thread and
  // the refusal is thrown.
  c10::intrusive_ptr<c10d::Work> post_each(
      c10::intrusive_ptr<WorkTnt> work, size_t n,
      const std::function<tnt_result_t(size_t, tnt_request_t*)>& one);
  // A blocking call whose deadline is the library's own (no shorter one
  // of the call or the group): the op may use the library's blocking
  // call, which leaves the library's progress thread asleep (a
  // nonblocking post wakes it), and hand its result to ran().
  static bool direct(const WorkTnt& work)
  {
    return work.blocking && work.timeout_ms == 0;
  }
  // The library's blocking call gave rc: throws its message if an error,
  // else completes the work here (copy-backs included).
  c10::intrusive_ptr<c10d::Work> ran(c10::intrusive_ptr<WorkTnt> work,
                                     tnt_result_t rc);
  // An async work to the completion thread (and to be finished by
  // wait() if the caller gets there first: tnt_work.hpp).
  void queue(const c10::intrusive_ptr<WorkTnt>& work);
  // Throws the library's message if rc is an error; else queues the work
  // for the completion thread, or finishes a blocking one here.
  c10::intrusive_ptr<c10d::Work> post(c10::intrusive_ptr<WorkTnt> work,
                                      tnt_result_t rc);

  // The deadline of an operation posted now with its own `timeout`
  // (kUnsetTimeout: the group's); 0 where the library's own deadline,
  // set at creation, comes first.
  std::chrono::milliseconds deadline_of(std::chrono::milliseconds timeout)
      const;

  tnt_comm_t comm_ = nullptr;
  const std::chrono::milliseconds lib_timeout_;  // the library's deadline
  std::atomic<int64_t> timeout_ms_;              // the group's, now
  std::unique_ptr<Completer> completer_;
};

}  // namespace tnt_torch
