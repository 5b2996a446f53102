// WorkTnt and the completion thread (tnt_work.hpp says the rule).
#include "tnt_work.hpp"

#include <chrono>
#include <stdexcept>

#include <c10/util/Exception.h>

#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace tnt_torch {

std::string error_text(const char* what, tnt_result_t rc)
{
    const char* detail = tnt_last_error();
    std::string s = std::string("tnt: ") + what + " failed: " +
                    tnt_strerror(rc);
    if (detail && *detail)
        s += std::string(" (") + detail + ")";
    return s;
}

WorkTnt::WorkTnt(int rank, c10d::OpType type, const char* profiling_title,
                 std::vector<at::Tensor> outputs,
                 const c10::optional<std::vector<at::Tensor>>& inputs,
                 c10::Device device)
    : c10d::Work(rank, type, profiling_title, inputs),
      device(device),
      outputs_(std::move(outputs))
{
}

void wait_for_stream(c10::Device device)
{
    if (device.is_cpu())
        return;
    // Device-generic (c10's virtual guard): the same source builds
    // against a CPU-only torch, where no CUDA tensor can reach here.
    c10::impl::VirtualGuardImpl impl(device.type());
    c10::Event ev(device.type());
    ev.record(impl.getStream(device));
    ev.synchronize();
}

WorkTnt::~WorkTnt()
{
    // Finished works have freed theirs; this is a post that failed half
    // way (several requests, a later one refused).
    for (tnt_request_t r : requests)
        if (r)
            tnt_request_free(r);
}

std::vector<at::Tensor> WorkTnt::result() { return outputs_; }

// The Future is made by the first getFuture(), not with the work: most
// works are waited for and never asked for one (a blocking call, or
// async_op=True then wait()), and a Future costs its type, its lock and
// its result list on every call. Made after the work completed, it is
// completed here; made before, complete() completes it. future_lock_
// decides which of the two does, so that exactly one does.
//
// Whoever holds the Future may never call wait() (DDP's reducer, comm
// hooks): from now on the completion thread waits on the work in the
// library, so that it completes as soon as its requests do.
c10::intrusive_ptr<c10::ivalue::Future> WorkTnt::getFuture()
{
    c10::intrusive_ptr<c10::ivalue::Future> future;
    bool settle_here = false;
    std::exception_ptr failed;
    {
        std::lock_guard<std::mutex> lock(future_lock_);
        if (!future_) {
            std::vector<c10::Device> devices;
            if (!device.is_cpu())
                devices.push_back(device);
            future_ = c10::make_intrusive<at::ivalue::Future>(
                c10::ListType::create(c10::TensorType::get()), devices);
            settle_here = completed_here_;
            failed = failed_with_;
        }
        future = future_;
    }
    if (settle_here)
        settle_future(*future, failed);
    if (!eager.exchange(true) && completer && owner.load() != kDone)
        completer->poke();
    return future;
}

void WorkTnt::settle_future(c10::ivalue::Future& future,
                            const std::exception_ptr& failed)
{
    if (failed)
        future.setError(failed);
    else
        future.markCompleted(c10::IValue(outputs_));
}

int WorkTnt::sourceRank() const { return source; }

void WorkTnt::complete(std::exception_ptr error)
{
    keep.clear();
    finish(error);  // c10d::Work: wakes wait(), ends the profiling range
    c10::intrusive_ptr<c10::ivalue::Future> future;
    {
        std::lock_guard<std::mutex> lock(future_lock_);
        completed_here_ = true;
        failed_with_ = error;
        future = future_;  // none yet: getFuture() completes it
    }
    if (future)
        settle_future(*future, error);
}

Completer::Completer(tnt_comm_t comm, int rank)
    : comm_(comm), rank_(rank), thread_([this] { run(); })
{
}

Completer::~Completer()
{
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
        poked_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

// A thread sleeping 1 ms between tests of works nobody asked the Future
// of finds this one at its next look: waking it now would cost the
// wake-up that a wait() on the calling thread saves (tnt_work.hpp).
void Completer::push(c10::intrusive_ptr<WorkTnt> work)
{
    bool wake;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        wake = sleep_ == kUntimed || work->eager.load();
        queue_.push_back(std::move(work));
    }
    if (wake)
        cv_.notify_one();
}

