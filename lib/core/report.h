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
/** Who is actually behind req, from the progress notes: "" if unknown. */
void tnt__report_behind(struct tnt_comm *comm,
                        const struct tnt_request *req, char *buf,
                        size_t len);
/** Fail the communicator if a request's deadline passed: first a probe
 *  of the peers' progress and a grace to answer, then TNT_ERR_TIMEOUT
 *  naming the rank behind (run in the progress loop through its hooks).
 *  Lock held. */
void tnt__report_check_deadlines(struct tnt_comm *comm, double now);
/** Print the communicator's report on stderr. Lock held. */
void tnt__report_log(struct tnt_comm *comm);

#endif /* TNT_CORE_REPORT_H */
