/*
 * The registry of live communicators (comm_live.c): every public call
 * checks its handle here before it reads anything of it.
 */
#ifndef TNT_CORE_COMM_LIVE_H
#define TNT_CORE_COMM_LIVE_H

#include "tnt/tnt.h"

/** TNT_SUCCESS if comm is a live communicator, else TNT_ERR_INVALID_COMM
 *  with a message naming `fn`. Never dereferences comm. */
tnt_result_t tnt__comm_check(tnt_comm_t comm, const char *fn);
/** Enter a communicator that is ready for calls: 0, or -1 out of memory. */
int tnt__comm_live_add(tnt_comm_t comm);
/** Take it out (tnt_comm_free): 1 if it was live, else 0 (freed twice,
 *  or never created), and then nothing of it may be touched. */
int tnt__comm_live_remove(tnt_comm_t comm);

#endif /* TNT_CORE_COMM_LIVE_H */
