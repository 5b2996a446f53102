/*
 * tnt_comm_shrink and tnt_comm_failed_ranks: the survivors of a
 * communicator agree on which ranks are dead and make a communicator of
 * themselves, in their old order.
 *
 * The agreement is flooding consensus with a perfect failure detector
 * (Cachin, Guerraoui, Rodrigues, "Reliable and Secure Distributed
 * Programming", 5.1), over the recovery mesh (core/recovery.h), whose
 * detector is the end of a process's connections. In round r every rank
 * sends the dead set it knows to every rank it has not seen die and
 * waits for each one's round-r set (or its death); it decides once a
 * round has heard from the same ranks as the round before (no death
 * seen in between: it then holds every set that any rank still alive
 * holds), and sends the decision, which every rank that gets it adopts
 * and passes on. A rank that dies during the agreement joins the dead
 * set if anyone deciding saw it die; one that dies after its last
 * message fails the making of the new communicator (below) instead.
 *
 * Then the members (every rank not in the agreed set) create the new
 * communicator, tnt__comm_create with a boot function that sends this
 * rank's boot entry to every member over the mesh and takes theirs, and
 * say to each other that they have it (all_ready): a member that died
 * after the agreement fails the call, with TNT_ERR_PEER_LOST, on every
 * member that misses its entry or its word; a member that got both from
 * everyone gets the communicator, on which a member that died after
 * saying its word is a lost peer at the first collective (shrink it
 * again). No wait lasts past the communicator's deadline (TNT_TIMEOUT)
 * from the call.
 *
 * Where every member's connections to the other members are over TCP or
 * verbs and none is lost (its communicator shared them from its creation,
 * comm.c, so that its failure forgot them instead of closing them), the
 * new communicator joins the old one's net group, as a split does
 * (docs/design.md, "Sharing connections between communicators", step
 * 6): no boot entry, listener, progress thread or connection of its own;
 * the connections to the dead are lost in the group, those to the
 * members kept, and late messages of the old communicator on them are
 * dropped (core/demux.c). The members decide it alike: each says in one
 * more exchange (TNT_REC_JOIN) whether its side may, and the AND decides.
 * The old communicator's recovery listener then becomes the new one's
 * (the survivors' listeners are the same sockets).
 *
 * The old communicator is not touched: its calls keep failing as they
 * did, and it is freed as any other. On a communicator with no dead
 * rank, tnt_comm_shrink is a copy (every rank must call it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/net_group.h"
#include "core/recovery.h"
#include "core/timeline.h"
#include "util/clock.h"
#include "util/error.h"

static int bit(const uint64_t *b, int i)
{
    return (int)((b[i / 64] >> (i % 64)) & 1u);
}

static void set_bit(uint64_t *b, int i)
{
    b[i / 64] |= (uint64_t)1 << (i % 64);
}

typedef struct shrink {
    struct tnt_comm *comm;
    tnt_rec_mesh_t *mesh;
    uint64_t dead[TNT_REC_WORDS];  /* the agreed set, once decided */
    int *old_of;                   /* new rank -> old rank */
    int nmembers;
    int join;                      /* the new one joins comm's group */
} shrink_t;

/* Send the decision to every rank not in it (best effort: a dead one
 * is in it or will fail the next phase). */
static void tell_decision(shrink_t *s)
{
    struct tnt_comm *c = s->comm;
    tnt_rec_msg_t msg;
    memset(&msg, 0, sizeof(msg));
    msg.type = TNT_REC_DECIDED;
    memcpy(msg.bits, s->dead, sizeof(msg.bits));
    for (int q = 0; q < c->nranks; q++)
        if (q != c->rank && !bit(s->dead, q))
            tnt__rec_send(s->mesh, q, &msg);
}

