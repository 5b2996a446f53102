/*
 * The rounds of the pairs' staging areas (onhost/stage_layout.h), as
 * the staged allreduce, the mapped allreduce and the staged broadcast use
 * them (onhost/stage_rounds.c has the protocol).
 */
#ifndef TNT_CORE_ONHOST_STAGE_ROUNDS_H
#define TNT_CORE_ONHOST_STAGE_ROUNDS_H

#include "core/onhost/onhost.h"
#include "core/onhost/stage_layout.h"

/** The pair areas with q as staging areas (tnt__onhost_mine, _theirs). */
static inline tnt_stage_side_t *tnt__stage_mine(struct tnt_comm *comm, int q)
{
    return tnt__onhost_mine(comm, q, TNT_TP_AREA_STAGES);
}

static inline const tnt_stage_side_t *tnt__stage_theirs(struct tnt_comm *comm,
                                                        int q)
{
    return tnt__onhost_theirs(comm, q, TNT_TP_AREA_STAGES);
}

/** Give req `rounds` rounds, after those of earlier staged collectives,
 *  and zero its per-peer counts. */
void tnt__stage_number(struct tnt_comm *comm, struct tnt_request *req,
                       uint64_t rounds);
/** Elements per round and piece. */
size_t tnt__stage_piece_elems(const struct tnt_request *req);
/** Piece t (a local round) of slice j: [*off, *off + *n) of the buffer;
 *  a broadcast has one slice, the whole buffer. */
void tnt__stage_piece(const struct tnt_request *req, int j, uint64_t t,
                      size_t *off, size_t *n);

/** Publish req's round g in header h (data, if any, written before). */
void tnt__stage_set_hdr(tnt_stage_hdr_t *h, const struct tnt_request *req,
                        uint64_t g);
/** May this rank write the buffer whose header is `mine` again: has the
 *  peer read what was last published there (its done counter)? */
int tnt__stage_room(const _Atomic uint64_t *done, const tnt_stage_hdr_t *mine);
/** Does q's header h hold round g of req? Fails the communicator on a
 *  mismatch. */
int tnt__stage_round_there(struct tnt_comm *comm, struct tnt_request *req,
                           int q, const tnt_stage_hdr_t *h, uint64_t g);
/** Has every peer published round g in its input header? A peer that
 *  closed fails the communicator. */
int tnt__stage_inputs_there(struct tnt_comm *comm, struct tnt_request *req,
                            uint64_t g);
/** Tell every peer that this rank has read its input of round g. */
void tnt__stage_mark_inputs_read(struct tnt_comm *comm, uint64_t g);

/** Publish to q as many rounds of this rank's data as there is room for:
 *  piece t of slice q in the input buffers, or (out) piece t of the whole
 *  buffer in the output buffers; with_data 0: the headers alone. */
int tnt__stage_put_rounds(struct tnt_comm *comm, struct tnt_request *req,
                          int q, int out, int with_data);
/** Copy out the result (or broadcast) pieces q has published in its
 *  output buffers, and tell q. */
int tnt__stage_get_outputs(struct tnt_comm *comm, struct tnt_request *req,
                           int q);

/** Before a step: is every peer that req still needs (by the algorithm's
 *  needs) connected? A closed one fails the communicator, an unconnected
 *  one is connected to. */
int tnt__stage_peers_there(struct tnt_comm *comm, struct tnt_request *req,
                           int (*needs)(const struct tnt_request *req, int q));
/** After a step that moved something (moved) or nothing: wake the peers
 *  at once, or count the stall and look for a mismatch every
 *  TNT_STAGE_STALLS_BEFORE_CHECK stalls. */
void tnt__stage_after_step(struct tnt_comm *comm, struct tnt_request *req,
                           int moved);
/** One step of an allreduce on the staging areas (staged and mapped):
 *  publish this rank's input rounds to every peer (with_data 0: where
 *  the buffers lie, no data), reduce this rank's slice (reduce), take
 *  each peer's results (get_results), then wake or count a stall. 1 once
 *  every round is reduced and no peer is needed any more. */
int tnt__stage_allreduce_step(struct tnt_comm *comm, struct tnt_request *req,
                              int with_data,
                              int (*reduce)(struct tnt_comm *comm,
                                            struct tnt_request *req),
                              int (*get_results)(struct tnt_comm *comm,
                                                 struct tnt_request *req,
                                                 int q));

/** Does req still need peer q: rounds to publish to it or to read from
 *  it? */
int tnt__stage_needs(const struct tnt_request *req, int q);
/** One peer's entry of a staged request's report
 *  (tnt__onhost_report_peers). */
int tnt__stage_describe(const struct tnt_request *req, int q,
                        const char *sep, char *buf, size_t len);
/** What req waits for, for the reports (peers that tnt__stage_needs). */
size_t tnt__stage_report(const struct tnt_request *req, char *buf,
                         size_t len);
/** Operations of a staged request, as the reports count them: 1 until it
 *  finishes. */
uint32_t tnt__stage_nops(const struct tnt_request *req);

#endif /* TNT_CORE_ONHOST_STAGE_ROUNDS_H */
