// Tensor and op mapping (tensor_map.hpp).
#include "tensor_map.hpp"

#include <c10/util/Exception.h>

namespace tnt_torch {

void check_tensor(const at::Tensor& t, const char* op, const char* what)
{
    TORCH_CHECK(t.defined(), "tnt: ", op, ": ", what, " is undefined");
    TORCH_CHECK(t.device().is_cpu() || t.device().is_cuda(), "tnt: ", op,
                ": ", what, " is on ", t.device(), "; the tnt backend "
                "handles CPU and CUDA tensors");
    TORCH_CHECK(t.layout() == at::kStrided, "tnt: ", op, ": ", what,
                " is not a dense (strided) tensor");
}

at::Tensor contiguous_of(const at::Tensor& t)
{
    return t.is_contiguous() ? t : t.contiguous();
}

Buf bytes_of(const at::Tensor& contiguous)
{
    Buf b;
    b.t = contiguous;
    b.ptr = contiguous.data_ptr();
    b.count = contiguous.numel() * contiguous.element_size();
    b.dtype = TNT_U8;
    return b;
}

static bool map_dtype(at::ScalarType s, tnt_dtype_t* d)
{
    switch (s) {
    case at::kFloat: *d = TNT_F32; return true;
    case at::kDouble: *d = TNT_F64; return true;
    case at::kHalf: *d = TNT_F16; return true;
    case at::kBFloat16: *d = TNT_BF16; return true;
    case at::kChar: *d = TNT_I8; return true;
    case at::kByte: *d = TNT_U8; return true;
    case at::kBool: *d = TNT_U8; return true;
    case at::kInt: *d = TNT_I32; return true;
    case at::kLong: *d = TNT_I64; return true;
    case at::kComplexFloat: *d = TNT_F32; return true;
    case at::kComplexDouble: *d = TNT_F64; return true;
    default: return false;
    }
}

static const char* op_name(c10d::ReduceOp::RedOpType o)
{
    switch (o) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "unknown";
    }
}

at::Tensor reduce_input(const at::Tensor& t, const c10d::ReduceOp& op,
                        const char* opname)
{
    if (op.op_ != c10d::ReduceOp::PREMUL_SUM)
        return contiguous_of(t);
    TORCH_CHECK(at::isFloatingType(t.scalar_type()), "tnt: ", opname,
                ": ReduceOp PREMUL_SUM needs a floating-point tensor, not ",
                t.scalar_type());
    // NCCLPreMulSumSupplement: the name torch 2.11 has; later versions
    // call it PreMulSumSupplement and keep this one as an alias.
    auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(
        op.supplement_.get());
    TORCH_CHECK(sup, "tnt: ", opname, ": ReduceOp PREMUL_SUM without its "
                "factor (make it with torch.distributed._make_nccl_premul_sum)");
    at::Tensor r = t.contiguous().clone();
    if (sup->tensor_factor.defined()) {
        check_tensor(sup->tensor_factor, opname, "the PREMUL_SUM factor");
        r.mul_(sup->tensor_factor.item());
    } else {
        r.mul_(sup->double_factor);
    }
    return r;
}

Buf reduce_of(const at::Tensor& contiguous, const c10d::ReduceOp& op,
              const char* opname, tnt_op_t* tnt_op)
{
    const at::ScalarType s = contiguous.scalar_type();
    const c10d::ReduceOp::RedOpType o = op;
    Buf b;
    TORCH_CHECK(map_dtype(s, &b.dtype), "tnt: ", opname, ": dtype ", s,
                " is not supported for reductions (float32, float64, "
                "float16, bfloat16, int8, uint8, int32, int64, bool, "
                "complex64 and complex128 are)");
    switch (o) {
    case c10d::ReduceOp::SUM: *tnt_op = TNT_SUM; break;
    case c10d::ReduceOp::PREMUL_SUM: *tnt_op = TNT_SUM; break;
    case c10d::ReduceOp::AVG: *tnt_op = TNT_AVG; break;
    case c10d::ReduceOp::PRODUCT: *tnt_op = TNT_PROD; break;
    case c10d::ReduceOp::MIN: *tnt_op = TNT_MIN; break;
    case c10d::ReduceOp::MAX: *tnt_op = TNT_MAX; break;
    default:
        TORCH_CHECK(false, "tnt: ", opname, ": ReduceOp ", op_name(o),
                    " is not supported (SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM "
                    "are)");
    }
    if (s == at::kBool) {
        TORCH_CHECK(o != c10d::ReduceOp::AVG, "tnt: ", opname,
                    ": ReduceOp AVG is not defined for bool tensors");
        if (o == c10d::ReduceOp::SUM)
            *tnt_op = TNT_MAX;  // logical or
        else if (o == c10d::ReduceOp::PRODUCT)
            *tnt_op = TNT_MIN;  // logical and
    }
    b.t = contiguous;
    b.ptr = contiguous.data_ptr();
    b.count = contiguous.numel();
    if (contiguous.is_complex()) {
        TORCH_CHECK(o == c10d::ReduceOp::SUM || o == c10d::ReduceOp::AVG,
                    "tnt: ", opname, ": ReduceOp ", op_name(o),
                    " is not defined for complex tensors (SUM and AVG are)");
        b.count *= 2;  // (real, imaginary) pairs
    }
    return b;
}

}  // namespace tnt_torch