void Completer::poke()
{
    {
        std::lock_guard<std::mutex> lock(mutex_);
        poked_ = true;
    }
    cv_.notify_one();
}

// Under the lock: once the work is done, a group being destroyed may
// free this object as soon as its thread sees it, so the notice must be
// the last thing the caller does here.
void Completer::finished_by_caller(WorkTnt& work)
{
    std::lock_guard<std::mutex> lock(mutex_);
    work.owner.store(WorkTnt::kDone);
    if (stop_) {
        poked_ = true;
        cv_.notify_one();
    }
}

int64_t now_ms()
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void WorkTnt::settle(tnt_request_t& r, tnt_result_t rc)
{
    if (rc < 0 && !error)
        error = std::make_exception_ptr(
            std::runtime_error(error_text(name.c_str(), rc)));
    if (rc == TNT_SUCCESS && any_source)
        (void)tnt_request_source(r, &source);
    tnt_request_free(r);
    r = nullptr;
}

bool WorkTnt::poll()
{
    bool all = true;
    for (tnt_request_t& r : requests) {
        if (!r)
            continue;
        tnt_result_t rc = tnt_test(r);
        if (rc == TNT_INPROGRESS) {
            all = false;
            continue;
        }
        settle(r, rc);
    }
    return all;
}

bool WorkTnt::drive(tnt_comm_t comm, int rank, int64_t until_ms)
{
    for (tnt_request_t& r : requests) {
        if (!r)
            continue;
        tnt_result_t rc;
        for (;;) {
            int64_t now = now_ms();
            if (deadline_ms && now >= deadline_ms) {
                expire(comm, rank);  // its requests now fail ABORTED
                continue;
            }
            if (until_ms && now >= until_ms)
                return false;
            int64_t stop = deadline_ms;
            if (until_ms && (!stop || until_ms < stop))
                stop = until_ms;
            if (!stop) {  // the library's own deadline bounds it
                rc = tnt_wait(r);
                break;
            }
            rc = tnt_wait_timeout(r, static_cast<double>(stop - now) / 1000.0);
            if (rc != TNT_TIMEOUT)
                break;
        }
        settle(r, rc);
    }
    return true;
}

void WorkTnt::wait_here(tnt_comm_t comm, int rank)
{
    (void)drive(comm, rank, 0);
    owner.store(kDone);
    finish_work(*this);
}

bool WorkTnt::hold()
{
    int expect = kFree;
    return owner.compare_exchange_strong(expect, kCompleter);
}

void WorkTnt::release()
{
    owner.store(kFree);
    if (wanted.exchange(false)) {
        std::lock_guard<std::mutex> lock(mutex_);  // c10d::Work's
        cv_.notify_all();
    }
}

bool WorkTnt::wait(std::chrono::milliseconds timeout)
{
    const bool bounded = timeout != ::kNoTimeout;
    const int64_t until = bounded ? now_ms() + timeout.count() : 0;
    for (;;) {
        int o = kFree;
        if (owner.compare_exchange_strong(o, kCaller)) {
            if (drive(comm, rank_, until)) {
                finish_work(*this);
                completer->finished_by_caller(*this);
                break;
            }
            owner.store(kFree);  // the completion thread carries on
            completer->poke();
            TORCH_CHECK(false, "tnt: rank ", rank_, ": ", name,
                        ": wait() timed out after ", timeout.count(),
                        " ms; the operation goes on");
        }
        if (o != kCompleter)
            break;  // done, or another thread's wait() finishes it
        // The completion thread is inside a library call on it (one
        // slice at most): sleep until it lets go or completes the work.
        wanted.store(true);
        std::unique_lock<std::mutex> lock(mutex_);  // c10d::Work's
        auto moved = [this] {
            return completed_ || owner.load() != kCompleter;
        };
        if (!bounded) {
            cv_.wait(lock, moved);
        } else if (!cv_.wait_until(
                       lock,
                       std::chrono::steady_clock::time_point(
                           std::chrono::milliseconds(until)),
                       moved)) {
            TORCH_CHECK(false, "tnt: rank ", rank_, ": ", name,
                        ": wait() timed out after ", timeout.count(),
                        " ms; the operation goes on");
        }
    }
    // Completed, or about to be by its owner: c10d::Work's wait rethrows
    // the error.
    if (!bounded)
        return c10d::Work::wait(::kNoTimeout);
    int64_t left = until - now_ms();
    return c10d::Work::wait(std::chrono::milliseconds(left > 1 ? left : 1));
}

