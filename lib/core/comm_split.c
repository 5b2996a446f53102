/*
 * Communicators derived from a live one: tnt_comm_split and tnt_comm_dup.
 *
 * The rule: every rank of the parent calls the same function; ranks of
 * one color form a communicator, ordered by key, then by parent rank.
 * Its table of peers comes from the parent's own collectives, not from a
 * rendezvous at rank 0: two allgathers over the parent (one of each
 * rank's call, color, key and whether it may share, 40 bytes a rank;
 * then one of where each rank landed, with its new transport addresses
 * where the new communicator does not join). Where every rank may
 * (joinable) it joins the parent's net group and shares its
 * connections, over shm with a set of the pairs' areas of its own
 * (choose_area); elsewhere it has transports and connections of its own
 * (its own TCP listener and sockets, shared-memory rings, queue pairs),
 * made as tnt_comm_init does. It carries a context id of its own
 * (comm_id) in every message header and every transport handshake, so
 * messages of two communicators never meet, and once made it depends on
 * its parent in nothing: either may be freed first.
 *
 * Both exchanges use an allgather whose signature no user call has
 * (reduction TNT_OP_DERIVE, which tnt_allgather never posts), so a rank
 * that calls a collective while another calls tnt_comm_split fails with
 * TNT_ERR_MISMATCH on both, by the engine's signature check. Split
 * against dup, or different bad arguments, meet in the first exchange's
 * table, which every rank has the same: every rank returns the same
 * error, and the parent stays usable.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/comm_tp.h"
#include "core/entry.h"
#include "core/timeline.h"
#include "util/error.h"

/* What a rank called, first field of both exchanges. */
#define CALL_SPLIT 0x53504c54 /* "SPLT" */
#define CALL_DUP 0x44555020   /* "DUP " */
#define CALL_BAD 0x42414420   /* "BAD ": this rank's arguments are wrong */

typedef struct wish {
    int64_t call, color, key;
    int64_t joinable;          /* this rank's parent may share (below) */
    int64_t areas_busy;        /* sets of pair areas its group uses */
} wish_t;

/* The second exchange: where a rank landed and its new transports. */
#define LANDED_NONE (-1)       /* TNT_UNDEFINED: in no new communicator */
#define LANDED_FAILED (-2)     /* failed before the exchange */
typedef struct landing {
    int32_t new_rank;          /* or LANDED_* */
    int32_t color;
    tnt_boot_entry_t entry;
} landing_t;

static const char *call_name(int64_t call)
{
    return call == CALL_SPLIT ? "tnt_comm_split"
           : call == CALL_DUP ? "tnt_comm_dup" : "a bad call";
}

/* An allgather of `bytes` a rank over the parent, with the signature no
 * user allgather has. */
static tnt_result_t exchange(tnt_comm_t parent, const char *fn,
                             const void *mine, void *all, size_t bytes)
{
    tnt_entry_op_t op = {TNT_COLL_ALLGATHER, fn, fn, TNT_ENTRY_PER_RANK,
                         NULL};
    tnt_entry_call_t c = {.comm = parent, .send = mine, .recv = all,
                          .count = bytes, .dtype = TNT_U8,
                          .op = TNT_OP_DERIVE};
    return tnt__entry_run(&op, &c);
}

/* A context id for the n-th communicator derived from `parent` with
 * `color`: every rank of the parent counts its derivations alike, so the
 * members agree on it without a message. */
static uint32_t derived_id(const struct tnt_comm *parent, uint32_t nth,
                           int color)
{
    uint64_t h = ((uint64_t)parent->comm_id << 32) ^
                 ((uint64_t)nth << 12) ^ (uint64_t)(uint32_t)color;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    uint32_t id = (uint32_t)h;
    return id > 1 ? id : id + 2; /* 1 is tnt_comm_init's */
}

typedef struct derive {
    tnt_comm_t parent;
    const char *fn;
    int color;
    int exchanged;             /* the second exchange was made */
    int *parent_of;            /* new rank -> parent rank (comm_name.h) */
} derive_t;

