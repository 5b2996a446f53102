/*
 * Slurm's compressed host lists ("node[01-04,07],login2,rack[1-2]-n[1-3]")
 * expanded into host names, in order. Used to find the first host of a
 * job step when the root address of the bootstrap has to be derived from
 * Slurm's environment.
 */
#ifndef TNT_UTIL_HOSTLIST_H
#define TNT_UTIL_HOSTLIST_H

#include <stddef.h>

#include "tnt/tnt.h"

/* More hosts than this in one list is an error rather than an attempt to
 * allocate them: no job step has a million nodes, "n[0-999999999]" is a
 * typo. */
#define TNT_HOSTLIST_MAX (1u << 20)
/* Longest host name produced (a DNS name). */
#define TNT_HOSTNAME_MAX 256

typedef struct tnt_hostlist {
    char **hosts;
    size_t n;
} tnt_hostlist_t;

/**
 * Expand `list` into hl->hosts[0..n-1] (each malloc'ed; release with
 * tnt__hostlist_free). Ranges keep the zero padding of their lower bound
 * ("c[08-10]" -> c08 c09 c10); several bracket groups in one name expand
 * as a product, the last varying fastest. Bad syntax is a TNT_ERR_CONFIG
 * naming `what` (the variable the list came from) and the position.
 */
tnt_result_t tnt__hostlist_expand(const char *what, const char *list,
                                  tnt_hostlist_t *hl);
void tnt__hostlist_free(tnt_hostlist_t *hl);

#endif /* TNT_UTIL_HOSTLIST_H */
