/*
 * Net groups: the lock and progress loop that the communicators sharing
 * connections share (struct tnt_net_group, core/engine.h; the rule in
 * docs/design.md, "Sharing connections between communicators").
 */
#ifndef TNT_CORE_NET_GROUP_H
#define TNT_CORE_NET_GROUP_H

#include "core/engine.h"

/** A new group with one reference (its first communicator's): the lock
 *  and condition variables made, no epoll yet (tnt__progress_start).
 *  NULL when out of memory. */
struct tnt_net_group *tnt__net_group_new(void);
/** Drop one communicator's reference (lock not held); the last frees the
 *  group, whose progress loop is stopped and closed by then. */
void tnt__net_group_put(struct tnt_net_group *g);

#endif /* TNT_CORE_NET_GROUP_H */
