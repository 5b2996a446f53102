/*
 * The hang report (see report.c).
 */
#ifndef TNT_CORE_REPORT_H
#define TNT_CORE_REPORT_H

#include <stddef.h>

struct tnt_comm;
struct tnt_request;

/** The eventfd that SIGUSR1 writes to (installs the handler once); -1
 *  when the signal is not ours. */
int tnt__report_signal_fd(void);
/** Bumped by every SIGUSR1. */
unsigned tnt__report_generation(void);
/** What req waits for: up to four sends/receives. */
void tnt__report_waits(const struct tnt_request *req, char *buf,
                       size_t len);
/** Print the communicator's report on stderr. Lock held. */
void tnt__report_log(struct tnt_comm *comm);

#endif /* TNT_CORE_REPORT_H */