/* Any rank that failed before the second exchange fails it for all. */
static tnt_result_t check_landings(const derive_t *d, const landing_t *all)
{
    for (int i = 0; i < d->parent->nranks; i++)
        if (all[i].new_rank == LANDED_FAILED)
            return tnt__error(TNT_ERR_CONNECT, "rank %d: %s: rank %d of the "
                              "parent could not make its part of the new "
                              "communicators", d->parent->rank, d->fn, i);
    return TNT_SUCCESS;
}

static tnt_result_t land(derive_t *d, const landing_t *mine, landing_t *all)
{
    d->exchanged = 1;
    TNT_CHECK(exchange(d->parent, d->fn, mine, all,
                       sizeof(landing_t)));
    return check_landings(d, all);
}

/* The second exchange of communicators that join the parent's group:
 * no addresses, only where each rank landed (failure agreement). */
typedef struct landing_joined {
    int32_t new_rank, color;
} landing_joined_t;

static tnt_result_t land_joined(derive_t *d, int32_t new_rank)
{
    int n = d->parent->nranks;
    landing_joined_t mine = {new_rank, d->color};
    landing_joined_t *all = calloc((size_t)n, sizeof(*all));
    if (!all)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    d->exchanged = 1;
    tnt_result_t rc = exchange(d->parent, d->fn, &mine, all, sizeof(mine));
    for (int i = 0; rc == TNT_SUCCESS && i < n; i++)
        if (all[i].new_rank == LANDED_FAILED)
            rc = tnt__error(TNT_ERR_CONNECT, "rank %d: %s: rank %d of the "
                            "parent could not make its part of the new "
                            "communicators", d->parent->rank, d->fn, i);
    free(all);
    return rc;
}

/* Whether this rank's side of the parent lets a derived communicator
 * share its connections (docs/design.md, "Sharing connections between
 * communicators", steps 4 and 5): every peer over TCP or verbs, whose
 * connections carry the context id and have no pair areas, or over shm
 * with a set of pair areas per communicator (pair_area_contexts), and no
 * recovery mesh (a shrink makes its own). 0: it may not; else how many
 * sets its pairs have (INT32_MAX: no pair has areas). The minimum over
 * all ranks decides, in the first exchange, so every rank decides
 * alike. */
static int64_t joinable(const struct tnt_comm *parent)
{
    if (parent->rec || parent->nranks < 2)
        return 0;
    int64_t sets = INT32_MAX;
    for (int i = 0; i < parent->nranks; i++) {
        const tnt_peer_t *p = &parent->peers[i];
        if (i == parent->rank)
            continue;
        if (!p->tp)
            return 0;
        if (p->tpi == parent->net.area_tpi) {
            unsigned n = tnt__comm_tp_area_contexts(parent);
            if (strcmp(p->tp->name, "shm") != 0 || n < 2)
                return 0;
            sets = n;
        }
        else if (strcmp(p->tp->name, "tcp") != 0 &&
                 strcmp(p->tp->name, "verbs") != 0)
            return 0;
    }
    return sets;
}

/* The sets of pair areas (tnt_comm.area_ctx) that this rank's group
 * has in use, bit by set: its live communicators' and those agreed for
 * one being made. */
static uint64_t areas_busy_locked(const struct tnt_net_group *g)
{
    uint64_t busy = g->area_reserved;
    for (const struct tnt_comm *c = g->comms; c; c = c->group_next)
        busy |= (uint64_t)1 << c->area_ctx;
    return busy;
}

static int64_t areas_busy(const struct tnt_comm *parent)
{
    pthread_mutex_lock(&parent->group->lock);
    uint64_t busy = areas_busy_locked(parent->group);
    pthread_mutex_unlock(&parent->group->lock);
    return (int64_t)busy;
}

