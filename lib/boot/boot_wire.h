/*
 * The bootstrap's messages and their parsers. Everything rank 0 reads
 * comes from whoever can reach its port, so every parser here is a pure
 * function of the bytes (no I/O, no global state): unit tests and the
 * libFuzzer harness call them directly.
 *
 * The exchange (client = rank > 0, root = rank 0):
 *   client -> root  hello      {magic, version, job id, client nonce,
 *                               size, rank}
 *   root -> client  challenge  {magic, version, root nonce, root MAC}
 *   client -> root  register   {magic, version, size, rank, entry, MAC}
 *   root -> client  note       a reply with status TNT_BOOT_WAITING: rank
 *                              0 is alive, the message says whom it
 *                              still waits for (any number, repeated)
 *   root -> client  reply      {magic, status, size, message} [+ table]
 *   root -> client  table      {magic, version, size, bytes} + entries,
 *                              each its used bytes only (below)
 * The root MAC covers "TNTB-root" + hello + root nonce, the client MAC
 * "TNTB-client" + hello + root nonce + the registration before its MAC:
 * both nonces are fresh, so a recorded exchange replays to nothing, and
 * the labels differ, so one side's proof is never valid for the other.
 */
#ifndef TNT_BOOT_BOOT_WIRE_H
#define TNT_BOOT_BOOT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "util/auth.h"
#include "boot/bootstrap.h"

#define TNT_BOOT_MAGIC 0x42544e54u /* "TNTB" */
#define TNT_BOOT_VERSION 4u
/* The status of a note: not a verdict, rank 0 is still waiting. */
#define TNT_BOOT_WAITING 0x57414954

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
    unsigned char mac[TNT_AUTH_MAC_BYTES];
} tnt_boot_challenge_t;

typedef struct tnt_boot_register {
    uint32_t magic;
    uint32_t version;
    int32_t nranks;
    int32_t rank;
    tnt_boot_entry_t entry;
    unsigned char mac[TNT_AUTH_MAC_BYTES]; /* last: covers all before */
} tnt_boot_register_t;

typedef struct tnt_boot_reply {
    uint32_t magic;
    int32_t status; /* a tnt_result_t */
    int32_t nranks;
    char msg[244];
} tnt_boot_reply_t;

/* The table after a good reply: this header, then `bytes` bytes of
 * entries in rank order, each only what it uses (a whole
 * tnt_boot_entry_t is 200 bytes, a TCP entry about 40 on the wire):
 *   rank u32 | addr_len u16 | addr[addr_len] | host_len u8 | host[host_len]
 * in the sender's byte order, like every bootstrap message (all ranks
 * run the same build). Rank 0 sends p - 1 copies, so this is the term of
 * its work that grows as p^2 (docs/scale.md). */
typedef struct tnt_boot_table_hdr {
    uint32_t magic;
    uint32_t version;
    int32_t nranks;
    uint32_t bytes;
} tnt_boot_table_hdr_t;

/* The shortest and longest entry on the wire (a host of at most
 * TNT_HOST_MAX - 1 bytes: the receiver terminates it). */
#define TNT_BOOT_WIRE_ENTRY_MIN (4 + 2 + 1 + 1)
#define TNT_BOOT_WIRE_ENTRY_MAX (4 + 2 + TNT_TRANSPORT_ADDR_MAX + 1 + \
                                 TNT_HOST_MAX - 1)

/* The largest input the MAC of a registration covers. */
#define TNT_BOOT_AUTH_MAX (16 + sizeof(tnt_boot_hello_t) + \
                           TNT_AUTH_NONCE_BYTES + sizeof(tnt_boot_register_t))

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

/**
 * Encode table[0..nranks-1] into out (room for nranks *
 * TNT_BOOT_WIRE_ENTRY_MAX bytes); returns the bytes written. Entries
 * must be valid (rank == index, 1..TNT_TRANSPORT_ADDR_MAX address bytes).
 */
size_t tnt__boot_table_encode(const tnt_boot_entry_t *table, int nranks,
                              unsigned char *out);

/** Parse a table header: NULL if it announces nranks entries in a byte
 *  count that nranks valid entries can have. */
const char *tnt__boot_table_hdr_parse(const void *buf, size_t len,
                                      int nranks, tnt_boot_table_hdr_t *out);

/**
 * Decode len bytes of entries into table[0..nranks-1]: NULL if they are
 * exactly nranks valid entries (rank i at index i, an address of
 * 1..TNT_TRANSPORT_ADDR_MAX bytes, a host without NUL bytes, terminated
 * here), else why not. Never reads past buf + len.
 */
const char *tnt__boot_table_decode(const void *buf, size_t len, int nranks,
                                   tnt_boot_entry_t *table);

/**
 * The bytes a MAC covers: label + hello + root nonce [+ registration up
 * to its MAC when reg is not NULL]. Writes at most TNT_BOOT_AUTH_MAX
 * bytes into out and returns how many.
 */
size_t tnt__boot_auth_input(int client, const tnt_boot_hello_t *h,
                            const unsigned char *root_nonce,
                            const tnt_boot_register_t *reg,
                            unsigned char *out);

#endif /* TNT_BOOT_BOOT_WIRE_H */
