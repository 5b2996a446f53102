/*
 * The bootstrap's messages and their parsers. Everything rank 0 reads
 * comes from whoever can reach its port, so every parser here is a pure
 * function of the bytes (no I/O, no global state): unit tests and the
 * libFuzzer harness call them directly.
 *
 * The exchange (client = rank > 0, root = rank 0):
 *   client -> root  hello      {magic, version, job id, client nonce,
 *                               size, rank}
 *   root -> client  challenge  {magic, version, root nonce, table nonce,
 *                              root MAC}
 *   client -> root  register   {magic, version, size, rank, entry,
 *                               tree listener, MAC}
 *   root -> client  note       a reply with status TNT_BOOT_WAITING: rank
 *                              0 is alive, the message says whom it
 *                              still waits for (any number, repeated)
 *   root -> client  reply      {magic, status, size, message} [+ table]
 *   root -> client  table      {MAC, label, magic, version, size,
 *                               table nonce, bytes} + entries, each its
 *                              used bytes only (below)
 * With the tree fan-out (bootstrap.c) the table reaches a rank from its
 * tree parent, on the rank's own bootstrap listener, and the rank answers
 * rank 0 over its registration connection:
 *   client -> root  ack        {magic, version, rank, status, about, msg}
 *   root -> client  reply      the verdict, once every rank has acked
 * The root MAC covers "TNTB-root" + hello + the challenge before its MAC,
 * the client MAC "TNTB-client" + hello + the challenge before its MAC +
 * the registration before its MAC: both nonces are fresh, so a recorded
 * exchange replays to nothing, and the labels differ, so one side's proof
 * is never valid for the other. The table's MAC covers everything after
 * it ("TNTB-table", the header with the table nonce, the entries): one
 * MAC that every rank checks with the table nonce its own challenge
 * carried, so a rank forwards the table as it came, and a table of
 * another job (another nonce) or from someone without the key is
 * refused.
 */
#ifndef TNT_BOOT_BOOT_WIRE_H
#define TNT_BOOT_BOOT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "util/auth.h"
#include "boot/bootstrap.h"

#define TNT_BOOT_MAGIC 0x42544e54u /* "TNTB" */
#define TNT_BOOT_VERSION 5u
/* The status of a note: not a verdict, rank 0 is still waiting. */
#define TNT_BOOT_WAITING 0x57414954
/* Rank 0 repeats its note every this many seconds (the first after 3 s):
 * soon enough that a user sees why nothing happens, rare enough not to
 * flood a log. A rank that has heard a note waits 2 periods past its own
 * deadline for the next word from rank 0, whose verdict names the
 * missing ranks, rather than blame rank 0. */
#define TNT_BOOT_NOTE_EVERY_S 10.0

typedef struct tnt_boot_hello {
    uint32_t magic;
    uint32_t version;
    uint64_t job_id;
    unsigned char nonce[TNT_AUTH_NONCE_BYTES];
    /* Who the sender says it is: unproven, but when its job id is
     * another job's, rank 0 can say which of its ranks has another
     * TNT_JOB_KEY. */
    int32_t nranks;
    int32_t rank;
} tnt_boot_hello_t;

typedef struct tnt_boot_challenge {
    uint32_t magic;
    uint32_t version;
    unsigned char nonce[TNT_AUTH_NONCE_BYTES];
    /* The same for every rank of the job: the table's MAC covers it. */
    unsigned char table_nonce[TNT_AUTH_NONCE_BYTES];
    unsigned char mac[TNT_AUTH_MAC_BYTES]; /* last: covers all before */
} tnt_boot_challenge_t;

/* Where a rank's bootstrap listener for the tree fan-out is: family 0
 * (none: this rank takes the table from rank 0 directly), 4 or 6; port
 * in host order, the address in network order (4 or 16 bytes used). */
typedef struct tnt_boot_listener {
    uint8_t family;
    uint8_t pad;
    uint16_t port;
    unsigned char ip[16];
} tnt_boot_listener_t;

typedef struct tnt_boot_register {
    uint32_t magic;
    uint32_t version;
    int32_t nranks;
    int32_t rank;
    tnt_boot_entry_t entry;
    tnt_boot_listener_t listener;
    unsigned char mac[TNT_AUTH_MAC_BYTES]; /* last: covers all before */
} tnt_boot_register_t;

typedef struct tnt_boot_reply {
    uint32_t magic;
    int32_t status; /* a tnt_result_t */
    int32_t nranks;
    char msg[244];
} tnt_boot_reply_t;

/* The table: this header, then `bytes` bytes of entries in rank order,
 * each only what it uses (a whole tnt_boot_entry_t is 200 bytes, a TCP
 * entry about 45 on the wire):
 *   rank u32 | addr_len u16 | addr[addr_len] | host_len u8 | host[host_len]
 *   | listener family u8 (0, 4, 6) [| port u16 | ip[4 or 16]]
 * in the sender's byte order, like every bootstrap message (all ranks
 * run the same build). In a star rank 0 sends p - 1 copies, the term of
 * its work that grows as p^2; in the tree, one per child (docs/scale.md).
 */
typedef struct tnt_boot_table_hdr {
    unsigned char mac[TNT_AUTH_MAC_BYTES]; /* covers all after it */
    char label[16];                        /* "TNTB-table" */
    uint32_t magic;
    uint32_t version;
    int32_t nranks;
    uint32_t bytes;
    unsigned char table_nonce[TNT_AUTH_NONCE_BYTES];
} tnt_boot_table_hdr_t;

/* The shortest and longest entry on the wire (a host of at most
 * TNT_HOST_MAX - 1 bytes: the receiver terminates it). */
