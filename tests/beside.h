/*
 * A process run beside a job (an intruder, a flood of strangers) and what
 * the job's ranks logged meanwhile: the pieces test_intruder.c and
 * test_shm_intruder.c share. The parent sends its stderr (and so the
 * ranks' and the helper's, which inherit it) to a log, forks the helper,
 * runs the job, reaps the helper within a bound, restores stderr and
 * counts the log's lines.
 */
#ifndef TNT_TEST_BESIDE_H
#define TNT_TEST_BESIDE_H

#include <sys/types.h>

/** Send this process's stderr to the file `path` (created or truncated).
 *  Returns the descriptor that th_stderr_back takes, or -1 (stderr is
 *  then unchanged). */
int th_stderr_to(const char *path);
/** Put stderr back as it was before th_stderr_to (a no-op for -1). */
void th_stderr_back(int saved);

/** Fork a helper that runs fn(arg) and exits with its result; it dies
 *  with this process (PR_SET_PDEATHSIG). -1 when fork fails. */
pid_t th_fork_beside(int (*fn)(void *arg), void *arg);

/** Wait up to timeout_s for the helper to exit, then kill and reap it.
 *  Returns its exit status, or -1 when it was killed or died by a
 *  signal. */
int th_reap_beside(pid_t pid, double timeout_s);

/** CUnit check: the log at `path` has at least `min` lines containing
 *  `a` and, unless NULL, `b` (the count printed with TNT_TEST_VERBOSE). */
void th_expect_lines(const char *path, const char *a, const char *b,
                     int min);

#endif
