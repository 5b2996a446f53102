// One operation of the "tnt" process group as torch sees it (c10d::Work),
// and the thread that finishes them.
//
// CUDA tensors: the library copies device memory into pinned host memory
// when the call is posted, so the work queued on the tensor's current
// stream is waited for (on the host: an event) before the post; the
// library copies the result back when it sees the request finished, and
// the completion thread runs the copy-backs of staging tensors and waits
// for them before the Work and its Future complete. Work::wait() thus
// returns with the result in device memory, and the Future, being one of
// that device, makes the streams of its callbacks wait for it too.
//
// Rule: an operation is posted at once on the calling thread (the
// library's nonblocking call), so that every rank posts in its program
// order, which is what matches collectives across ranks; it is finished
// on the process group's completion thread, which watches the library's
// requests, copies results back where a staging tensor was used, and then
// completes the Work and its Future. DDP's reducer and comm hooks only
// look at the Future, nobody calls wait() for them, so completion must
// not depend on the user waiting. Works complete in whatever order their
// requests do: a receive posted early must not hold back a collective
// posted after it (the sender may need that collective's result first).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "tnt/tnt.h"

namespace tnt_torch {

class WorkTnt : public c10d::Work {
 public:
  // device: where the call's tensors are (CPU, or a CUDA device: then
  // the Future is one of that device, as torch's CUDA backends make).
  WorkTnt(int rank, c10d::OpType type, const char* profiling_title,
          std::vector<at::Tensor> outputs,
          const c10::optional<std::vector<at::Tensor>>& inputs,
          c10::Device device);
  ~WorkTnt() override;

  // Requests to wait for, in order; freed when finished.
  std::vector<tnt_request_t> requests;
  // Run after every request succeeded (copy-backs from staging tensors).
  std::function<void()> after;
  // Staging tensors and inputs that must live until the requests finish.
  std::vector<at::Tensor> keep;
  // The op's own deadline (ms, <= 0: the process group's).
  int64_t timeout_ms = 0;
  // For recv: the rank that sent.
  int source = -1;
  // The operation's name in messages ("all_reduce").
  std::string name;
  // The call's device (CPU, or the CUDA device of its tensors).
  const c10::Device device;

  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  int sourceRank() const override;

  // Completion thread only: true once every request has finished (each
  // is freed as it does; the first error is kept).
  bool poll();
  // The first unfinished request (nullptr if none).
  tnt_request_t unfinished() const;
  // When the op's own deadline passes (steady clock, ms; 0: none).
  int64_t deadline_ms = 0;
  std::exception_ptr error;
  // Called once, by the completion thread.
  void complete(std::exception_ptr error);

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<at::ivalue::Future> future_;
};

// The completion thread of one process group.
class Completer {
 public:
  explicit Completer(tnt_comm_t comm, int rank);
  ~Completer();  // finishes what is queued, then stops
  void push(c10::intrusive_ptr<WorkTnt> work);

 private:
  void run();
  void finish(WorkTnt& work);
  void expire(WorkTnt& work);

  tnt_comm_t comm_;
  int rank_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<WorkTnt>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// Wait on the host for the work queued so far on the current stream of
// device (nothing for the CPU).
void wait_for_stream(c10::Device device);

// The library's message for a failed call: "tnt: <what>: <text>".
std::string error_text(const char* what, tnt_result_t rc);

}  // namespace tnt_torch
