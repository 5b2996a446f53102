/*
 * The hang report (see report.c).
 */
#ifndef TNT_CORE_REPORT_H
#define TNT_CORE_REPORT_H

#include <stddef.h>

struct tnt_comm;
struct tnt_request;
struct tnt_progress_tx;
struct tnt_notice_rx;

/** The eventfd that SIGUSR1 writes to (installs the handler once); -1
 *  when the signal is not ours. */
int tnt__report_signal_fd(void);
/** Bumped by every SIGUSR1. */
unsigned tnt__report_generation(void);
/** What req waits for: up to four sends/receives. */
void tnt__report_waits(const struct tnt_request *req, char *buf,
                       size_t len);
/** Progress notes (engine.h): send this rank's to every peer it can;
 *  one finished sending; one arrived (answered once per collective).
 *  Lock held. */
void tnt__progress_send(struct tnt_comm *comm);
void tnt__progress_sent(struct tnt_comm *comm,
                        struct tnt_progress_tx *t);
void tnt__progress_arrived(struct tnt_comm *comm, int peer,
                           const struct tnt_notice_rx *n);
/** Who is actually behind req, from the progress notes: "" if unknown. */
void tnt__report_behind(struct tnt_comm *comm,
                        const struct tnt_request *req, char *buf,
                        size_t len);
/** Print the communicator's report on stderr. Lock held. */
void tnt__report_log(struct tnt_comm *comm);

#endif /* TNT_CORE_REPORT_H */
