/*
 * Words for a collective (describe.c): its kind's name and its
 * signature's description, and whether two signatures agree.
 */
#ifndef TNT_CORE_DESCRIBE_H
#define TNT_CORE_DESCRIBE_H

#include <stddef.h>

#include "core/engine.h"

/** "allreduce", "broadcast", ... for a TNT_COLL_* kind. */
const char *tnt__coll_kind_name(int kind);
/** "allreduce(count=.., dtype=.., op=.., root=.., algo=..)" */
void tnt__describe_sig(const tnt_msg_hdr_t *h, char *buf, size_t len);
/** Do two headers carry the same signature? An alltoallv's and a
 *  send/recv's counts are per message and not compared here. */
int tnt__sig_equal(const tnt_msg_hdr_t *a, const tnt_msg_hdr_t *b);

#endif /* TNT_CORE_DESCRIBE_H */
