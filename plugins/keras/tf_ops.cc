// TensorFlow ops that hand gradients to libtntcomm's gradient fusion
// (include/tnt/plugin.h) while backprop runs.
//
//   TntFusionReady(grad) -> buf   copies grad into a buffer of its own and
//                                 reports it ready (tnt_fusion_ready); the
//                                 library allreduces the buffer's bucket in
//                                 place once every tensor of it is in.
//   TntFusionWait(buf)   -> buf   an AsyncOpKernel: completes, with the
//                                 reduced values, once the bucket is done.
//
// Two ops rather than one: eager execution runs an op to its end before the
// next, so a single "ready and wait" op would wait for a bucket whose other
// tensors are never handed over. In a tf.function graph, TensorFlow's
// executor runs each Ready as soon as its gradient exists and each Wait as an
// asynchronous kernel that takes no thread while it waits, so communication
// overlaps the rest of backprop.
//
// The waits are served by one thread of this library, lowest tensor index
// (plan order, the order buckets complete in) first. When every tensor of
// an iteration has been waited for, that thread ends the iteration with
// tnt_fusion_wait_all before it completes the last Wait, so the next
// step's Ready ops cannot start before the reset.
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/shape_inference.h"

#include "tnt/plugin.h"

using namespace tensorflow;

REGISTER_OP("TntFusionReady")
    .Input("grad: T")
    .Output("buf: T")
    .Attr("T: {float, double, half, bfloat16}")
    .Attr("fusion: int")
    .Attr("index: int")
    .SetIsStateful()
    .SetShapeFn(shape_inference::UnchangedShape);

REGISTER_OP("TntFusionWait")
    .Input("buf: T")
    .Output("reduced: T")
    .Attr("T: {float, double, half, bfloat16}")
    .Attr("fusion: int")
    .Attr("index: int")
    .Attr("ntensors: int")
    .SetIsStateful()
    .SetShapeFn(shape_inference::UnchangedShape);

namespace {

tnt_fusion_t fusion_of(int64_t handle)
{
    return reinterpret_cast<tnt_fusion_t>(static_cast<intptr_t>(handle));
}

// A failed call of op `op` as a TensorFlow error. The message ends with
// the tnt_result_t and the op in a fixed form, "[tnt_result_t -6 in
// TntFusionWait]", which tntcomm.keras (_ops.tnt_error) turns back into a
// TntError with that code: TensorFlow's error codes cannot say "peer
// lost", and tntcomm.keras.elastic must tell a lost peer from any other
// failure.
Status tnt_status(const char *op, tnt_result_t rc, const std::string &msg)
{
    return errors::Aborted("tntcomm: ", msg, " [tnt_result_t ",
                           static_cast<int>(rc), " in ", op, "]");
}

class ReadyOp : public OpKernel {
  public:
    explicit ReadyOp(OpKernelConstruction *ctx) : OpKernel(ctx)
    {
        OP_REQUIRES_OK(ctx, ctx->GetAttr("fusion", &fusion_));
        OP_REQUIRES_OK(ctx, ctx->GetAttr("index", &index_));
    }

    void Compute(OpKernelContext *ctx) override
    {
        const Tensor &grad = ctx->input(0);
        Tensor *buf = nullptr;
        // The library writes the reduced values into the buffer later, so
        // it must be ours alone: a fresh output, never the input.
        OP_REQUIRES_OK(ctx, ctx->allocate_output(0, grad.shape(), &buf));
        size_t bytes = grad.TotalBytes();
        void *dst = const_cast<char *>(buf->tensor_data().data());
        if (bytes)
            std::memcpy(dst, grad.tensor_data().data(), bytes);
        tnt_result_t rc = tnt_fusion_ready(fusion_of(fusion_),
                                           static_cast<size_t>(index_), dst);
        OP_REQUIRES(ctx, rc == TNT_SUCCESS,
                    tnt_status("TntFusionReady", rc, tnt_last_error()));
    }

  private:
    int64_t fusion_ = 0;
    int64_t index_ = 0;
};

// The thread that waits for buckets and completes TntFusionWait kernels.
class Waiter {
  public:
    struct Job {
        int64_t fusion;
        int64_t ntensors;
        std::function<void(tnt_result_t, const std::string &)> finish;
    };

    static Waiter &get()
    {
        static Waiter *w = new Waiter(); // never destroyed: TF may still
        return *w;                       // run kernels during exit
    }

    void submit(int64_t index, Job job)
    {
        std::lock_guard<std::mutex> g(lock_);
        jobs_.emplace(index, std::move(job));
        cond_.notify_one();
    }

  private:
    Waiter() { std::thread([this] { run(); }).detach(); }

    void run()
    {
        for (;;) {
            std::unique_lock<std::mutex> g(lock_);
            cond_.wait(g, [this] { return !jobs_.empty(); });
            auto it = jobs_.begin();
            int64_t index = it->first;
            Job job = std::move(it->second);
            jobs_.erase(it);
            g.unlock();
            tnt_fusion_t f = fusion_of(job.fusion);
            tnt_result_t rc = tnt_fusion_wait(f, static_cast<size_t>(index));
            std::string msg = rc == TNT_SUCCESS ? "" : tnt_last_error();
            // The iteration ends after its last tensor (or at an error,
            // which is sticky in the context: the next step fails too).
            int64_t &n = waited_[job.fusion];
            if (rc != TNT_SUCCESS || ++n == job.ntensors) {
                n = 0;
                tnt_result_t rc2 = tnt_fusion_wait_all(f);
                if (rc == TNT_SUCCESS && rc2 != TNT_SUCCESS) {
                    rc = rc2;
                    msg = tnt_last_error();
                }
            }
            job.finish(rc, msg);
        }
    }

    std::mutex lock_;
    std::condition_variable cond_;
    std::multimap<int64_t, Job> jobs_;
    std::map<int64_t, int64_t> waited_; // this thread's only
};

class WaitOp : public AsyncOpKernel {
  public:
    explicit WaitOp(OpKernelConstruction *ctx) : AsyncOpKernel(ctx)
    {
        OP_REQUIRES_OK(ctx, ctx->GetAttr("fusion", &fusion_));
        OP_REQUIRES_OK(ctx, ctx->GetAttr("index", &index_));
        OP_REQUIRES_OK(ctx, ctx->GetAttr("ntensors", &ntensors_));
    }

    void ComputeAsync(OpKernelContext *ctx, DoneCallback done) override
    {
        Waiter::Job job;
        job.fusion = fusion_;
        job.ntensors = ntensors_;
        job.finish = [ctx, done](tnt_result_t rc, const std::string &msg) {
            if (rc == TNT_SUCCESS)
                ctx->set_output(0, ctx->input(0));
            else
                ctx->SetStatus(tnt_status("TntFusionWait", rc, msg));
            done();
        };
        Waiter::get().submit(index_, std::move(job));
    }

  private:
    int64_t fusion_ = 0;
    int64_t index_ = 0;
    int64_t ntensors_ = 0;
};

} // namespace

REGISTER_KERNEL_BUILDER(Name("TntFusionReady").Device(DEVICE_CPU), ReadyOp);
REGISTER_KERNEL_BUILDER(Name("TntFusionWait").Device(DEVICE_CPU), WaitOp);
