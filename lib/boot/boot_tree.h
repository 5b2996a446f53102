/*
 * The sockets of the bootstrap's tree fan-out (bootstrap.c says when it
 * is used): a rank's own bootstrap listener, a parent's push of the
 * table to a child's listener, and the check of a table that arrives
 * there. Whoever reaches a listener may connect, so a table counts only
 * with the job key's MAC over the table nonce of this job; anything else
 * is a stranger, dropped and logged, never fatal.
 */
#ifndef TNT_BOOT_BOOT_TREE_H
#define TNT_BOOT_BOOT_TREE_H

#include <stddef.h>

#include "boot/boot_wire.h"
#include "boot/bootstrap.h"

/** A nonblocking, close-on-exec TCP socket of the bootstrap. */
int tnt__boot_socket(int family);

/**
 * TCP_NODELAY: the bootstrap's messages are small and each waits for an
 * answer that may not come soon (a rank's ack follows its registration
 * only after the whole job registered, with no data from rank 0 in
 * between to carry the TCP acknowledgement): without it, Nagle's
 * algorithm holds such a message until the delayed ACK (40 ms on Linux).
 */
void tnt__boot_no_delay(int fd);

/* Table connections a rank reads at once; more wait in the backlog. */
#define TNT_BOOT_TREE_PENDING_MAX 16

/** Listen on the numeric address ip (any port): the socket in *fd and
 *  its address in *l. */
tnt_result_t tnt__boot_tree_listen(const char *ip, int *fd,
                                   tnt_boot_listener_t *l);

/** "ip:port" of a listener, for messages. */
void tnt__boot_listener_str(const tnt_boot_listener_t *l, char *buf,
                            size_t len);

/**
 * Connect to listener l and send the len bytes of msg, bounded by
 * deadline: 0, or -1 with why (for the message naming the child).
 */
int tnt__boot_tree_push(const tnt_boot_listener_t *l, const void *msg,
                        size_t len, double deadline, char *why,
                        size_t whylen);

/**
 * A whole table message (header + entries) as it arrived: NULL if it
 * carries this job's table (the header's table nonce is tnonce, the MAC
 * is the job key's), decoded into table and listeners; else why not.
 */
const char *tnt__boot_table_accept(const tnt_boot_args_t *a,
                                   const unsigned char *tnonce,
                                   const unsigned char *msg, size_t len,
                                   tnt_boot_entry_t *table,
                                   tnt_boot_listener_t *listeners);

/* A connection to a rank's listener while it waits for the table. */
typedef struct tnt_boot_tconn {
    int fd;
    double deadline;
    size_t got, need;          /* the header first, then all of it */
    unsigned char *buf;
    char who[64];
} tnt_boot_tconn_t;

typedef struct tnt_boot_tree_wait {
    const tnt_boot_args_t *a;
    const unsigned char *tnonce;
    tnt_boot_tconn_t c[TNT_BOOT_TREE_PENDING_MAX];
    int n;
} tnt_boot_tree_wait_t;

/** Accept what listener lfd has, while slots are free. */
void tnt__boot_tree_accept(tnt_boot_tree_wait_t *w, int lfd);

/** Drop pending connections whose time is up, logging each. */
void tnt__boot_tree_expire(tnt_boot_tree_wait_t *w, double now);

/**
 * Read what connection i has. 1 when it carried this job's table: decoded
 * into table and listeners, the message as it came in *msg (the caller
 * frees it; it is passed on unchanged), the connection gone from w.
 * 0 otherwise (waiting for more, or dropped and logged; either way
 * entries after i may have moved, so serve from the back).
 */
int tnt__boot_tree_read(tnt_boot_tree_wait_t *w, int i,
                        tnt_boot_entry_t *table,
                        tnt_boot_listener_t *listeners,
                        unsigned char **msg, size_t *len);

/** Close what is still pending (the table came, or the wait failed). */
void tnt__boot_tree_close(tnt_boot_tree_wait_t *w, const char *why);

#endif /* TNT_BOOT_BOOT_TREE_H */
