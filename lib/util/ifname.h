/*
 * TNT_SOCKET_IFNAME: which network interface the listening sockets use.
 * The pattern is a comma-separated list of items; an item is an interface
 * name or name prefix ("eth", "ib0"), a CIDR block ("10.77.0.0/24",
 * "fd00::/8"), or either behind "^" to exclude what it matches. An
 * interface address is chosen when it matches no exclusion and, if the
 * list has any inclusion, at least one inclusion. This file has no
 * dependency on the rest of the library, so that tnt-run can compile it in
 * and pick a job's root address by the same rules.
 */
#ifndef TNT_UTIL_IFNAME_H
#define TNT_UTIL_IFNAME_H

#include <stddef.h>
#include <sys/socket.h>

/** Checks the syntax of spec. Returns 0, or -1 with a reason in err. */
int tnt__ifname_check(const char *spec, char *err, size_t errlen);

/** Whether the address sa of interface name is selected by spec (which
 *  tnt__ifname_check accepted). Loopback gets no special treatment here. */
int tnt__ifname_match(const char *spec, const char *name,
                      const struct sockaddr *sa);

/**
 * Picks the first selected IPv4 address of an interface that is up (IPv6
 * if no IPv4 address matches). A NULL or empty spec selects every
 * interface but loopback. Writes the numeric address to ip (and the
 * interface to ifname when not NULL). Returns 0, or -1 with err saying why:
 * a bad pattern, or a pattern that matches nothing, listing the interfaces
 * and addresses that exist.
 */
int tnt__ifname_pick(const char *spec, char *ip, size_t iplen,
                     char *ifname, size_t ifnamelen, char *err,
                     size_t errlen);

#endif /* TNT_UTIL_IFNAME_H */
