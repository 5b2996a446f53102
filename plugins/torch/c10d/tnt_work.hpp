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
// order, which is what matches collectives across ranks. Works complete in
// whatever order their requests do: a receive posted early must not hold
// back a collective posted after it (the sender may need that
// collective's result first).
//
// A blocking call (the options' asyncOp false: dist.all_reduce(t) with
// async_op=False, which waits right after) is finished on the calling
// thread before the call returns: it waits in the library for its own
// requests and completes the Work, as torch lets a backend that "syncs at
// the C++ level" do. The completion thread never sees such a work.
//
// Any other work goes to the process group's completion thread, and
// whoever gets to its requests first finishes it: the completion thread,
// or a thread in Work::wait(). A request may be used by one thread at a
// time (tnt.h), so each work has one owner at a time (WorkTnt::owner):
// free; the completion thread, only while it is inside a library call on
// the work's requests (a test, or one slice of a wait) and never longer;
// a caller in wait(), from its claim until the work is finished (or its
// wait's own timeout passed: then it lets go, and the completion thread
// carries on); done, after which nobody touches its requests and the one
// that finished it completes the Work and its Future (callbacks run once,
// on that thread). A wait() that finds the completion thread inside a
// call sleeps until it lets go (at most one slice) or completes the work.
//
// Which works the completion thread waits on in the library: those whose
// Future was handed out (DDP's buckets and comm hooks, get_future(): they
// complete without anyone calling wait(), so they must complete
// promptly), and every work while the group is destroyed. A work whose
// Future nobody asked for is only tested by the completion thread, every
// 1 ms while such works are pending, so that a caller arriving at wait()
// finds it free, waits in the library itself and is woken by the library
// alone: no hand-over to the completion thread and no wake-up of the
// caller by it (two thread wake-ups per work before). A work nobody
// waits for still completes within a slice of its requests finishing.
#pragma once

#include <atomic>
#include <chrono>
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

class Completer;

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
  // Made on the first call (tnt_work.cpp says why); marks the work one
  // the completion thread waits on (see the rule).
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  int sourceRank() const override;
  // Finishes the work on the calling thread if nobody owns it yet (see
  // the rule); timeout (kNoTimeout: none) bounds this wait only: past it,
  // "timed out" is thrown and the operation goes on. Rethrows the work's
  // error, as c10d::Work::wait does.
  bool wait(std::chrono::milliseconds timeout = ::kNoTimeout) override;

  // Who may use the requests now (the rule above).
  enum Owner { kFree = 0, kCompleter = 1, kCaller = 2, kDone = 3 };
  std::atomic<int> owner{kFree};
  // The completion thread waits on it in the library (its Future is out).
  std::atomic<bool> eager{false};
  // A wait() sleeps until the completion thread lets go.
  std::atomic<bool> wanted{false};
  // The group's communicator and completion thread, for a work that may
  // be finished by wait() (both outlive every unfinished work: the group
  // finishes them all before it goes).
  tnt_comm_t comm = nullptr;
  Completer* completer = nullptr;

  // Completion thread: owner kFree -> kCompleter; false if someone else
  // owns it.
  bool hold();
  // Completion thread: back to kFree, waking a wait() that wants it.
  void release();

  // The owner only: true once every request has finished (each is freed
  // as it does; the first error is kept).
  bool poll();
  // The owner only: waits in the library for every request, keeping the
  // op's deadline (past it, comm is aborted and the requests fail); true
  // once all finished, false if `until_ms` (steady clock, 0: none) passed
  // first.
  bool drive(tnt_comm_t comm, int rank, int64_t until_ms);
  // A blocking call, on the calling thread, in place of the completion
  // thread: drive() to the end, then completes the work as finish_work
  // does. Never throws; the work holds the error.
  void wait_here(tnt_comm_t comm, int rank);
  // The first unfinished request (nullptr if none).
  tnt_request_t unfinished() const;
  // When the op's own deadline passes (steady clock, ms; 0: none); set
  // when the op is posted.
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

  // The Future with the work's result or error (getFuture() says why it
  // is made late).
  void settle_future(c10::ivalue::Future& future,
                     const std::exception_ptr& failed);

  std::vector<at::Tensor> outputs_;
  std::mutex future_lock_;  // future_, completed_here_, failed_with_
  c10::intrusive_ptr<at::ivalue::Future> future_;  // none until asked for
  bool completed_here_ = false;  // complete() ran
  std::exception_ptr failed_with_;
};

// The completion thread of one process group.
class Completer {
 public:
  explicit Completer(tnt_comm_t comm, int rank);
  ~Completer();  // finishes what is queued, then stops
  void push(c10::intrusive_ptr<WorkTnt> work);
  // Look again at once: a work's Future was handed out, or a wait() let
  // go of a work it had claimed.
  void poke();
  // A wait() finished work (owner kCaller): marks it done; wakes the
  // thread if the group is being destroyed (it waits for such works).
  void finished_by_caller(WorkTnt& work);

 private:
  void run();
  // How the thread sleeps between rounds.
  enum Sleep { kAwake, kTimed, kUntimed };

  tnt_comm_t comm_;
  int rank_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<WorkTnt>> queue_;
  bool stop_ = false;
  bool poked_ = false;
  Sleep sleep_ = kAwake;
  std::thread thread_;
};

// After every request finished: the copy-backs (work.after; waited for
// on a CUDA device), then the Work and its Future completed, with the
// first error if any.
void finish_work(WorkTnt& work);

// Wait on the host for the work queued so far on the current stream of
// device (nothing for the CPU).
void wait_for_stream(c10::Device device);

// The steady clock in ms (deadlines).
int64_t now_ms();

// The library's message for a failed call: "tnt: <what>: <text>".
std::string error_text(const char* what, tnt_result_t rc);

}  // namespace tnt_torch