/* The set of pair areas for a communicator that joins, from the first
 * exchange: the lowest that no rank of the parent has in use, below the
 * fewest sets any rank's pairs have. 0 where no rank has a pair with
 * areas (the set is never used); -1: none is free (the communicator
 * then makes its own contexts, as before step 5). */
static int64_t choose_area(int64_t sets, uint64_t busy)
{
    if (sets == INT32_MAX)
        return 0;
    for (int64_t c = 1; c < sets && c < 64; c++)
        if (!(busy & ((uint64_t)1 << c)))
            return c;
    return -1;
}

/* Reserve set `ctx` on this rank until its communicator is on the
 * group's list. Only a communicator being made at the same time on
 * another thread of this rank, from a communicator of the same group,
 * can have taken it since the first exchange: a member then fails the
 * call (on every rank, through the landing exchange) rather than share
 * the set. */
static tnt_result_t take_area(tnt_comm_t parent, const char *fn,
                              int64_t ctx)
{
    struct tnt_net_group *g = parent->group;
    uint64_t bit = (uint64_t)1 << ctx;
    pthread_mutex_lock(&g->lock);
    int taken = ctx > 0 && (areas_busy_locked(g) & bit);
    if (!taken && ctx > 0)
        g->area_reserved |= bit;
    pthread_mutex_unlock(&g->lock);
    if (taken)
        return tnt__error(TNT_ERR_INVALID_USAGE, "rank %d: %s: another "
                          "communicator sharing these connections, made "
                          "on another thread at the same time, took the "
                          "shared-memory areas this one was to have; make "
                          "communicators one at a time per process",
                          parent->rank, fn);
    return TNT_SUCCESS;
}

/* The new communicator (NULL: it failed) gets set ctx, zeroed on this
 * rank's side of each of its pairs before any peer can use it there: a
 * peer starts its first collective on it only after the landing
 * exchange, which needs this rank's part, sent after this. */
static void give_area(tnt_comm_t parent, tnt_comm_t comm, int64_t ctx)
{
    struct tnt_net_group *g = parent->group;
    pthread_mutex_lock(&g->lock);
    g->area_reserved &= ~((uint64_t)1 << ctx);
    if (comm) {
        comm->area_ctx = (unsigned)ctx;
        if (ctx > 0)
            tnt__comm_tp_pair_area_clear(comm);
    }
    pthread_mutex_unlock(&g->lock);
}

/* The boot function of a derived communicator (core/comm.h): this rank's
 * entry from its new listeners, the others' from the parent. */
static tnt_result_t derive_boot(void *ctx, const tnt_boot_args_t *a,
                                tnt_boot_entry_t *table)
{
    derive_t *d = ctx;
    landing_t mine;
    memset(&mine, 0, sizeof(mine));
    mine.new_rank = a->rank;
    mine.color = d->color;
    mine.entry.rank = a->rank;
    snprintf(mine.entry.host, sizeof(mine.entry.host), "%s", a->host);
    tnt_result_t lrc = a->listen(a->listen_arg, d->parent->net.bind_ip,
                                 &mine.entry);
    char why[512] = "";
    if (lrc != TNT_SUCCESS) {
        snprintf(why, sizeof(why), "%s", tnt_last_error());
        mine.new_rank = LANDED_FAILED;
    }
    int n = d->parent->nranks;
    landing_t *all = calloc((size_t)n, sizeof(*all));
    if (!all)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    tnt_result_t rc = land(d, &mine, all);
    if (lrc != TNT_SUCCESS)
        rc = tnt__error_str(lrc, why);
    int found = 0;
    for (int i = 0; rc == TNT_SUCCESS && i < n; i++) {
        if (all[i].new_rank < 0 || all[i].color != d->color)
            continue;
        if (all[i].new_rank >= a->nranks ||
            all[i].entry.addr_len > sizeof(all[i].entry.addr)) {
            rc = tnt__error(TNT_ERR_PROTOCOL, "rank %d: %s: rank %d of the "
                            "parent sent a malformed entry", d->parent->rank,
                            d->fn, i);
            break;
        }
        table[all[i].new_rank] = all[i].entry;
        d->parent_of[all[i].new_rank] = i;
        found++;
    }
    if (rc == TNT_SUCCESS && found != a->nranks)
        rc = tnt__error(TNT_ERR_INTERNAL, "rank %d: %s: %d ranks of color %d "
                        "expected, %d came", d->parent->rank, d->fn,
                        a->nranks, d->color, found);
    free(all);
    return rc;
}