static tnt_result_t agree(shrink_t *s)
{
    struct tnt_comm *c = s->comm;
    int n = c->nranks;
    uint64_t known[TNT_REC_WORDS] = {0}, seen[TNT_REC_WORDS] = {0};
    uint64_t heard_prev[TNT_REC_WORDS] = {0};
    for (int q = 0; q < n; q++)
        set_bit(heard_prev, q);
    for (uint32_t r = 0; r <= (uint32_t)n; r++) {
        tnt_rec_msg_t msg;
        memset(&msg, 0, sizeof(msg));
        msg.type = TNT_REC_ROUND;
        msg.round = r;
        memcpy(msg.bits, known, sizeof(msg.bits));
        /* A failed send says the rank is gone, but what it sent before
         * is still read (tnt__rec_next): maybe its decision. */
        for (int q = 0; q < n; q++)
            if (q != c->rank && !bit(seen, q))
                tnt__rec_send(s->mesh, q, &msg);
        uint64_t heard[TNT_REC_WORDS] = {0};
        set_bit(heard, c->rank);
        for (int q = 0; q < n; q++) {
            if (q == c->rank || bit(seen, q))
                continue;
            tnt_result_t rc = tnt__rec_next(
                s->mesh, q, 1u << TNT_REC_ROUND | 1u << TNT_REC_DECIDED,
                &msg);
            if (rc == TNT_ERR_TIMEOUT)
                return tnt__error(TNT_ERR_TIMEOUT, "rank %d: "
                                  "tnt_comm_shrink: rank %d neither "
                                  "answered round %u of the agreement nor "
                                  "died within the deadline (TNT_TIMEOUT); "
                                  "is it calling tnt_comm_shrink?", c->rank,
                                  q, r);
            if (rc != TNT_SUCCESS) {
                set_bit(seen, q);
                set_bit(known, q);
                continue;
            }
            if (msg.type == TNT_REC_DECIDED) {
                memcpy(s->dead, msg.bits, sizeof(s->dead));
                tell_decision(s);
                return TNT_SUCCESS;
            }
            if (msg.round != r)
                return tnt__error(TNT_ERR_PROTOCOL, "rank %d: "
                                  "tnt_comm_shrink: rank %d sent round %u "
                                  "in round %u", c->rank, q, msg.round, r);
            set_bit(heard, q);
            for (int w = 0; w < TNT_REC_WORDS; w++)
                known[w] |= msg.bits[w];
        }
        if (memcmp(heard, heard_prev, sizeof(heard)) == 0) {
            memcpy(s->dead, known, sizeof(s->dead));
            tell_decision(s);
            return TNT_SUCCESS;
        }
        memcpy(heard_prev, heard, sizeof(heard));
    }
    return tnt__error(TNT_ERR_INTERNAL, "rank %d: tnt_comm_shrink: no "
                      "decision after %d rounds", c->rank, n + 1);
}

/* One exchange among the members: this rank's msg to every other member,
 * then one message of msg's type from each, handed to take (if any) with
 * the member's index. A member that sends nothing by the deadline or dies
 * fails the call on this rank: "rank Q <late> within the deadline" or
 * "rank Q died <lost>". */
typedef tnt_result_t (*take_fn)(shrink_t *s, int i, const tnt_rec_msg_t *m,
                                void *arg);

static tnt_result_t exchange(shrink_t *s, tnt_rec_msg_t *msg, take_fn take,
                             void *arg, const char *late, const char *lost)
{
    struct tnt_comm *c = s->comm;
    unsigned type = msg->type;
    for (int i = 0; i < s->nmembers; i++)
        if (s->old_of[i] != c->rank)
            tnt__rec_send(s->mesh, s->old_of[i], msg);
    for (int i = 0; i < s->nmembers; i++) {
        int q = s->old_of[i];
        if (q == c->rank)
            continue;
        tnt_result_t rc = tnt__rec_next(s->mesh, q, 1u << type, msg);
        if (rc == TNT_ERR_TIMEOUT)
            return tnt__error(TNT_ERR_TIMEOUT, "rank %d: tnt_comm_shrink: "
                              "rank %d %s within the deadline "
                              "(TNT_TIMEOUT)", c->rank, q, late);
        if (rc != TNT_SUCCESS)
            return tnt__error(TNT_ERR_PEER_LOST, "rank %d: tnt_comm_shrink: "
                              "rank %d died %s", c->rank, q, lost);
        if (take)
            TNT_CHECK(take(s, i, msg, arg));
    }
    return TNT_SUCCESS;
}

/* A member's entry for the new communicator's boot table. */
static tnt_result_t take_entry(shrink_t *s, int i, const tnt_rec_msg_t *m,
                               void *arg)
{
    tnt_boot_entry_t *table = arg;
    if (m->entry.rank != i || m->entry.addr_len > sizeof(m->entry.addr))
        return tnt__error(TNT_ERR_PROTOCOL, "rank %d: tnt_comm_shrink: "
                          "rank %d sent entry of rank %d, expected %d",
                          s->comm->rank, s->old_of[i], m->entry.rank, i);
    table[i] = m->entry;
    return TNT_SUCCESS;
}

/* The boot function of the new communicator (core/comm.h): this rank's
 * entry to every member over the mesh, theirs from it. */
