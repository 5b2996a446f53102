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
/** The transport's (net owner's) rank of comm's rank r. */
static inline int tnt__net_rank(const struct tnt_comm *comm, int r)
{
    return comm->to_net ? comm->to_net[r] : r;
}
/** comm's rank of the transport's rank `net`; -1: not a member. */
static inline int tnt__net_local(const struct tnt_comm *comm, int net)
{
    if (net < 0 || net >= (comm->to_net ? comm->group->nranks
                                        : comm->nranks))
        return -1;
    return comm->from_net ? comm->from_net[net] : net;
}
/** Make g shared (lock held): its connection table from the net owner's
 *  peers, once. 0, or -1 when out of memory. */
int tnt__net_group_share(struct tnt_net_group *g);
/** Whether every peer of comm's is over TCP or verbs
 *  (no pair areas, not a plugin): the connections a shrink's
 *  communicator may keep (comm_shrink.c), and those a communicator with
 *  a recovery listener shares from its creation on, so that its failure
 *  forgets them rather than closing them (comm.c). Lock held or not yet
 *  shared. */
int tnt__net_tcp_or_verbs(const struct tnt_comm *comm);
/** Keep a copy of a failure notice for a shared connection (lock held);
 *  NULL when out of memory. */
struct tnt_notice_copy *tnt__net_group_notice(struct tnt_net_group *g,
                                              const tnt_msg_hdr_t *hdr,
                                              const char *text, size_t len);
/** Drop one communicator's reference (lock not held); the last frees the
 *  group, whose progress loop is stopped and closed by then. */
void tnt__net_group_put(struct tnt_net_group *g);

#endif /* TNT_CORE_NET_GROUP_H */