tnt_request_t WorkTnt::unfinished() const
{
    for (tnt_request_t r : requests)
        if (r)
            return r;
    return nullptr;
}

// The loop: take what was posted; spend one slice in the library on the
// oldest work whose Future is out (it returns as soon as that one
// finishes); then test every work nobody else owns and finish those whose
// requests all finished, in any order. The slice bounds how late a work
// that finishes before an older one is noticed: 1 ms while several are in
// flight, 5 ms for a lone one. Works whose Future nobody asked for are
// tested every 1 ms (tnt_work.hpp says why); works a wait() owns are left
// to it.
void Completer::run()
{
    std::vector<c10::intrusive_ptr<WorkTnt>> pending;
    Sleep next = kUntimed;
    for (;;) {
        bool stopping;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            auto ready = [this] { return poked_ || !queue_.empty(); };
            if (pending.empty() && stop_ && queue_.empty())
                return;  // (stop_ may have come during the last round)
            if (next != kAwake) {
                sleep_ = next;
                if (next == kTimed)
                    cv_.wait_for(lock, std::chrono::milliseconds(1), ready);
                else
                    cv_.wait(lock, ready);
                sleep_ = kAwake;
            }
            poked_ = false;
            while (!queue_.empty()) {
                pending.push_back(std::move(queue_.front()));
                queue_.pop_front();
            }
            stopping = stop_;
            if (pending.empty() && stop_)
                return;
        }
        for (auto& p : pending) {
            WorkTnt& w = *p;
            if (!(stopping || w.eager.load()) || !w.hold())
                continue;
            if (tnt_request_t r = w.unfinished())
                (void)tnt_wait_timeout(r, pending.size() > 1 ? 0.001 : 0.005);
            w.release();
            break;
        }
        bool eager_left = false, lazy_left = false;
        int64_t now = now_ms();
        for (size_t i = 0; i < pending.size();) {
            WorkTnt& w = *pending[i];
            if (w.owner.load() == WorkTnt::kDone) {  // a wait() finished it
                pending.erase(pending.begin() + static_cast<long>(i));
                continue;
            }
            if (!w.hold()) {  // a wait() owns it
                i++;
                continue;
            }
            if (w.poll()) {
                w.owner.store(WorkTnt::kDone);
                finish_work(w);
                pending.erase(pending.begin() + static_cast<long>(i));
                continue;
            }
            if (w.deadline_ms && now > w.deadline_ms)
                w.expire(comm_, rank_);  // its requests fail next round
            if (stopping || w.eager.load())
                eager_left = true;
            else
                lazy_left = true;
            w.release();
            i++;
        }
        next = eager_left ? kAwake : lazy_left ? kTimed : kUntimed;
    }
}

// An op's own deadline, shorter than the process group's, passed: the
// communicator is aborted (an operation cannot be withdrawn on one rank
// alone), as NCCL does on a timeout; its requests then fail ABORTED, and
// the work reports the timeout.
void WorkTnt::expire(tnt_comm_t comm, int rank)
{
    if (!error)
        error = std::make_exception_ptr(std::runtime_error(
            "tnt: rank " + std::to_string(rank) + ": " + name +
            " timed out after " + std::to_string(timeout_ms) +
            " ms; the process group is aborted"));
    deadline_ms = 0;
    tnt_comm_abort(comm);
}

void finish_work(WorkTnt& work)
{
    std::exception_ptr error = work.error;
    if (!error && work.after) {
        try {
            if (work.device.is_cpu()) {
                work.after();
            } else {  // copies queued on this thread's stream: wait
                c10::DeviceGuard guard(work.device);
                work.after();
                wait_for_stream(work.device);
            }
        } catch (...) {
            error = std::current_exception();
        }
    }
    work.complete(error);
}

}  // namespace tnt_torch
