// WorkTnt and the completion thread (tnt_work.hpp says the rule).
#include "tnt_work.hpp"

#include <stdexcept>

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
                 const c10::optional<std::vector<at::Tensor>>& inputs)
    : c10d::Work(rank, type, profiling_title, inputs),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<at::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get())))
{
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

void Completer::run()
{
    for (;;) {
        c10::intrusive_ptr<WorkTnt> work;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
            if (queue_.empty())
                return;  // stop_ and nothing left
            work = std::move(queue_.front());
            queue_.pop_front();
        }
        finish(*work);
    }
}

// Wait for every request of the work. An op's own deadline shorter than
// the process group's: past it, the communicator is aborted (the request
// cannot be withdrawn on one rank alone), as NCCL does on a timeout.
void Completer::finish(WorkTnt& work)
{
    std::exception_ptr error;
    for (tnt_request_t& r : work.requests) {
        tnt_result_t rc;
        if (work.timeout_ms > 0) {
            rc = tnt_wait_timeout(r, (double)work.timeout_ms / 1000.0);
            if (rc == TNT_TIMEOUT) {
                tnt_comm_abort(comm_);
                (void)tnt_wait(r);
                if (!error)
                    error = std::make_exception_ptr(std::runtime_error(
                        "tnt: rank " + std::to_string(rank_) +
                        ": " + work.name + " timed out after " +
                        std::to_string(work.timeout_ms) +
                        " ms; the process group is aborted"));
            }
        } else {
            rc = tnt_wait(r);
        }
        if (rc < 0 && !error)
            error = std::make_exception_ptr(
                std::runtime_error(error_text(work.name.c_str(), rc)));
        tnt_request_free(r);
        r = nullptr;
    }
    if (!error && work.after) {
        try {
            work.after();
        } catch (...) {
            error = std::current_exception();
        }
    }
    work.complete(error);
}

}  // namespace tnt_torch
