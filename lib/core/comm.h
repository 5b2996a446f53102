/*
 * The registry of live communicators, as the public calls check a handle.
 */
#ifndef TNT_CORE_COMM_H
#define TNT_CORE_COMM_H

#include "core/engine.h"

/** TNT_SUCCESS if comm is a live communicator, else TNT_ERR_INVALID_COMM
 *  with a message naming `fn`. Never dereferences comm. */
tnt_result_t tnt__comm_check(tnt_comm_t comm, const char *fn);

#endif /* TNT_CORE_COMM_H */