static tnt_result_t mesh_boot(void *ctx, const tnt_boot_args_t *a,
                              tnt_boot_entry_t *table)
{
    shrink_t *s = ctx;
    struct tnt_comm *c = s->comm;
    tnt_rec_msg_t msg;
    memset(&msg, 0, sizeof(msg));
    msg.type = TNT_REC_ENTRY;
    msg.entry.rank = a->rank;
    snprintf(msg.entry.host, sizeof(msg.entry.host), "%s", a->host);
    TNT_CHECK(a->listen(a->listen_arg, c->net.bind_ip, &msg.entry));
    table[a->rank] = msg.entry;
    return exchange(s, &msg, take_entry, table,
                    "sent no address for the new communicator",
                    "after the survivors agreed, before the new "
                    "communicator was made");
}

static void store_agreed(struct tnt_comm *c, const uint64_t *dead)
{
    if (!c->rec)
        return;
    size_t bytes = ((size_t)c->nranks + 63) / 64 * sizeof(uint64_t);
    uint64_t *a = malloc(bytes);
    if (!a)
        return;
    memcpy(a, dead, bytes);
    pthread_mutex_lock(&c->group->lock);
    free(c->rec->agreed);
    c->rec->agreed = a;
    pthread_mutex_unlock(&c->group->lock);
}

/* The same id on every survivor: they derived as many communicators from
 * this one as each other (comm_split.c counts them alike). */
static uint32_t shrunk_id(struct tnt_comm *c)
{
    uint32_t nth = ++c->derived;
    uint64_t h = ((uint64_t)c->comm_id << 32) ^ ((uint64_t)nth << 12) ^
                 0x5348524bu;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    uint32_t id = (uint32_t)h;
    return id > 1 ? id : id + 2;
}

/* Whether this member's side lets the new communicator keep the old
 * one's connections: the group shares them (comm.c), every peer is over
 * TCP or verbs (not shm yet: the new communicator would need a set of
 * pair areas chosen alike on every member, and the old one's shm pairs
 * forgotten at its failure rather than closed), and no connection to another member is lost in the group (one
 * that the old communicator's failure closed, with its sends in flight,
 * is lost on the closing side: the AND then makes every member open its
 * own). One still being made (a shrink right after the creation) is the
 * new communicator's when it comes up, as a split's (core/demux.c). */
static int may_join(const shrink_t *s)
{
    struct tnt_comm *c = s->comm;
    struct tnt_net_group *g = c->group;
    pthread_mutex_lock(&g->lock);
    int ok = g->shared && tnt__net_tcp_or_verbs(c);
    for (int i = 0; ok && i < s->nmembers; i++) {
        int q = s->old_of[i];
        const struct tnt_net_peer *gp = &g->conn[tnt__net_rank(c, q)];
        ok = q == c->rank || !gp->dead;
    }
    pthread_mutex_unlock(&g->lock);
    return ok;
}

static tnt_result_t take_join(shrink_t *s, int i, const tnt_rec_msg_t *m,
                              void *arg)
{
    (void)s;
    (void)i;
    *(int *)arg &= m->round == 1;
    return TNT_SUCCESS;
}

/* Every member learns every member's may_join: the same verdict. */
static tnt_result_t decide_join(shrink_t *s)
{
    tnt_rec_msg_t msg;
    memset(&msg, 0, sizeof(msg));
    msg.type = TNT_REC_JOIN;
    msg.round = (uint32_t)may_join(s);
    s->join = (int)msg.round;
    return exchange(s, &msg, take_join, &s->join,
                    "said nothing of the new communicator",
                    "after the survivors agreed, before the new "
                    "communicator was made");
}

static tnt_result_t make_new(shrink_t *s, tnt_comm_t *out)
{
    struct tnt_comm *c = s->comm;
    int me = -1;
    s->old_of = malloc((size_t)c->nranks * sizeof(int));
    if (!s->old_of)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    for (int q = 0; q < c->nranks; q++)
        if (!bit(s->dead, q)) {
            if (q == c->rank)
                me = s->nmembers;
            s->old_of[s->nmembers++] = q;
        }
    if (me < 0)
        return tnt__error(TNT_ERR_PEER_LOST, "rank %d: tnt_comm_shrink: the "
                          "other survivors counted this rank as dead",
                          c->rank);
    if (s->mesh && s->nmembers > 1)
        TNT_CHECK(decide_join(s));
    tnt_config_t cfg = TNT_CONFIG_INIT;
    cfg.rank = me;
    cfg.nranks = s->nmembers;
    cfg.timeout_s = c->params.timeout_s;
    cfg.reproducible = c->params.reproducible ? 1 : -1;
    uint32_t id = shrunk_id(c);
    tnt_comm_lineage_t lin = {"shrink", 0, c->derived, s->old_of};
    tnt_comm_origin_t o = {mesh_boot, s, c, id, &lin, s->join};
    return tnt__comm_create(&cfg, &o, out);
}

