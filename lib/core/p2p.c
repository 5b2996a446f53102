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

void tnt__p2p_free(struct tnt_comm *comm)
{
    if (comm->p2p)
        free(comm->p2p->e);
    free(comm->p2p);
    comm->p2p = NULL;
}
