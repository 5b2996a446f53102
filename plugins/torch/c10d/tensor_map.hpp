// How torch tensors and reduce ops map onto the library's buffers, element
// types and operations; one clear RuntimeError for everything that does
// not map.
#pragma once

#include <cstddef>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "tnt/tnt.h"

namespace tnt_torch {

// A contiguous tensor as the library sees it (CPU or CUDA: the library
// stages device memory through pinned host memory itself).
struct Buf {
    at::Tensor t;  // what the library reads or writes (may be a staging copy)
    void* ptr = nullptr;
    size_t count = 0;  // elements of `dtype`
    tnt_dtype_t dtype = TNT_U8;
};

// Refuses anything but a dense CPU or CUDA tensor; names the op and the
// tensor.
void check_tensor(const at::Tensor& t, const char* op, const char* what);
// t itself if contiguous, else a contiguous copy (the caller copies back).
at::Tensor contiguous_of(const at::Tensor& t);
// A contiguous tensor's bytes, for operations that only move data.
Buf bytes_of(const at::Tensor& contiguous);
// What a reduction with `op` reads of t: t itself if contiguous, else a
// contiguous copy; for PREMUL_SUM (floating point only) a copy of t times
// the op's factor, which the library then sums (the caller copies the
// result back where the tensor is also the output).
at::Tensor reduce_input(const at::Tensor& t, const c10d::ReduceOp& op,
                        const char* opname);
// A contiguous tensor's elements for a reduction with `op`, and the
// library's op (PREMUL_SUM: the SUM of reduce_input's products; bool:
// SUM is OR and PRODUCT is AND, as NCCL does; complex: the real and
// imaginary parts as float pairs, SUM and AVG only).
Buf reduce_of(const at::Tensor& contiguous, const c10d::ReduceOp& op,
              const char* opname, tnt_op_t* tnt_op);

}  // namespace tnt_torch
