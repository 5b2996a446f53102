/*
 * Net groups (core/net_group.h): made with a communicator, freed with the
 * last communicator that holds them.
 */
#include <stdlib.h>
#include <time.h>

#include "core/net_group.h"

struct tnt_net_group *tnt__net_group_new(void)
{
    struct tnt_net_group *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->refs = 1;
    g->progress.epfd = g->progress.wakefd = -1;
    pthread_mutex_init(&g->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->progress.cond, &ca);
    pthread_cond_init(&g->progress.park, &ca);
    pthread_condattr_destroy(&ca);
    return g;
}

void tnt__net_group_join(struct tnt_net_group *g, struct tnt_comm *comm)
{
    struct tnt_comm **pp = &g->comms;
    while (*pp)
        pp = &(*pp)->group_next;
    comm->group_next = NULL;
    *pp = comm;
    if (!g->net_owner)
        g->net_owner = comm;
    g->gen++;
}

void tnt__net_group_leave(struct tnt_net_group *g, struct tnt_comm *comm)
{
    for (struct tnt_comm **pp = &g->comms; *pp; pp = &(*pp)->group_next)
        if (*pp == comm) {
            *pp = comm->group_next;
            break;
        }
    if (g->net_owner == comm)
        g->net_owner = NULL;
    g->gen++;
}

struct tnt_comm *tnt__net_group_find(const struct tnt_net_group *g,
                                     uint32_t comm_id)
{
    for (struct tnt_comm *c = g->comms; c; c = c->group_next)
        if (c->comm_id == comm_id)
            return c;
    return NULL;
}

void tnt__net_group_put(struct tnt_net_group *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    int last = --g->refs == 0;
    pthread_mutex_unlock(&g->lock);
    if (!last)
        return;
    pthread_cond_destroy(&g->progress.cond);
    pthread_cond_destroy(&g->progress.park);
    pthread_mutex_destroy(&g->lock);
    free(g);
}
