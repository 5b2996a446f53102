/*
 * Progress notes (progress_notes.c): what a rank tells its peers of how
 * far it got, for the hang report. All with comm->group->lock held.
 */
#ifndef TNT_CORE_PROGRESS_NOTES_H
#define TNT_CORE_PROGRESS_NOTES_H

#include <stdint.h>

struct tnt_comm;
struct tnt_progress_tx;
struct tnt_notice_rx;

/** This rank's oldest collective in flight (*seq; the next one when
 *  none), the earliest step it waits in (*step), the peer it waits for
 *  there (*waits, -1 if none) and whether that wait is a send. */
void tnt__progress_mine(struct tnt_comm *comm, uint64_t *seq,
                        uint32_t *step, int32_t *waits, int *sending);
/** Send this rank's note to every peer it can (one at a time each). */
void tnt__progress_send(struct tnt_comm *comm);
/** A note finished sending. */
void tnt__progress_sent(struct tnt_comm *comm, struct tnt_progress_tx *t);
/** A peer's note arrived: kept, and answered once per collective. */
void tnt__progress_arrived(struct tnt_comm *comm, int peer,
                           const struct tnt_notice_rx *n);

#endif /* TNT_CORE_PROGRESS_NOTES_H */
