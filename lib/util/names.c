/*
 * Small public helpers: dtype sizes and names, op names, and Tarantella's
 * micro-batch split.
 */
#include "util/error.h"

static const size_t dtype_sizes[TNT_DTYPE_COUNT] = {4, 8, 2, 2, 1, 1,
                                                    4, 4, 8, 8};
static const char *const dtype_names[TNT_DTYPE_COUNT] = {
    "f32", "f64", "f16", "bf16", "i8", "u8", "i32", "u32", "i64", "u64"};
static const char *const op_names[TNT_OP_COUNT] = {"sum", "avg", "prod",
                                                   "min", "max"};

TNT_API size_t tnt_dtype_size(tnt_dtype_t dtype)
{
    if ((unsigned)dtype >= TNT_DTYPE_COUNT)
        return 0;
    return dtype_sizes[dtype];
}

TNT_API const char *tnt_dtype_name(tnt_dtype_t dtype)
{
    if ((unsigned)dtype >= TNT_DTYPE_COUNT)
        return "unknown";
    return dtype_names[dtype];
}

TNT_API const char *tnt_op_name(tnt_op_t op)
{
    if ((unsigned)op >= TNT_OP_COUNT)
        return "unknown";
    return op_names[op];
}

TNT_API tnt_result_t tnt_micro_batch(size_t global_batch, int rank, int size,
                                     size_t *offset, size_t *count)
{
    if (!offset || !count)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_micro_batch: NULL "
                          "output pointer");
    if (size <= 0 || rank < 0 || rank >= size)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_micro_batch: rank %d of "
                          "size %d; expected size >= 1 and 0 <= rank < size",
                          rank, size);
    size_t base = global_batch / (size_t)size;
    size_t extra = global_batch % (size_t)size;
    size_t r = (size_t)rank;
    *count = base + (r < extra ? 1 : 0);
    *offset = r * base + (r < extra ? r : extra);
    return TNT_SUCCESS;
}