/* The new communicator's place of this rank from everyone's wishes:
 * same color, ordered by key, then parent rank. *size 0: none. */
static void place(const wish_t *w, int n, int me, int *rank, int *size,
                  int *parent_of)
{
    *rank = 0;
    *size = 0;
    if (w[me].color == TNT_UNDEFINED)
        return;
    for (int i = 0; i < n; i++) {
        if (w[i].color != w[me].color)
            continue;
        (*size)++;
        if (w[i].key < w[me].key || (w[i].key == w[me].key && i < me))
            (*rank)++;
    }
    /* Every member's new rank, the same rule from its side. */
    for (int i = 0; parent_of && i < n; i++) {
        if (w[i].color != w[me].color)
            continue;
        int r = 0;
        for (int j = 0; j < n; j++)
            if (w[j].color == w[me].color &&
                (w[j].key < w[i].key || (w[j].key == w[i].key && j < i)))
                r++;
        parent_of[r] = i;
    }
}

/* Every rank gets the same table of wishes: the same verdict. */
static tnt_result_t check_wishes(tnt_comm_t parent, const char *fn,
                                 const wish_t *w)
{
    int n = parent->nranks;
    for (int i = 0; i < n; i++)
        if (w[i].call == CALL_BAD)
            return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: rank %d "
                              "passed color %lld; expected >= 0 or "
                              "TNT_UNDEFINED", parent->rank, fn, i,
                              (long long)w[i].color);
    for (int i = 1; i < n; i++)
        if (w[i].call != w[0].call)
            return tnt__error(TNT_ERR_MISMATCH, "rank %d: mismatched calls: "
                              "rank 0 called %s, rank %d called %s",
                              parent->rank, call_name(w[0].call), i,
                              call_name(w[i].call));
    return TNT_SUCCESS;
}

/* After the landing exchange, whose own result is lrc: the call's
 * failure rc (its message why, saved before the exchange) wins; else
 * every member has joined, and the new communicator's first collectives
 * start. A failure frees the new communicator. */
static tnt_result_t after_landing(tnt_result_t rc, const char *why,
                                  tnt_result_t lrc, tnt_comm_t comm)
{
    if (rc != TNT_SUCCESS)
        return tnt__error_str(rc, why);
    if (lrc == TNT_SUCCESS && comm)
        lrc = tnt__tl_start(comm);
    if (lrc != TNT_SUCCESS && comm)
        tnt_comm_free(comm);
    return lrc;
}

