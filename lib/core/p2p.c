/*
 * The p2p counters and matching (see p2p.h). Counters live in a hash
 * table of (direction, peer, tag) -> next number, grown by doubling; an
 * application uses few distinct tags per peer, so the table stays small.
 */
#include <stdlib.h>

#include "core/engine_internal.h"
#include "core/p2p.h"

struct tnt_p2p_seqs {
    struct tnt_p2p_entry {
        uint64_t key;  /* 1 + (send, peer, tag); 0: free */
        uint64_t next;
    } *e;
    size_t cap, used;
};

static uint64_t key_of(int send, int peer, uint32_t tag)
{
    return 1 + (((uint64_t)(uint32_t)peer << 32 | tag) << 1 | (send != 0));
}

static size_t slot_of(uint64_t key, size_t cap)
{
    key ^= key >> 31;
    key *= 0x9e3779b97f4a7c15ULL;
    return (size_t)(key >> 17) & (cap - 1);
}

static struct tnt_p2p_entry *lookup(struct tnt_p2p_seqs *t, uint64_t key)
{
    size_t i = slot_of(key, t->cap);
    while (t->e[i].key && t->e[i].key != key)
        i = (i + 1) & (t->cap - 1);
    return &t->e[i];
}

static int grow(struct tnt_p2p_seqs *t)
{
    size_t cap = t->cap ? 2 * t->cap : 64;
    struct tnt_p2p_entry *old = t->e, *e = calloc(cap, sizeof(*e));
    if (!e)
        return -1;
    size_t oldcap = t->cap;
    t->e = e;
    t->cap = cap;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].key)
            *lookup(t, old[i].key) = old[i];
    free(old);
    return 0;
}

uint64_t tnt__p2p_next_seq(struct tnt_comm *comm, int send, int peer,
                           uint32_t tag)
{
    if (!comm->p2p && !(comm->p2p = calloc(1, sizeof(*comm->p2p))))
        return 0;
    struct tnt_p2p_seqs *t = comm->p2p;
    if (2 * (t->used + 1) > t->cap && grow(t) != 0)
        return 0;
    uint64_t key = key_of(send, peer, tag);
    struct tnt_p2p_entry *e = lookup(t, key);
    if (!e->key) {
        e->key = key;
        e->next = 0;
        t->used++;
    }
    return TNT_P2P_SEQ_BIT | e->next++;
}

struct tnt_request *tnt__p2p_find(struct tnt_comm *comm, int peer,
                                  const tnt_msg_hdr_t *h)
{
    int for_send = (h->step & TNT_STEP_CTS) != 0;
    uint32_t tag = h->step & ~TNT_STEP_CTL;
    for (struct tnt_request *r = tnt__active_first(comm); r;
         r = tnt__active_next(comm, r)) {
        if (r->args.kind != TNT_COLL_P2P || r->seq != h->seq)
            continue;
        const tnt_sop_t *op = &r->sched->ops[0];
        if (op->peer == peer && op->step == tag &&
            (op->kind == TNT_SOP_SEND) == for_send)
            return r;
    }
    return NULL;
}

/* The seq the next receive from `peer` with `tag` will take, without
 * counting it. */
static uint64_t peek_recv_seq(const struct tnt_comm *comm, int peer,
                              uint32_t tag)
{
    const struct tnt_p2p_seqs *t = comm->p2p;
    if (!t || !t->cap)
        return TNT_P2P_SEQ_BIT;
    uint64_t key = key_of(0, peer, tag);
    size_t i = slot_of(key, t->cap);
    while (t->e[i].key && t->e[i].key != key)
        i = (i + 1) & (t->cap - 1);
    return TNT_P2P_SEQ_BIT | (t->e[i].key ? t->e[i].next : 0);
}

/* Has an early message (or RTS) from peer p come that is its next one
 * with `tag`, and taken by no receive? */
static int next_message_waits(const struct tnt_comm *comm, int p,
                              uint32_t tag)
{
    uint64_t seq = peek_recv_seq(comm, p, tag);
    for (const tnt_unexp_t *u = comm->peers[p].unexp_head; u; u = u->next)
        if (u->hdr.seq == seq && !(u->hdr.step & TNT_STEP_CTS) &&
            (u->hdr.step & ~TNT_STEP_CTL) == tag && !u->claimed)
            return 1;
    return 0;
}

static struct tnt_request *any_of(tnt_list_node_t *it)
{
    return TNT_LIST_ENTRY(it, struct tnt_request, any_link);
}

/* Does a receive from any source with `tag` wait, posted before `stop`
 * (NULL: at all)? */
static int any_before(const struct tnt_comm *comm, uint32_t tag,
                      const tnt_list_node_t *stop)
{
    for (tnt_list_node_t *it = comm->reqs.any.head.next;
         it != &comm->reqs.any.head && it != stop; it = it->next)
        if (any_of(it)->args.root == TNT_ANY_SOURCE &&
            any_of(it)->args.tag == tag)
            return 1;
    return 0;
}

int tnt__p2p_any_waits(const struct tnt_comm *comm, uint32_t tag)
{
    return !tnt__list_empty(&comm->reqs.any) && any_before(comm, tag, NULL);
}

void tnt__p2p_any_match(struct tnt_comm *comm)
{
    int n = comm->nranks;
    /* Each start may take the message another one looked at, or free a
     * named receive behind it: look again from the earliest posted. */
    for (int started = 1; started && comm->state == TNT_COMM_OK;) {
        started = 0;
        tnt_list_node_t *it, *nx;
        TNT_LIST_FOREACH_SAFE(&comm->reqs.any, it, nx) {
            struct tnt_request *r = any_of(it);
            if (r->args.root != TNT_ANY_SOURCE) {
                if (any_before(comm, r->args.tag, it))
                    continue;
                tnt__engine_start_any(comm, r, r->args.root);
                started = 1;
                break;
            }
            int peer = -1;
            for (int k = 0; k < n && peer < 0; k++) {
                int q = (comm->reqs.any_next + k) % n;
                if (q != comm->rank && next_message_waits(comm, q,
                                                          r->args.tag))
                    peer = q;
            }
            if (peer < 0)
                continue;
            comm->reqs.any_next = (peer + 1) % n;
            tnt__engine_start_any(comm, r, peer);
            started = 1;
            break;
        }
    }
}

void tnt__p2p_free(struct tnt_comm *comm)
{
    if (comm->p2p)
        free(comm->p2p->e);
    free(comm->p2p);
    comm->p2p = NULL;
}