#define TNT_BOOT_WIRE_ENTRY_MIN (4 + 2 + 1 + 1 + 1)
#define TNT_BOOT_WIRE_ENTRY_MAX (4 + 2 + TNT_TRANSPORT_ADDR_MAX + 1 + \
                                 TNT_HOST_MAX - 1 + 1 + 2 + 16)

/* A rank's answer to the table (tree fan-out only), over its
 * registration connection: status 0, it has the table and passed it to
 * its children; else a tnt_result_t, and `about` is the child it could
 * not pass it to, msg why. */
typedef struct tnt_boot_ack {
    uint32_t magic;
    uint32_t version;
    int32_t rank;
    int32_t status;
    int32_t about;
    char msg[108];
} tnt_boot_ack_t;

/* The largest input the MAC of a registration covers. */
#define TNT_BOOT_AUTH_MAX (16 + sizeof(tnt_boot_hello_t) + \
                           sizeof(tnt_boot_challenge_t) + \
                           sizeof(tnt_boot_register_t))

/**
 * Parse a hello. NULL if it is one of this job (*out filled), else why
 * not (for a WARNING naming the sender).
 */
const char *tnt__boot_hello_parse(const void *buf, size_t len,
                                  uint64_t job_id, tnt_boot_hello_t *out);

/** Parse a challenge (the MAC is checked by the caller). */
const char *tnt__boot_challenge_parse(const void *buf, size_t len,
                                      tnt_boot_challenge_t *out);

/**
 * Parse a registration's framing (magic, version, length): NULL or why
 * not. Its content is judged by tnt__boot_register_check once its MAC is
 * good, because only then is a mistake the job's and not a stranger's.
 */
const char *tnt__boot_register_parse(const void *buf, size_t len,
                                     tnt_boot_register_t *out);

/**
 * Judge an authenticated registration against rank 0's view (nranks, and
 * taken[r] != 0 for ranks already registered): 0 if good, else -1 and a
 * message for every rank (a misconfigured job, not an intruder).
 */
int tnt__boot_register_check(const tnt_boot_register_t *r, int nranks,
                             const int *taken, char *msg, size_t msglen);

/** Parse rank 0's reply; the message is NUL-terminated in *out. */
const char *tnt__boot_reply_parse(const void *buf, size_t len, int nranks,
                                  tnt_boot_reply_t *out);

/** Check an authenticated registration's listener: NULL or why not. */
const char *tnt__boot_listener_check(const tnt_boot_listener_t *l);

/**
 * Encode table[0..nranks-1] and, when listeners is not NULL, each rank's
 * tree listener into out (room for nranks * TNT_BOOT_WIRE_ENTRY_MAX
 * bytes); returns the bytes written. Entries must be valid (rank ==
 * index, 1..TNT_TRANSPORT_ADDR_MAX address bytes, listeners that pass
 * tnt__boot_listener_check).
 */
size_t tnt__boot_table_encode(const tnt_boot_entry_t *table,
                              const tnt_boot_listener_t *listeners,
                              int nranks, unsigned char *out);

/** A table header for nranks entries in `bytes` bytes, with the table
 *  nonce (TNT_AUTH_NONCE_BYTES) copied from `nonce` when it is not NULL
 *  (zeros otherwise); the MAC is left zero, the caller's. The one writer
 *  of the fields tnt__boot_table_hdr_parse checks. */
void tnt__boot_table_hdr_init(tnt_boot_table_hdr_t *h, int nranks,
                              uint32_t bytes, const unsigned char *nonce);

/** Parse a table header: NULL if it announces nranks entries in a byte
 *  count that nranks valid entries can have (its MAC is the caller's). */
const char *tnt__boot_table_hdr_parse(const void *buf, size_t len,
                                      int nranks, tnt_boot_table_hdr_t *out);

/**
 * Decode len bytes of entries into table[0..nranks-1] and, when not NULL,
 * listeners[0..nranks-1]: NULL if they are exactly nranks valid entries
 * (rank i at index i, an address of 1..TNT_TRANSPORT_ADDR_MAX bytes, a
 * host without NUL bytes, terminated here, a listener of family 0, 4 or
 * 6 with a port), else why not. Never reads past buf + len.
 */
const char *tnt__boot_table_decode(const void *buf, size_t len, int nranks,
                                   tnt_boot_entry_t *table,
                                   tnt_boot_listener_t *listeners);

/** Parse an ack from `rank` of a job of nranks: NULL or why not; msg is
 *  NUL-terminated in *out. */
const char *tnt__boot_ack_parse(const void *buf, size_t len, int rank,
                                int nranks, tnt_boot_ack_t *out);

/**
 * The binomial tree of the table fan-out, rooted at rank 0: rank r's
 * parent is r minus its lowest set bit; its children are r + 2^k for
 * every 2^k below that bit (any 2^k for rank 0) and r + 2^k < nranks.
 * Writes them into out (room for 32), the largest subtree first (the
 * order to send in), and returns how many.
 */
int tnt__boot_tree_children(int rank, int nranks, int *out);

/**
 * The bytes a MAC covers: label + hello + challenge up to its MAC [+
 * registration up to its MAC when reg is not NULL]. Writes at most
 * TNT_BOOT_AUTH_MAX bytes into out and returns how many.
 */
size_t tnt__boot_auth_input(int client, const tnt_boot_hello_t *h,
                            const tnt_boot_challenge_t *ch,
                            const tnt_boot_register_t *reg,
                            unsigned char *out);

#endif /* TNT_BOOT_BOOT_WIRE_H */