static tnt_result_t derive(tnt_comm_t parent, int64_t call, int color,
                           int key, tnt_comm_t *out)
{
    const char *fn = call_name(call);
    TNT_CHECK(tnt__comm_check(parent, fn));
    if (!out)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: output "
                          "pointer is NULL", parent->rank, fn);
    *out = NULL;
    int n = parent->nranks;
    wish_t mine = {call, color, key, joinable(parent), areas_busy(parent)};
    if (color < 0 && color != TNT_UNDEFINED)
        mine.call = CALL_BAD;
    wish_t *w = calloc((size_t)n, sizeof(*w));
    if (!w)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    tnt_result_t rc = exchange(parent, fn, &mine, w, sizeof(mine));
    if (rc == TNT_SUCCESS)
        rc = check_wishes(parent, fn, w);
    int rank = 0, size = 0, join = 0;
    int64_t sets = INT64_MAX, area = -1;
    uint64_t busy = 0;
    int *parent_of = rc == TNT_SUCCESS ? calloc((size_t)n, sizeof(int))
                                       : NULL;
    if (rc == TNT_SUCCESS && !parent_of)
        rc = tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    if (rc == TNT_SUCCESS)
        place(w, n, parent->rank, &rank, &size, parent_of);
    for (int i = 0; rc == TNT_SUCCESS && i < n; i++) {
        sets = w[i].joinable < sets ? w[i].joinable : sets;
        busy |= (uint64_t)w[i].areas_busy;
    }
    /* No rank refused, and a set of pair areas is free for it. */
    if (rc == TNT_SUCCESS && sets > 0)
        area = choose_area(sets, busy);
    join = area >= 0;
    free(w);
    if (rc != TNT_SUCCESS) {
        free(parent_of);
        return rc;
    }
    /* Counted alike on every rank of the parent, whatever its color. */
    uint32_t nth = ++parent->derived;
    derive_t d = {parent, fn, color, 0, parent_of};
    tnt_comm_t comm = NULL;
    if (!join) /* the boot fills the others */
        d.parent_of[rank] = parent->rank;
    if (join && size > 0)
        rc = take_area(parent, fn, area);
    if (rc == TNT_SUCCESS && size > 0) {
        tnt_config_t cfg = TNT_CONFIG_INIT;
        cfg.rank = rank;
        cfg.nranks = size;
        cfg.timeout_s = parent->params.timeout_s;
        cfg.reproducible = parent->params.reproducible ? 1 : -1;
        tnt_comm_lineage_t lin = {call == CALL_SPLIT ? "split" : "dup",
                                  color, nth, d.parent_of};
        tnt_comm_origin_t o = {derive_boot, &d, parent,
                               derived_id(parent, nth, color), &lin, join};
        rc = tnt__comm_create(&cfg, &o, &comm);
        if (join)
            give_area(parent, rc == TNT_SUCCESS ? comm : NULL, area);
    }
    free(d.parent_of);
    /* A joined communicator is on the group's list under its id before
     * this exchange, so a peer that finishes it first and sends at once
     * finds it (its messages queue as early ones). */
    if (join) {
        char why[512];
        snprintf(why, sizeof(why), "%s", tnt_last_error());
        tnt_result_t lrc = land_joined(&d, rc != TNT_SUCCESS ? LANDED_FAILED
                                           : size > 0 ? rank : LANDED_NONE);
        lrc = after_landing(rc, why, lrc, comm);
        if (lrc != TNT_SUCCESS)
            return lrc;
    }
    /* A rank in no communicator, alone in one (no table to exchange), or
     * failed before its exchange still takes part in it, so that no rank
     * waits for it and a failure reaches every rank. */
    if (!d.exchanged) {
        char why[512];
        snprintf(why, sizeof(why), "%s", tnt_last_error());
        landing_t l;
        memset(&l, 0, sizeof(l));
        l.new_rank = rc != TNT_SUCCESS ? LANDED_FAILED : LANDED_NONE;
        l.color = color;
        landing_t *all = calloc((size_t)n, sizeof(*all));
        tnt_result_t lrc = all ? land(&d, &l, all)
                               : tnt__error(TNT_ERR_NO_MEMORY, "out of "
                                            "memory");
        free(all);
        lrc = after_landing(rc, why, lrc, comm);
        if (lrc != TNT_SUCCESS)
            return lrc;
    }
    if (rc != TNT_SUCCESS)
        return rc;
    *out = comm;
    return TNT_SUCCESS;
}

TNT_API tnt_result_t tnt_comm_split(tnt_comm_t comm, int color, int key,
                                    tnt_comm_t *newcomm)
{
    return derive(comm, CALL_SPLIT, color, key, newcomm);
}

TNT_API tnt_result_t tnt_comm_dup(tnt_comm_t comm, tnt_comm_t *newcomm)
{
    if (tnt__comm_check(comm, "tnt_comm_dup") != TNT_SUCCESS)
        return TNT_ERR_INVALID_COMM;
    return derive(comm, CALL_DUP, 0, comm->rank, newcomm);
}
