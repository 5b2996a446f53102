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
/** Put comm on the list of g's communicators (lock held); the first is
 *  the group's net owner. */
void tnt__net_group_join(struct tnt_net_group *g, struct tnt_comm *comm);
/** Take comm off that list (lock held). */
void tnt__net_group_leave(struct tnt_net_group *g, struct tnt_comm *comm);
/** The communicator of g with context id `comm_id`; NULL: none here (not
 *  made yet, or freed). Lock held. */
struct tnt_comm *tnt__net_group_find(const struct tnt_net_group *g,
                                     uint32_t comm_id);
/** The net owner of the group that a transport's `core` pointer is
 *  (env->core: the group, core/demux.c). */
static inline struct tnt_comm *tnt__net_owner(void *core)
{
    return ((struct tnt_net_group *)core)->net_owner;
}
/** Drop one communicator's reference (lock not held); the last frees the
 *  group, whose progress loop is stopped and closed by then. */
void tnt__net_group_put(struct tnt_net_group *g);

#endif /* TNT_CORE_NET_GROUP_H */
