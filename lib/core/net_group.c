/*
 * Net groups (core/net_group.h): made with a communicator, freed with the
 * last communicator that holds them.
 */
#include <stdlib.h>
#include <string.h>
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
    /* A shared group's connections outlive their first communicator:
     * the next one takes the connection-wide upcalls. */
    if (g->net_owner == comm)
        g->net_owner = g->comms;
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

int tnt__net_group_share(struct tnt_net_group *g)
{
    if (g->shared)
        return 0;
    struct tnt_comm *o = g->net_owner;
    g->conn = calloc((size_t)o->nranks, sizeof(*g->conn));
    if (!g->conn)
        return -1;
    g->nranks = o->nranks;
    for (int i = 0; i < o->nranks; i++) {
        g->conn[i].ep = o->peers[i].ep;
        g->conn[i].connecting = o->peers[i].connecting;
        g->conn[i].dead = o->peers[i].dead;
    }
    g->drop_cookie.type = TNT_COOKIE_DROP;
    g->shared = 1;
    return 0;
}

int tnt__net_tcp_or_verbs(const struct tnt_comm *comm)
{
    for (int i = 0; i < comm->nranks; i++) {
        const tnt_peer_t *p = &comm->peers[i];
        if (i == comm->rank)
            continue;
        if (!p->tp || (strcmp(p->tp->name, "tcp") != 0 &&
                       strcmp(p->tp->name, "verbs") != 0) ||
            p->tpi == comm->net.area_tpi)
            return 0;
    }
    return 1;
}

struct tnt_notice_copy *tnt__net_group_notice(struct tnt_net_group *g,
                                              const tnt_msg_hdr_t *hdr,
                                              const char *text, size_t len)
{
    struct tnt_notice_copy *n = calloc(1, sizeof(*n));
    if (!n)
        return NULL;
    n->ck.type = TNT_COOKIE_NOTICE_TX;
    n->hdr = *hdr;
    memcpy(n->text, text, len < TNT_NOTICE_MAX ? len : TNT_NOTICE_MAX);
    n->next = g->notices;
    g->notices = n;
    return n;
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
    while (g->notices) {
        struct tnt_notice_copy *n = g->notices;
        g->notices = n->next;
        free(n);
    }
    free(g->conn);
    free(g->discard);
    while (g->discard_old) {
        struct tnt_discard_old *o = g->discard_old;
        g->discard_old = o->next;
        free(o->buf);
        free(o);
    }
    pthread_cond_destroy(&g->progress.cond);
    pthread_cond_destroy(&g->progress.park);
    pthread_mutex_destroy(&g->lock);
    free(g);
}
