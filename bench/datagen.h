/*
 * Deterministic test and benchmark data: the value of element i on rank r
 * is a function of (seed, rank, index) alone, so every rank can compute
 * the expected result of a collective by itself, without a gather
 * (the nccl-tests approach). Shared by tnt-bench and the test suite.
 *
 * Values are small integers (or, for PROD, powers of two with a sign) so
 * that SUM/PROD/MIN/MAX results are exact in every dtype and independent of
 * the order of reduction; AVG is checked with a tolerance of one unit in
 * the last place of the dtype.
 */
#ifndef TNT_BENCH_DATAGEN_H
#define TNT_BENCH_DATAGEN_H

#include <stddef.h>
#include <stdint.h>

#include "tnt/tnt.h"

/** Element i of rank `rank` as a double (exactly representable in dtype). */
double tnt_gen_value(uint64_t seed, int rank, size_t i, tnt_dtype_t dtype,
                     tnt_op_t op);
/** Fill buf (count elements of dtype) with rank's input. */
void tnt_gen_fill(void *buf, size_t count, tnt_dtype_t dtype, tnt_op_t op,
                  uint64_t seed, int rank);
/** Fill buf with a value that no correct result has (to catch elements a
 *  collective forgot to write). */
void tnt_gen_poison(void *buf, size_t count, tnt_dtype_t dtype);
/** Expected element i of an allreduce over `nranks` ranks, as a double. */
double tnt_gen_expected(uint64_t seed, int nranks, size_t i,
                        tnt_dtype_t dtype, tnt_op_t op);
/** Number of elements of buf (an allreduce result, global indices
 *  first_index .. first_index+count-1) that differ from the expected value
 *  (bitwise; AVG of a float type: within one unit in the last place). The
 *  global index of the first wrong one goes to *first_wrong if not NULL
 *  (SIZE_MAX when none is wrong). For reduce-scatter, pass rank*count as
 *  first_index. */
size_t tnt_gen_check_allreduce(const void *buf, size_t first_index,
                               size_t count, tnt_dtype_t dtype, tnt_op_t op,
                               uint64_t seed, int nranks,
                               size_t *first_wrong);
/** Read element i of buf as a double (any dtype). */
double tnt_gen_load(const void *buf, size_t i, tnt_dtype_t dtype);
/** 64-bit FNV-1a hash of bytes, to compare results across ranks. */
uint64_t tnt_gen_hash(const void *buf, size_t bytes);

#endif /* TNT_BENCH_DATAGEN_H */