/* A joined new communicator, made on every member: it takes the old
 * one's recovery listener (for its own shrink), and its first
 * collectives (the timeline's clock alignment) may start. Both gates
 * are closed while the mesh is open. */
static tnt_result_t finish_join(shrink_t *s, tnt_comm_t nc)
{
    struct tnt_net_group *g = s->comm->group;
    pthread_mutex_lock(&g->lock);
    int moved = tnt__rec_hand_over(s->comm, nc, s->old_of) == 0;
    if (moved)
        tnt__rec_gate_open(nc);
    pthread_mutex_unlock(&g->lock);
    if (!moved)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    return tnt__tl_start(nc);
}

/* Every member has its new communicator, connections under way: a
 * member that died before (it registered its entry, then never connected
 * anywhere, which no transport could tell from a slow start) fails the
 * call here rather than the new communicator's first collective at its
 * deadline. One that dies after this is a peer lost to the new
 * communicator, as any other. */
static tnt_result_t all_ready(shrink_t *s)
{
    tnt_rec_msg_t msg;
    memset(&msg, 0, sizeof(msg));
    msg.type = TNT_REC_READY;
    return exchange(s, &msg, NULL, NULL,
                    "did not finish making the new communicator",
                    "while the new communicator was being made");
}

TNT_API tnt_result_t tnt_comm_shrink(tnt_comm_t comm, tnt_comm_t *newcomm)
{
    TNT_CHECK(tnt__comm_check(comm, "tnt_comm_shrink"));
    if (!newcomm)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: tnt_comm_shrink: "
                          "output pointer is NULL", comm->rank);
    *newcomm = NULL;
    if (comm->nranks > TNT_REC_MAX_RANKS)
        return tnt__error(TNT_ERR_UNSUPPORTED, "rank %d: tnt_comm_shrink: "
                          "%d ranks; at most %d so far", comm->rank,
                          comm->nranks, TNT_REC_MAX_RANKS);
    if (comm->nranks > 1 && comm->rec && comm->rec->fd < 0)
        return tnt__error(TNT_ERR_UNSUPPORTED, "rank %d: tnt_comm_shrink: "
                          "this communicator was shrunk already, and its "
                          "recovery listener is the new one's: shrink "
                          "that one", comm->rank);
    if (comm->nranks > 1 && !comm->rec)
        return tnt__error(TNT_ERR_UNSUPPORTED, "rank %d: tnt_comm_shrink: "
                          "this communicator has no recovery listener; set "
                          "TNT_RECOVERY=1 on every rank (tnt-run --elastic "
                          "does)", comm->rank);
    shrink_t s;
    memset(&s, 0, sizeof(s));
    s.comm = comm;
    tnt_result_t rc = TNT_SUCCESS;
    if (comm->nranks > 1) {
        double t0 = tnt__now();
        rc = tnt__rec_mesh_open(comm, t0 + comm->params.timeout_s, &s.mesh);
        if (rc == TNT_SUCCESS)
            rc = agree(&s);
    }
    if (rc == TNT_SUCCESS) {
        store_agreed(comm, s.dead);
        rc = make_new(&s, newcomm);
    }
    if (rc == TNT_SUCCESS && s.mesh && s.nmembers > 1) {
        rc = all_ready(&s);
        if (rc == TNT_SUCCESS && s.join)
            rc = finish_join(&s, *newcomm);
        if (rc != TNT_SUCCESS) {
            char why[512];
            snprintf(why, sizeof(why), "%s", tnt_last_error());
            tnt_comm_free(*newcomm);
            *newcomm = NULL;
            rc = tnt__error_str(rc, why);
        }
    }
    tnt__rec_mesh_close(s.mesh);
    free(s.old_of);
    return rc;
}

TNT_API tnt_result_t tnt_comm_failed_ranks(tnt_comm_t comm, int *ranks,
                                           int max, int *count)
{
    TNT_CHECK(tnt__comm_check(comm, "tnt_comm_failed_ranks"));
    if (!count || max < 0 || (max > 0 && !ranks))
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: "
                          "tnt_comm_failed_ranks: count is NULL, max < 0, "
                          "or ranks NULL with max > 0", comm->rank);
    int n = 0;
    pthread_mutex_lock(&comm->group->lock);
    const uint64_t *agreed = comm->rec ? comm->rec->agreed : NULL;
    for (int q = 0; q < comm->nranks; q++) {
        int failed = agreed ? bit(agreed, q)
                            : q != comm->rank &&
                                  comm->peers[q].dead == TNT_ERR_PEER_LOST;
        if (!failed)
            continue;
        if (n < max)
            ranks[n] = q;
        n++;
    }
    pthread_mutex_unlock(&comm->group->lock);
    *count = n;
    return TNT_SUCCESS;
}
