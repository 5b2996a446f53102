/*
 * Communicator helpers shared by the API files.
 */
#ifndef TNT_CORE_COMM_H
#define TNT_CORE_COMM_H

#include "core/engine.h"

/** TNT_SUCCESS if comm is a live communicator, else TNT_ERR_INVALID_COMM
 *  with a message naming `fn`. Never dereferences comm. */
tnt_result_t tnt__comm_check(tnt_comm_t comm, const char *fn);

/** The arguments of a collective as the public calls post it (also used
 *  to prepare for collectives ahead of time). */
tnt_coll_args_t tnt__coll_args(tnt_comm_t comm, int kind, size_t count,
                               tnt_dtype_t dtype, tnt_op_t op, int root,
                               int in_place);

#endif /* TNT_CORE_COMM_H */
