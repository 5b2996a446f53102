// WorkTnt and the completion thread (tnt_work.hpp says the rule).
#include "tnt_work.hpp"

#include <chrono>
#include <stdexcept>

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

static std::vector<c10::Device> future_devices(c10::Device device)
{
    if (device.is_cpu())
        return {};
    return {device};
}

WorkTnt::WorkTnt(int rank, c10d::OpType type, const char* profiling_title,
                 std::vector<at::Tensor> outputs,
                 const c10::optional<std::vector<at::Tensor>>& inputs,
                 c10::Device device)
    : c10d::Work(rank, type, profiling_title, inputs),
      device(device),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<at::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()),
          future_devices(device)))
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

c10::intrusive_ptr<c10::ivalue::Future> WorkTnt::getFuture()
{
    return future_;
}

int WorkTnt::sourceRank() const { return source; }

void WorkTnt::complete(std::exception_ptr error)
{
    keep.clear();
    finish(error);  // c10d::Work: wakes wait(), ends the profiling range
    if (error)
        future_->setError(error);
    else
        future_->markCompleted(c10::IValue(outputs_));
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
    }
    cv_.notify_all();
    thread_.join();
}

void Completer::push(c10::intrusive_ptr<WorkTnt> work)
{
    {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.push_back(std::move(work));
    }
    cv_.notify_one();
}

static int64_t now_ms()
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

void WorkTnt::wait_here(tnt_comm_t comm, int rank)
{
    int64_t deadline = timeout_ms > 0 ? now_ms() + timeout_ms : 0;
    for (tnt_request_t& r : requests) {
        if (!r)
            continue;
        tnt_result_t rc;
        for (;;) {
            if (!deadline) {  // the library's own deadline bounds it
                rc = tnt_wait(r);
                break;
            }
            int64_t left = deadline - now_ms();
            if (left <= 0) {  // its requests now fail ABORTED
                expire(comm, rank);
                deadline = 0;
                continue;
            }
            rc = tnt_wait_timeout(r, static_cast<double>(left) / 1000.0);
            if (rc != TNT_TIMEOUT)
                break;
        }
        settle(r, rc);
    }
    finish_work(*this);
}

tnt_request_t WorkTnt::unfinished() const
{
    for (tnt_request_t r : requests)
        if (r)
            return r;
    return nullptr;
}

// The loop: take what was posted, block briefly in the library on the
// oldest unfinished request (it returns as soon as that one finishes),
// then finish every work whose requests have all finished, in any order.
// The slice bounds how late a work that finishes before an older one is
// noticed: 1 ms while several are in flight, 5 ms for a lone one (which
// only matters for a work posted meanwhile).
void Completer::run()
{
    std::vector<c10::intrusive_ptr<WorkTnt>> pending;
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mutex_);
            if (pending.empty())
                cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
            while (!queue_.empty()) {
                c10::intrusive_ptr<WorkTnt> w = std::move(queue_.front());
                queue_.pop_front();
                if (w->timeout_ms > 0)
                    w->deadline_ms = now_ms() + w->timeout_ms;
                pending.push_back(std::move(w));
            }
            if (pending.empty() && stop_)
                return;
        }
        if (tnt_request_t r = pending.front()->unfinished())
            (void)tnt_wait_timeout(r, pending.size() > 1 ? 0.001 : 0.005);
        int64_t now = now_ms();
        for (size_t i = 0; i < pending.size();) {
            WorkTnt& w = *pending[i];
            if (w.poll()) {
                finish_work(w);
                pending.erase(pending.begin() + static_cast<long>(i));
            } else {
                if (w.deadline_ms && now > w.deadline_ms)
                    w.expire(comm_, rank_);  // its requests fail next round
                i++;
            }
        }
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
