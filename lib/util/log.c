/*
 * The logger. Level from TNT_LOG_LEVEL (ERROR, WARNING, INFO, DEBUG;
 * default WARNING); only the master rank prints unless
 * TNT_LOG_ALL_RANKS=1, because p identical lines help nobody; errors
 * and lines flagged TNT_LOG_EVERY_RANK (refused strangers) print on the
 * rank that saw them, because no other rank can. Each line is
 * written with one write(2) so lines of concurrent threads do not mix.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/log.h"
#include "util/param_table.h"

static int log_level = TNT_LOG_WARNING;
static int log_rank = 0;
static int log_all_ranks = 0;

static const char *level_names[] = {"ERROR", "WARNING", "INFO", "DEBUG"};

void tnt__log_init(int rank)
{
    const char *lv = tnt__env(TNT_VAR_LOG_LEVEL);
    const char *all = tnt__env(TNT_VAR_LOG_ALL_RANKS);
    log_rank = rank;
    log_level = TNT_LOG_WARNING;
    if (lv) {
        for (int i = 0; i < 4; i++)
            if (strcasecmp(lv, level_names[i]) == 0)
                log_level = i;
        if (strcasecmp(lv, "WARN") == 0)
            log_level = TNT_LOG_WARNING;
    }
    log_all_ranks = all && strcmp(all, "0") != 0 && all[0] != '\0';
}

int tnt__log_enabled(int level)
{
    int every = (level & TNT_LOG_EVERY_RANK) != 0;
    level &= ~TNT_LOG_EVERY_RANK;
    if (level > log_level)
        return 0;
    /* Errors and security events are printed on every rank: the rank
     * that saw a failure or refused a stranger is the one that can say
     * so. */
    return level == TNT_LOG_ERROR || every || log_all_ranks ||
           log_rank == 0;
}

void tnt__log(int level, const char *fmt, ...)
{
    if (!tnt__log_enabled(level))
        return;
    level &= ~TNT_LOG_EVERY_RANK;
    char line[1024];
    int n = snprintf(line, sizeof(line), "tnt[%d] %s: ", log_rank,
                     level_names[level < 0 ? 0 : level > 3 ? 3 : level]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof(line))
        n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(line) - 1)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}
