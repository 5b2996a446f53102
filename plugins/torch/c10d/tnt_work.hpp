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
//
// A blocking call (the options' asyncOp false: dist.all_reduce(t) with
// async_op=False, which waits right after) is finished on the calling
// thread instead: it waits in the library for its own requests and
// completes the Work before returning it, as torch lets a backend that
// "syncs at the C++ level" do. The completion thread never sees such a
// work (one thread per request), and the call costs no hand-over to that
// thread and no wake-up of the caller by it.
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
  // A blocking call (asyncOp false): finished by wait_here when posted.
  bool blocking = false;
  // For recv: the rank that sent; from any source: set by poll() once
  // the receive completed (the user reads it after wait()).
  int source = -1;
  bool any_source = false;
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
  // A blocking call, on the calling thread, in place of the completion
  // thread: waits in the library for every request (the op's deadline
  // as the completion thread keeps it: past it, comm is aborted), then
  // completes the work as finish_work does. Never throws; the work holds
  // the error.
  void wait_here(tnt_comm_t comm, int rank);
  // The first unfinished request (nullptr if none).
  tnt_request_t unfinished() const;
  // When the op's own deadline passes (steady clock, ms; 0: none).
  int64_t deadline_ms = 0;
  std::exception_ptr error;
  // Called once, by the completion thread or wait_here.
  void complete(std::exception_ptr error);
  // The op's deadline passed: the error, and comm aborted (an operation
  // cannot be withdrawn on one rank alone); its requests then fail.
  void expire(tnt_comm_t comm, int rank);

 private:
  // A request finished with rc: the first error kept, the sender of a
  // receive from any source read, the request freed.
  void settle(tnt_request_t& r, tnt_result_t rc);

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

  tnt_comm_t comm_;
  int rank_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<WorkTnt>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// After every request finished: the copy-backs (work.after; waited for
// on a CUDA device), then the Work and its Future completed, with the
// first error if any.
void finish_work(WorkTnt& work);

// Wait on the host for the work queued so far on the current stream of
// device (nothing for the CPU).
void wait_for_stream(c10::Device device);

// The library's message for a failed call: "tnt: <what>: <text>".
std::string error_text(const char* what, tnt_result_t rc);

}  // namespace tnt_torch
