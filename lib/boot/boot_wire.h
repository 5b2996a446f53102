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
#define TNT_BOOT_VERSION 3u
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

/** Check the table of nranks entries sent after a good reply. */
const char *tnt__boot_table_check(tnt_boot_entry_t *table, int nranks);

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
