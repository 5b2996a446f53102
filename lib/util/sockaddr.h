/*
 * Socket address parsing and formatting, the address blob published
 * through the bootstrap, blocking I/O with a deadline (bootstrap only;
 * the data path is nonblocking), and the liveness settings of a
 * connected TCP socket.
 */
#ifndef TNT_UTIL_SOCKADDR_H
#define TNT_UTIL_SOCKADDR_H

#include <stddef.h>
#include <sys/socket.h>

#include "tnt/tnt.h"

/** "host:port" or "[v6addr]:port"; host is resolved (IPv4 first). */
tnt_result_t tnt__sockaddr_parse_hostport(const char *what, const char *s,
                                          struct sockaddr_storage *ss,
                                          socklen_t *len);
/** Numeric IPv4/IPv6 address and port. */
tnt_result_t tnt__sockaddr_parse_ip(const char *ip, int port,
                                    struct sockaddr_storage *ss,
                                    socklen_t *len);
/** "ip:port" (IPv6 as "[ip]:port"). */
void tnt__sockaddr_str(const struct sockaddr *sa, char *buf, size_t len);
/** The numeric address alone. */
void tnt__sockaddr_ip(const struct sockaddr *sa, char *buf, size_t len);

/** Serialise a socket address into a transport address blob. */
tnt_result_t tnt__addr_blob_encode(const struct sockaddr *sa, void *blob,
                                   size_t *len);
/** Decode (and validate: it came over the network) such a blob. */
tnt_result_t tnt__addr_blob_decode(const void *blob, size_t len,
                                   struct sockaddr_storage *ss,
                                   socklen_t *sslen);

/** A nonblocking TCP listening socket on the numeric address `ip` (any
 *  port), and its address as a transport blob. `who` prefixes the error
 *  ("" or e.g. "verbs: "). The caller owns *fd on success. */
tnt_result_t tnt__listen_blob(const char *ip, int rank, const char *who,
                              int *fd, void *blob, size_t *len);

/** Blocking-style full write/read on a nonblocking fd, bounded by an
 *  absolute deadline (tnt__now() clock): TNT_SUCCESS, TNT_TIMEOUT or
 *  TNT_ERR_PEER_LOST. */
tnt_result_t tnt__io_write_all(int fd, const void *buf, size_t len,
                               double deadline);
tnt_result_t tnt__io_read_all(int fd, void *buf, size_t len,
                              double deadline);

/** TNT_HEARTBEAT on a connected TCP socket: a peer that goes silent
 *  without closing (link down, host gone) is found within about
 *  `heartbeat_s` seconds, by keep-alive probes while the connection is
 *  idle and TCP_USER_TIMEOUT while data waits for an acknowledgement;
 *  the socket then fails with ETIMEDOUT. 0 leaves the socket as it is.
 *  Used by the TCP transport and the verbs side channel alike. */
void tnt__sock_heartbeat(int fd, double heartbeat_s);

#endif /* TNT_UTIL_SOCKADDR_H */
