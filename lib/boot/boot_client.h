/*
 * The bootstrap of a rank other than 0 (boot_client.c).
 */
#ifndef TNT_BOOT_BOOT_CLIENT_H
#define TNT_BOOT_BOOT_CLIENT_H

#include <sys/socket.h>

#include "boot/bootstrap.h"

/** Rank a->rank (> 0): register with rank 0 at ss (retrying while it
 *  starts, until deadline) and fill table; with a tree listener (on the
 *  address that reaches rank 0, or if_ip) when want_tree. */
tnt_result_t tnt__boot_client(const tnt_boot_args_t *a,
                              const struct sockaddr_storage *ss,
                              socklen_t sl, tnt_boot_entry_t *table,
                              double deadline, const char *if_ip,
                              int want_tree);

#endif /* TNT_BOOT_BOOT_CLIENT_H */
