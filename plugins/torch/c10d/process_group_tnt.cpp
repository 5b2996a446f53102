// The "tnt" process group (process_group_tnt.hpp).
#include <Python.h>  // first, as Python asks; for the GIL in the destructor

#include "process_group_tnt.hpp"

#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include "rendezvous.hpp"
#include "tensor_map.hpp"

namespace tnt_torch {

namespace {

void one_tensor(const std::vector<at::Tensor>& v, const char* op)
{
    TORCH_CHECK(v.size() == 1, "tnt: ", op, ": takes one tensor per "
                "process, got ", v.size());
}

// The one CPU tensor of a call that takes one.
const at::Tensor& the_tensor(const std::vector<at::Tensor>& v,
                             const char* op)
{
    one_tensor(v, op);
    check_tensor(v[0], op, "tensor");
    return v[0];
}

int root_of(int64_t root, int64_t root_tensor, int size, const char* op)
{
    TORCH_CHECK(root_tensor == 0, "tnt: ", op, ": rootTensor must be 0 "
                "(one tensor per process), got ", root_tensor);
    TORCH_CHECK(root >= 0 && root < size, "tnt: ", op, ": root rank ", root,
                " is outside the group of ", size);
    return static_cast<int>(root);
}

// Every tensor of `list` must be like `like` (same element type and
// number of elements): they are blocks of one collective.
void same_blocks(const std::vector<at::Tensor>& list, const at::Tensor& like,
                 const char* op, const char* what)
{
    for (size_t i = 0; i < list.size(); i++) {
        check_tensor(list[i], op, what);
        TORCH_CHECK(list[i].scalar_type() == like.scalar_type(), "tnt: ",
                    op, ": ", what, " ", i, " has dtype ",
                    list[i].scalar_type(), ", the input has ",
                    like.scalar_type());
        TORCH_CHECK(list[i].numel() == like.numel(), "tnt: ", op, ": ", what,
                    " ", i, " has ", list[i].numel(),
                    " elements, the input has ", like.numel());
    }
}

// Block i (n bytes) of a flat byte tensor, as a tensor like `like`.
at::Tensor block_as(const at::Tensor& flat, int64_t i, int64_t n,
                    const at::Tensor& like)
{
    return flat.narrow(0, i * n, n).view(like.scalar_type()).view(
        like.sizes());
}

// Work::after of a gather into a flat byte tensor: block i (n bytes) of
// `flat` into outs[i], in the dtype and shape of outs[i]. allgather and
// gather (at the root; elsewhere outs is empty) both receive that way.
std::function<void()> copy_blocks_out(std::vector<at::Tensor> outs,
                                      at::Tensor flat, int64_t n)
{
    return [outs, flat, n]() mutable {
        for (size_t i = 0; i < outs.size(); i++)
            outs[i].copy_(block_as(flat, static_cast<int64_t>(i), n,
                                   outs[i]));
    };
}

// Copy `from` back into `to` when the library worked on a staging copy.
std::function<void()> copy_back(at::Tensor to, at::Tensor from)
{
    if (to.is_same(from))
        return nullptr;
    return [to, from]() mutable { to.copy_(from); };
}

}  // namespace

ProcessGroupTnt::ProcessGroupTnt(const c10::intrusive_ptr<c10d::Store>& store,
                                 int rank, int size,
                                 std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size),
      lib_timeout_(timeout),
      timeout_ms_(timeout.count())
{
    Rendezvous r = rendezvous(*store, rank);
    tnt_config_t cfg = TNT_CONFIG_INIT;
    cfg.rank = rank;
    cfg.nranks = size;
    cfg.root_addr = r.root_addr.c_str();
    cfg.job_key = r.job_key.c_str();
    cfg.timeout_s = static_cast<double>(timeout.count()) / 1000.0;
    tnt_result_t rc = tnt_comm_init(&cfg, &comm_);
    TORCH_CHECK(rc == TNT_SUCCESS, error_text("process group creation", rc));
    completer_.reset(new Completer(comm_, rank));
}

// The completion thread may need the GIL: when it drops the last
// reference to a tensor whose Python object torch keeps alive from C++
// (PyObject preservation: Python let go of the tensor first), the tensor's
// destructor takes the GIL to release that object. A group destroyed from
// Python (destroy_process_group) runs this with the GIL held, so joining
// the thread with it held could wait for ever; release it meanwhile.
// (Seen: test_send_recv_with_tag at 3 ranks, one rank stuck in
// destroy_process_group, under load.)
ProcessGroupTnt::~ProcessGroupTnt()
{
    PyThreadState* saved = nullptr;
    if (Py_IsInitialized() && PyGILState_Check())
        saved = PyEval_SaveThread();
    completer_.reset();  // finishes the queued operations first
    if (saved)
        PyEval_RestoreThread(saved);
    tnt_comm_free(comm_);
}

c10::intrusive_ptr<WorkTnt> ProcessGroupTnt::make_work(
    c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
    const std::vector<at::Tensor>& inputs, std::chrono::milliseconds timeout,
    bool async_op)
{
    // The profiling range ("tnt:all_reduce", with the inputs' shapes):
    // c10d::Work opens one only where a profiler has registered callbacks
    // (at::RecordFunction is inactive without them), so without them
    // neither the title nor the inputs are passed and the work skips
    // making an inactive RecordFunction on every call.
    const bool profiled = at::hasCallbacks();
    std::string title = profiled ? std::string("tnt:") + name : std::string();
    // The call's device: the first CUDA tensor's, else the CPU. The
    // library reads device memory when the call is posted (right after
    // this; every op makes its staging copies before), so the kernels
    // queued on that device's current stream must be done by then.
    c10::Device device(c10::kCPU);
    for (const std::vector<at::Tensor>* list :
         {const_cast<const std::vector<at::Tensor>*>(&outputs), &inputs})
        for (const at::Tensor& t : *list)
            if (device.is_cpu() && t.defined() && t.device().is_cuda())
                device = t.device();
    wait_for_stream(device);
    auto w = c10::make_intrusive<WorkTnt>(
        getRank(), type, profiled ? title.c_str() : nullptr,
        std::move(outputs),
        profiled ? c10::optional<std::vector<at::Tensor>>(inputs)
                 : c10::nullopt,
        device);
    w->name = name;
    w->timeout_ms = deadline_of(timeout).count();
    if (w->timeout_ms > 0)
        w->deadline_ms = now_ms() + w->timeout_ms;
    w->blocking = !async_op;
    return w;
}

// The library enforces the deadline the group was made with on every
// operation; a shorter one, of this call or set later for the group, is
// the completion thread's to enforce.
std::chrono::milliseconds ProcessGroupTnt::deadline_of(
    std::chrono::milliseconds timeout) const
{
    std::chrono::milliseconds t =
        timeout.count() > 0 ? timeout
                            : std::chrono::milliseconds(timeout_ms_.load());
    return t.count() > 0 && t < lib_timeout_ ? t
                                             : std::chrono::milliseconds(0);
}

void ProcessGroupTnt::setTimeout(std::chrono::milliseconds timeout)
{
    TORCH_CHECK(timeout.count() > 0, "tnt: setTimeout: the timeout must be "
                "positive, got ", timeout.count(), " ms");
    timeout_ms_.store(timeout.count());
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupTnt::getBackendOptions()
{
    return c10::make_intrusive<c10d::Backend::Options>(
        "tnt", std::chrono::milliseconds(timeout_ms_.load()));
}

c10::intrusive_ptr<WorkTnt> ProcessGroupTnt::single_work(
    c10d::OpType type, const char* name, std::vector<at::Tensor>& tensors,
    const Buf& b, bool writes, std::chrono::milliseconds timeout,
    bool async_op, bool has_blocking)
{
    auto w = make_work(type, name, tensors, tensors, timeout, async_op);
    if (writes)
        w->after = copy_back(tensors[0], b.t);
    // A direct call runs before the op returns (b.t is the op's to keep
    // alive meanwhile) and has no request of its own.
    if (has_blocking && direct(*w))
        return w;
    w->keep.push_back(b.t);
    w->requests.push_back(nullptr);
    return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::post(
    c10::intrusive_ptr<WorkTnt> work, tnt_result_t rc)
{
    TORCH_CHECK(rc == TNT_SUCCESS, error_text(work->name.c_str(), rc));
    if (work->blocking)
        work->wait_here(comm_, getRank());
    else
        queue(work);
    return work;
}

void ProcessGroupTnt::queue(const c10::intrusive_ptr<WorkTnt>& work)
{
    work->comm = comm_;
    work->completer = completer_.get();
    completer_->push(work);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::ran(
    c10::intrusive_ptr<WorkTnt> work, tnt_result_t rc)
{
    TORCH_CHECK(rc == TNT_SUCCESS, error_text(work->name.c_str(), rc));
    work->owner.store(WorkTnt::kDone);
    finish_work(*work);
    return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::post_each(
    c10::intrusive_ptr<WorkTnt> work, size_t n,
    const std::function<tnt_result_t(size_t, tnt_request_t*)>& one)
{
    for (size_t i = 0; i < n; i++) {
        work->requests.push_back(nullptr);
        tnt_result_t rc = one(i, &work->requests.back());
        if (rc != TNT_SUCCESS) {
            work->requests.pop_back();
            if (work->requests.empty())
                return post(work, rc);
            // Some are in flight: they must finish before the buffers go.
            std::string msg = error_text(work->name.c_str(), rc);
            work->eager.store(true);  // nobody else will wait for it
            queue(work);
            TORCH_CHECK(false, msg);
        }
    }
    return post(work, TNT_SUCCESS);
}

// Work::after of several staging tensors: each copied back into its
// tensor where it is a copy.
static std::function<void()> copy_backs(const std::vector<at::Tensor>& to,
                                        const std::vector<at::Tensor>& from)
{
    std::vector<std::function<void()>> backs;
    for (size_t i = 0; i < to.size(); i++)
        if (auto f = copy_back(to[i], from[i]))
            backs.push_back(f);
    if (backs.empty())
        return nullptr;
    return [backs]() { for (auto& f : backs) f(); };
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts)
{
    const char* name = "broadcast";
    Buf b = bytes_of(contiguous_of(the_tensor(tensors, name)));
    int root = root_of(opts.rootRank, opts.rootTensor, getSize(), name);
    auto w = single_work(c10d::OpType::BROADCAST, name, tensors, b, true,
                         opts.timeout, opts.asyncOp, true);
    if (direct(*w))
        return ran(w, tnt_broadcast(comm_, b.ptr, b.count, b.dtype, root));
    return post(w, tnt_ibroadcast(comm_, b.ptr, b.count, b.dtype, root,
                                  &w->requests.back()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts)
{
    const char* name = "all_reduce";
    tnt_op_t op;
    Buf b = reduce_of(reduce_input(the_tensor(tensors, name), opts.reduceOp,
                                   name),
                      opts.reduceOp, name, &op);
    auto w = single_work(c10d::OpType::ALLREDUCE, name, tensors, b, true,
                         opts.timeout, opts.asyncOp, true);
    if (direct(*w))
        return ran(w, tnt_allreduce(comm_, TNT_IN_PLACE, b.ptr, b.count,
                                    b.dtype, op));
    return post(w, tnt_iallreduce(comm_, TNT_IN_PLACE, b.ptr, b.count,
                                  b.dtype, op, &w->requests.back()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::allreduce_coalesced(
    std::vector<at::Tensor>& tensors,
    const c10d::AllreduceCoalescedOptions& opts)
{
    const char* name = "all_reduce_coalesced";
    TORCH_CHECK(!tensors.empty(), "tnt: ", name, ": no tensors");
    std::vector<Buf> bufs;
    std::vector<tnt_op_t> ops;
    for (const at::Tensor& t : tensors) {
        check_tensor(t, name, "tensor");
        tnt_op_t op;
        bufs.push_back(reduce_of(reduce_input(t, opts.reduceOp, name),
                                 opts.reduceOp, name, &op));
        ops.push_back(op);
    }
    auto w = make_work(c10d::OpType::ALLREDUCE_COALESCED, name, tensors,
                       tensors, opts.timeout, opts.asyncOp);
    for (const Buf& b : bufs)
        w->keep.push_back(b.t);
    w->after = copy_backs(tensors, w->keep);
    // One allreduce per tensor, posted back to back: each rank posts the
    // same sequence, and the library overlaps them.
    return post_each(w, bufs.size(), [&](size_t i, tnt_request_t* req) {
        return tnt_iallreduce(comm_, TNT_IN_PLACE, bufs[i].ptr, bufs[i].count,
                              bufs[i].dtype, ops[i], req);
    });
}

// The library's reduce gives at the root bitwise what its allreduce gives
// (docs/design.md, "Determinism"); the other ranks' tensors stay as they
// were, as with MPI_Reduce.
c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::reduce(
    std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts)
{
    const char* name = "reduce";
    tnt_op_t op;
    Buf b = reduce_of(reduce_input(the_tensor(tensors, name), opts.reduceOp,
                                   name),
                      opts.reduceOp, name, &op);
    int root = root_of(opts.rootRank, opts.rootTensor, getSize(), name);
    const bool at_root = getRank() == root;
    auto w = single_work(c10d::OpType::REDUCE, name, tensors, b, at_root,
                         opts.timeout, opts.asyncOp);
    return post(w, tnt_ireduce(comm_, at_root ? TNT_IN_PLACE : b.ptr,
                               at_root ? b.ptr : nullptr, b.count, b.dtype,
                               op, root, &w->requests.back()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::allgather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts)
{
    const char* name = "all_gather";
    one_tensor(inputs, name);
    check_tensor(inputs[0], name, "input");
    TORCH_CHECK(outputs.size() == 1, "tnt: ", name, ": takes one output "
                "list per process, got ", outputs.size());
    TORCH_CHECK(outputs[0].size() == static_cast<size_t>(getSize()), "tnt: ",
                name, ": the output list has ", outputs[0].size(),
                " tensors for a group of ", getSize());
    same_blocks(outputs[0], inputs[0], name, "output");
    Buf in = bytes_of(contiguous_of(inputs[0]));
    at::Tensor flat = at::empty({static_cast<int64_t>(in.count) * getSize()},
                                at::TensorOptions().dtype(at::kByte));
    auto w = make_work(c10d::OpType::ALLGATHER, name, outputs[0], inputs,
                       opts.timeout, opts.asyncOp);
    w->keep = {in.t, flat};
    w->after = copy_blocks_out(outputs[0], flat,
                               static_cast<int64_t>(in.count));
    w->requests.push_back(nullptr);
    return post(w, tnt_iallgather(comm_, in.ptr, flat.data_ptr(), in.count,
                                  TNT_U8, &w->requests.back()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts)
{
    const char* name = "_allgather_base";
    check_tensor(input, name, "input");
    check_tensor(output, name, "output");
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "tnt: ", name,
                ": output dtype ", output.scalar_type(), " differs from the "
                "input's ", input.scalar_type());
    TORCH_CHECK(output.numel() == input.numel() * getSize(), "tnt: ", name,
                ": output has ", output.numel(), " elements, not ",
                getSize(), " x ", input.numel());
    Buf in = bytes_of(contiguous_of(input));
    Buf out = bytes_of(contiguous_of(output));
    auto w = make_work(c10d::OpType::_ALLGATHER_BASE, name, {output}, {input},
                       opts.timeout, opts.asyncOp);
    w->keep = {in.t, out.t};
    w->after = copy_back(output, out.t);
    w->requests.push_back(nullptr);
    return post(w, tnt_iallgather(comm_, in.ptr, out.ptr, in.count, TNT_U8,
                                  &w->requests.back()));
}

// The output of rank r's input i is block r of outputs[i] (torch's
// all_gather_into_tensor, several at once: DTensor and the coalescing
// manager use it); one library allgather per pair, posted back to back.
c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts)
{
    const char* name = "all_gather_into_tensor_coalesced";
    TORCH_CHECK(outputs.size() == inputs.size(), "tnt: ", name, ": ",
                outputs.size(), " outputs for ", inputs.size(), " inputs");
    std::vector<Buf> ins, outs;
    for (size_t i = 0; i < inputs.size(); i++) {
        check_tensor(inputs[i], name, "input");
        check_tensor(outputs[i], name, "output");
        TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type(),
                    "tnt: ", name, ": output ", i, " has dtype ",
                    outputs[i].scalar_type(), ", its input ",
                    inputs[i].scalar_type());
        TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * getSize(),
                    "tnt: ", name, ": output ", i, " has ",
                    outputs[i].numel(), " elements, not ", getSize(), " x ",
                    inputs[i].numel());
        ins.push_back(bytes_of(contiguous_of(inputs[i])));
        outs.push_back(bytes_of(contiguous_of(outputs[i])));
    }
    auto w = make_work(c10d::OpType::ALLGATHER_COALESCED, name, outputs,
                       inputs, opts.timeout, opts.asyncOp);
    std::vector<at::Tensor> staged;
    for (size_t i = 0; i < ins.size(); i++) {
        w->keep.push_back(ins[i].t);
        staged.push_back(outs[i].t);
    }
    w->keep.insert(w->keep.end(), staged.begin(), staged.end());
    w->after = copy_backs(outputs, staged);
    return post_each(w, ins.size(), [&](size_t i, tnt_request_t* req) {
        return tnt_iallgather(comm_, ins[i].ptr, outs[i].ptr, ins[i].count,
                              TNT_U8, req);
    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts)
{
    const char* name = "all_gather_coalesced";
    TORCH_CHECK(outputs.size() == static_cast<size_t>(getSize()), "tnt: ",
                name, ": needs one output list per rank, got ",
                outputs.size());
    // Pack every input into one byte buffer, gather it once, unpack.
    int64_t n = 0;
    std::vector<at::Tensor> ins;
    for (const at::Tensor& t : inputs) {
        check_tensor(t, name, "input");
        ins.push_back(contiguous_of(t).view({-1}).view(at::kByte));
        n += ins.back().numel();
    }
    for (auto& list : outputs) {
        TORCH_CHECK(list.size() == inputs.size(), "tnt: ", name,
                    ": an output list has ", list.size(), " tensors, there "
                    "are ", inputs.size(), " inputs");
        for (size_t i = 0; i < list.size(); i++)
            same_blocks({list[i]}, inputs[i], name, "output");
    }
    at::Tensor packed = ins.empty() ? at::empty({0}, at::kByte) : at::cat(ins);
    at::Tensor flat = at::empty({n * getSize()}, at::kByte);
    std::vector<at::Tensor> all;
    for (auto& list : outputs)
        all.insert(all.end(), list.begin(), list.end());
    auto w = make_work(c10d::OpType::ALLGATHER_COALESCED, name, all, inputs,
                       opts.timeout, opts.asyncOp);
    w->keep = {packed, flat};
    std::vector<std::vector<at::Tensor>> outs = outputs;
    w->after = [outs, flat, n]() mutable {
        for (size_t r = 0; r < outs.size(); r++) {
            int64_t off = static_cast<int64_t>(r) * n;
            for (at::Tensor& o : outs[r]) {
                int64_t b = o.numel() * o.element_size();
                o.copy_(flat.narrow(0, off, b).view(o.scalar_type()).view(
                    o.sizes()));
                off += b;
            }
        }
    };
    w->requests.push_back(nullptr);
    return post(w, tnt_iallgather(comm_, packed.data_ptr(), flat.data_ptr(),
                                  static_cast<size_t>(n), TNT_U8,
                                  &w->requests.back()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::gather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts)
{
    const char* name = "gather";
    one_tensor(inputs, name);
    check_tensor(inputs[0], name, "input");
    int root = root_of(opts.rootRank, 0, getSize(), name);
    const bool at_root = getRank() == root;
    std::vector<at::Tensor> outs;
    if (at_root) {
        TORCH_CHECK(outputs.size() == 1 &&
                        outputs[0].size() == static_cast<size_t>(getSize()),
                    "tnt: ", name, ": the root needs one output list of ",
                    getSize(), " tensors");
        same_blocks(outputs[0], inputs[0], name, "output");
        outs = outputs[0];
    } else {
        TORCH_CHECK(outputs.empty() ||
                        (outputs.size() == 1 && outputs[0].empty()),
                    "tnt: ", name, ": only the root passes output tensors");
    }
    Buf in = bytes_of(contiguous_of(inputs[0]));
    const int64_t n = static_cast<int64_t>(in.count);
    at::Tensor flat = at::empty({at_root ? n * getSize() : 0}, at::kByte);
    auto w = make_work(c10d::OpType::GATHER, name, outs, inputs,
                       opts.timeout, opts.asyncOp);
    w->keep = {in.t, flat};
    w->after = copy_blocks_out(outs, flat, n);
    w->requests.push_back(nullptr);
    return post(w, tnt_igather(comm_, in.ptr,
                               at_root ? flat.data_ptr() : nullptr, in.count,
                               TNT_U8, root, &w->requests.back()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts)
{
    const char* name = "scatter";
    one_tensor(outputs, name);
    check_tensor(outputs[0], name, "output");
    int root = root_of(opts.rootRank, 0, getSize(), name);
    const bool at_root = getRank() == root;
    at::Tensor flat;
    std::vector<at::Tensor> ins;
    if (at_root) {
        TORCH_CHECK(inputs.size() == 1 &&
                        inputs[0].size() == static_cast<size_t>(getSize()),
                    "tnt: ", name, ": the root needs one input list of ",
                    getSize(), " tensors");
        same_blocks(inputs[0], outputs[0], name, "input");
        ins = inputs[0];
        std::vector<at::Tensor> bytes;
        for (const at::Tensor& t : ins)
            bytes.push_back(contiguous_of(t).view({-1}).view(at::kByte));
        flat = at::cat(bytes);
    } else {
        TORCH_CHECK(inputs.empty() ||
                        (inputs.size() == 1 && inputs[0].empty()),
                    "tnt: ", name, ": only the root passes input tensors");
    }
    Buf out = bytes_of(contiguous_of(outputs[0]));
    auto w = make_work(c10d::OpType::SCATTER, name, outputs, ins,
                       opts.timeout, opts.asyncOp);
    w->keep = {out.t};
    if (flat.defined())
        w->keep.push_back(flat);
    w->after = copy_back(outputs[0], out.t);
    w->requests.push_back(nullptr);
    return post(w, tnt_iscatter(comm_, at_root ? flat.data_ptr() : nullptr,
                                out.ptr, out.count, TNT_U8, root,
                                &w->requests.back()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::reduce_scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts)
{
    const char* name = "reduce_scatter";
    one_tensor(outputs, name);
    check_tensor(outputs[0], name, "output");
    TORCH_CHECK(inputs.size() == 1 &&
                    inputs[0].size() == static_cast<size_t>(getSize()),
                "tnt: ", name, ": needs one input list of ", getSize(),
                " tensors");
    same_blocks(inputs[0], outputs[0], name, "input");
    std::vector<at::Tensor> flat_in;
    for (const at::Tensor& t : inputs[0])
        flat_in.push_back(t.reshape({-1}));
    tnt_op_t op;
    Buf in = reduce_of(reduce_input(at::cat(flat_in), opts.reduceOp, name),
                       opts.reduceOp, name, &op);
    Buf out = reduce_of(contiguous_of(outputs[0]), opts.reduceOp, name, &op);
    auto w = make_work(c10d::OpType::REDUCE_SCATTER, name, outputs,
                       inputs[0], opts.timeout, opts.asyncOp);
    w->keep = {in.t, out.t};
    w->after = copy_back(outputs[0], out.t);
    w->requests.push_back(nullptr);
    return post(w, tnt_ireduce_scatter(comm_, in.ptr, out.ptr, out.count,
                                       out.dtype, op, &w->requests.back()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input,
    const c10d::ReduceScatterOptions& opts)
{
    const char* name = "_reduce_scatter_base";
    check_tensor(input, name, "input");
    check_tensor(output, name, "output");
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "tnt: ", name,
                ": output dtype ", output.scalar_type(), " differs from the "
                "input's ", input.scalar_type());
    TORCH_CHECK(input.numel() == output.numel() * getSize(), "tnt: ", name,
                ": input has ", input.numel(), " elements, not ", getSize(),
                " x ", output.numel());
    tnt_op_t op;
    Buf in = reduce_of(reduce_input(input, opts.reduceOp, name),
                       opts.reduceOp, name, &op);
    Buf out = reduce_of(contiguous_of(output), opts.reduceOp, name, &op);
    auto w = make_work(c10d::OpType::_REDUCE_SCATTER_BASE, name, {output},
                       {input}, opts.timeout, opts.asyncOp);
    w->keep = {in.t, out.t};
    w->after = copy_back(output, out.t);
    w->requests.push_back(nullptr);
    return post(w, tnt_ireduce_scatter(comm_, in.ptr, out.ptr, out.count,
                                       out.dtype, op, &w->requests.back()));
}

// outputs[i] gets block `rank` of the reduction of every rank's
// inputs[i] (torch's reduce_scatter_tensor, several at once: FSDP2 and
// the coalescing manager use it); one library reduce-scatter per pair.
c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts)
{
    const char* name = "reduce_scatter_tensor_coalesced";
    TORCH_CHECK(outputs.size() == inputs.size(), "tnt: ", name, ": ",
                outputs.size(), " outputs for ", inputs.size(), " inputs");
    std::vector<Buf> ins, outs;
    std::vector<tnt_op_t> ops;
    for (size_t i = 0; i < inputs.size(); i++) {
        tnt_op_t op;
        check_tensor(inputs[i], name, "input");
        check_tensor(outputs[i], name, "output");
        TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type(),
                    "tnt: ", name, ": output ", i, " has dtype ",
                    outputs[i].scalar_type(), ", its input ",
                    inputs[i].scalar_type());
        TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * getSize(),
                    "tnt: ", name, ": input ", i, " has ", inputs[i].numel(),
                    " elements, not ", getSize(), " x ",
                    outputs[i].numel());
        ins.push_back(reduce_of(reduce_input(inputs[i], opts.reduceOp, name),
                                opts.reduceOp, name, &op));
        outs.push_back(reduce_of(contiguous_of(outputs[i]), opts.reduceOp,
                                 name, &op));
        ops.push_back(op);
    }
#ifdef TNT_TORCH_HAS_RS_TENSOR_COALESCED
    const c10d::OpType type = c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED;
#else
    const c10d::OpType type = c10d::OpType::COALESCED;  // torch 2.11
#endif
    auto w = make_work(type, name, outputs, inputs, opts.timeout,
                       opts.asyncOp);
    std::vector<at::Tensor> staged;
    for (size_t i = 0; i < ins.size(); i++) {
        w->keep.push_back(ins[i].t);
        staged.push_back(outs[i].t);
    }
    w->keep.insert(w->keep.end(), staged.begin(), staged.end());
    w->after = copy_backs(outputs, staged);
    return post_each(w, ins.size(), [&](size_t i, tnt_request_t* req) {
        return tnt_ireduce_scatter(comm_, ins[i].ptr, outs[i].ptr,
                                   outs[i].count, outs[i].dtype, ops[i], req);
    });
}

// Byte counts and displacements of an all-to-all along dimension 0:
// `splits` rows per rank (empty: the rows split evenly).
static void split_bytes(const at::Tensor& t, const std::vector<int64_t>& splits,
                        int size, const char* name, const char* what,
                        std::vector<size_t>* counts,
                        std::vector<size_t>* displs)
{
    const int64_t rows = t.dim() ? t.size(0) : 1;
    const int64_t row_bytes =
        rows ? t.numel() * t.element_size() / rows : 0;
    counts->assign(size, 0);
    displs->assign(size, 0);
    if (splits.empty()) {
        TORCH_CHECK(rows % size == 0, "tnt: ", name, ": the ", what,
                    "'s ", rows, " rows do not split evenly over ", size,
                    " ranks");
    } else {
        TORCH_CHECK(splits.size() == static_cast<size_t>(size), "tnt: ",
                    name, ": ", splits.size(), " ", what, " split sizes for ",
                    size, " ranks");
    }
    int64_t off = 0;
    for (int r = 0; r < size; r++) {
        int64_t n = splits.empty() ? rows / size : splits[r];
        TORCH_CHECK(n >= 0, "tnt: ", name, ": negative split size ", n);
        (*counts)[r] = static_cast<size_t>(n * row_bytes);
        (*displs)[r] = static_cast<size_t>(off * row_bytes);
        off += n;
    }
    TORCH_CHECK(off == rows, "tnt: ", name, ": the ", what,
                " split sizes add up to ", off, " rows, the tensor has ",
                rows);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::alltoall_base(
    at::Tensor& output, at::Tensor& input,
    std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes,
    const c10d::AllToAllOptions& opts)
{
    const char* name = "all_to_all_single";
    check_tensor(input, name, "input");
    check_tensor(output, name, "output");
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "tnt: ", name,
                ": output dtype ", output.scalar_type(), " differs from the "
                "input's ", input.scalar_type());
    Buf in = bytes_of(contiguous_of(input));
    Buf out = bytes_of(contiguous_of(output));
    auto w = make_work(c10d::OpType::ALLTOALL_BASE, name, {output}, {input},
                       opts.timeout, opts.asyncOp);
    w->keep = {in.t, out.t};
    w->after = copy_back(output, out.t);
    w->requests.push_back(nullptr);
    if (output_split_sizes.empty() && input_split_sizes.empty()) {
        TORCH_CHECK(in.count == out.count && in.count % getSize() == 0,
                    "tnt: ", name, ": input and output must have the same "
                    "size, a multiple of ", getSize(), " blocks (", in.count,
                    " and ", out.count, " bytes)");
        return post(w, tnt_ialltoall(comm_, in.ptr, out.ptr,
                                     in.count / getSize(), TNT_U8,
                                     &w->requests.back()));
    }
    std::vector<size_t> sc, sd, rc, rd;
    split_bytes(input, input_split_sizes, getSize(), name, "input", &sc, &sd);
    split_bytes(output, output_split_sizes, getSize(), name, "output", &rc,
                &rd);
    return post(w, tnt_ialltoallv(comm_, in.ptr, sc.data(), sd.data(),
                                  out.ptr, rc.data(), rd.data(), TNT_U8,
                                  &w->requests.back()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::alltoall(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& opts)
{
    const char* name = "all_to_all";
    const size_t p = static_cast<size_t>(getSize());
    TORCH_CHECK(inputs.size() == p && outputs.size() == p, "tnt: ", name,
                ": needs one input and one output tensor per rank (", p,
                "), got ", inputs.size(), " and ", outputs.size());
    std::vector<size_t> sc(p), sd(p), rc(p), rd(p);
    std::vector<at::Tensor> bytes;
    size_t soff = 0, roff = 0;
    for (size_t r = 0; r < p; r++) {
        check_tensor(inputs[r], name, "input");
        check_tensor(outputs[r], name, "output");
        bytes.push_back(contiguous_of(inputs[r]).view({-1}).view(at::kByte));
        sc[r] = static_cast<size_t>(bytes.back().numel());
        sd[r] = soff;
        soff += sc[r];
        rc[r] = static_cast<size_t>(outputs[r].numel() *
                                    outputs[r].element_size());
        rd[r] = roff;
        roff += rc[r];
    }
    at::Tensor packed = at::cat(bytes);
    at::Tensor flat = at::empty({static_cast<int64_t>(roff)}, at::kByte);
    auto w = make_work(c10d::OpType::ALLTOALL, name, outputs, inputs,
                       opts.timeout, opts.asyncOp);
    w->keep = {packed, flat};
    std::vector<at::Tensor> outs = outputs;
    w->after = [outs, flat, rc, rd]() mutable {
        for (size_t r = 0; r < outs.size(); r++)
            outs[r].copy_(flat.narrow(0, static_cast<int64_t>(rd[r]),
                                      static_cast<int64_t>(rc[r]))
                              .view(outs[r].scalar_type())
                              .view(outs[r].sizes()));
    };
    w->requests.push_back(nullptr);
    return post(w, tnt_ialltoallv(comm_, packed.data_ptr(), sc.data(),
                                  sd.data(), flat.data_ptr(), rc.data(),
                                  rd.data(), TNT_U8, &w->requests.back()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::send(
    std::vector<at::Tensor>& tensors, int dst, int tag)
{
    const char* name = "send";
    Buf b = bytes_of(contiguous_of(the_tensor(tensors, name)));
    auto w = single_work(c10d::OpType::SEND, name, tensors, b, false,
                         std::chrono::milliseconds(0), true);
    return post(w, tnt_isend(comm_, b.ptr, b.count, b.dtype, dst, tag,
                             &w->requests.back()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::recv(
    std::vector<at::Tensor>& tensors, int src, int tag)
{
    const char* name = "recv";
    Buf b = bytes_of(contiguous_of(the_tensor(tensors, name)));
    auto w = single_work(c10d::OpType::RECV, name, tensors, b, true,
                         std::chrono::milliseconds(0), true);
    w->source = src;
    return post(w, tnt_irecv(comm_, b.ptr, b.count, b.dtype, src, tag,
                             &w->requests.back()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::recvAnysource(
    std::vector<at::Tensor>& tensors, int tag)
{
    // The library's receive from any source: the sender is known once it
    // completed (Work::sourceRank, set by the completion thread). Named
    // as gloo names it in profiles.
    const char* name = "recvAnySource";
    Buf b = bytes_of(contiguous_of(the_tensor(tensors, name)));
    auto w = single_work(c10d::OpType::RECVANYSOURCE, name, tensors, b, true,
                         std::chrono::milliseconds(0), true);
    w->any_source = true;
    return post(w, tnt_irecv(comm_, b.ptr, b.count, b.dtype, TNT_ANY_SOURCE,
                             tag, &w->requests.back()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTnt::barrier(
    const c10d::BarrierOptions& opts)
{
    const char* name = "barrier";
    auto w = make_work(c10d::OpType::BARRIER, name, {}, {}, opts.timeout,
                       opts.asyncOp);
    if (direct(*w))
        return ran(w, tnt_barrier(comm_));
    w->requests.push_back(nullptr);
    return post(w, tnt_ibarrier(comm_, &w->requests.back()));
}

}  // namespace tnt_torch
