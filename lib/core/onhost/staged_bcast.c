/*
 * The staged broadcast (TNT_ALGO_STAGED of a broadcast): among ranks that
 * all share this host, through the output buffers of the pairs' staging
 * areas (onhost/stage_rounds.c). In round t the root copies piece t of
 * its buffer into its output buffer of every pair, and every other rank
 * copies it out of the pair with the root and marks it read. The root
 * finishes once every peer has read the last round: a rank that wrongly
 * believes itself the root (a mismatch) then waits, and is found,
 * instead of returning with nobody having read its data.
 *
 * A rank that is not the root hears from the root alone, so every rank
 * also publishes its signature, without data, in its input header of
 * every pair (a broadcast leaves the input buffers unused), and finishes
 * only once it has read and checked every peer's: a bystander of a
 * mismatch (another root, count, dtype, or another collective) fails
 * instead of returning success (sig_exchange).
 * req->ops[q].onhost.stage.bcast_sig holds that exchange's state: bit 0
 * published to q, bit 1 q's read and checked.
 */
#include "collectives/patterns.h"
#include "core/onhost/stage_rounds.h"

/* Rounds to publish to q or read from it, or the signature exchange with
 * it unfinished. */
static int needs(const struct tnt_request *req, int q)
{
    return tnt__stage_needs(req, q) ||
           req->ops[q].onhost.stage.bcast_sig != 3;
}

static size_t report(const struct tnt_request *req, char *buf, size_t len)
{
    return tnt__onhost_report_peers(req, buf, len, needs,
                                    tnt__stage_describe);
}

static void start(struct tnt_comm *comm, struct tnt_request *req)
{
    /* One slice, the whole buffer. */
    uint64_t r = tnt__nsegments(req->args.count, tnt__stage_piece_elems(req));
    int root = req->args.root, me = comm->rank;
    tnt__stage_number(comm, req, r);
    req->onhost.stage.reduced = r; /* nothing to reduce */
    for (int q = 0; q < comm->nranks; q++) {
        tnt_stage_peer_t *os = &req->ops[q].onhost.stage;
        os->bcast_sig = q != me ? 0 : 3;
        /* The root publishes to every peer and waits for each to read;
         * every other rank reads from the root only. */
        if (me != root) {
            os->put = r;
            if (q != root)
                os->got = r;
        }
    }
}

/* The root: has q read the last round? (It reads in order.) */
static int root_read_by(struct tnt_comm *comm, struct tnt_request *req,
                        int q)
{
    tnt_stage_peer_t *os = &req->ops[q].onhost.stage;
    uint64_t last = req->onhost.stage.g0 + req->onhost.stage.rounds - 1;
    if (os->got == req->onhost.stage.rounds ||
        os->put < req->onhost.stage.rounds ||
        atomic_load_explicit(&tnt__stage_theirs(comm, q)->out_done[last & 1],
                             memory_order_acquire) < last + 1)
        return 0;
    os->got = req->onhost.stage.rounds;
    return 1;
}

/* The signature exchange with peer q, in the input headers at the
 * request's first round number: publish this rank's once there is room,
 * and read and check q's (a mismatch fails the communicator). */
static int sig_exchange(struct tnt_comm *comm, struct tnt_request *req,
                        int q)
{
    tnt_stage_peer_t *os = &req->ops[q].onhost.stage;
    uint64_t g = req->onhost.stage.g0;
    int b = (int)(g & 1), moved = 0;
    tnt_stage_side_t *m = tnt__stage_mine(comm, q);
    const tnt_stage_side_t *th = tnt__stage_theirs(comm, q);
    if (!(os->bcast_sig & 1) &&
        tnt__stage_room(&th->in_done[b], &m->in_hdr[b])) {
        tnt__stage_set_hdr(&m->in_hdr[b], req, g);
        os->bcast_sig |= 1;
        comm->peers[q].onhost.slot_notify = 1;
        moved = 1;
    }
    if (!(os->bcast_sig & 2) &&
        tnt__stage_round_there(comm, req, q, &th->in_hdr[b], g)) {
        atomic_store_explicit(&m->in_done[b], g + 1, memory_order_release);
        os->bcast_sig |= 2;
        comm->peers[q].onhost.slot_notify = 1;
        moved = 1;
    }
    return moved;
}

static int step(struct tnt_comm *comm, struct tnt_request *req)
{
    int k = comm->nranks, me = comm->rank, moved = 0;
    int root = me == req->args.root;
    if (!tnt__stage_peers_there(comm, req, needs))
        return 0;
    /* The root's data where an allreduce leaves results; the others have
     * nothing to publish (stage_put starts at the last round). */
    for (int q = 0; q < k; q++)
        if (q != me && comm->peers[q].ep)
            moved |= tnt__stage_put_rounds(comm, req, q, 1, 1);
    int all = 1;
    for (int q = 0; q < k && comm->state == TNT_COMM_OK; q++) {
        if (q == me || !comm->peers[q].ep)
            continue;
        /* A mismatch found there fails the communicator and unmaps the
         * peers' segments: look no further. */
        moved |= sig_exchange(comm, req, q);
        if (comm->state != TNT_COMM_OK)
            break;
        moved |= root ? root_read_by(comm, req, q)
                      : tnt__stage_get_outputs(comm, req, q);
        all &= !needs(req, q);
    }
    tnt__stage_after_step(comm, req, moved);
    return all && comm->state == TNT_COMM_OK;
}

/* The root finishes only after every peer has read everything (a root
 * sees whether q did); another rank takes the root's last rounds before
 * the segment goes away. A peer that finished checked this rank's
 * signature: read its own. */
static int peer_closing(struct tnt_comm *comm, struct tnt_request *req,
                        int q)
{
    sig_exchange(comm, req, q);
    if (comm->state != TNT_COMM_OK)
        return 1;
    if (comm->rank == req->args.root)
        root_read_by(comm, req, q);
    else
        tnt__stage_get_outputs(comm, req, q);
    return 1;
}

const tnt_onhost_algo_t tnt__onhost_staged_bcast = {
    .start = start,
    .step = step,
    .complete = NULL,
    .peer_closing = peer_closing,
    .needs = needs,
    .nops = tnt__stage_nops,
    .report = report,
    .stage_rounds = 1,
};
