/*
 * Authentication with the job key: every connection of a job (bootstrap
 * and data) proves that both ends know the key with a challenge-response
 * HMAC-SHA256 over both sides' fresh nonces. The primitives come from
 * libsodium; this file only names the few operations the protocols need,
 * so that the key itself never leaves the core.
 */
#ifndef TNT_UTIL_AUTH_H
#define TNT_UTIL_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "tnt/transport.h"

#define TNT_AUTH_KEY_BYTES 32
#define TNT_AUTH_NONCE_BYTES 16
/* The key of jobs started without TNT_JOB_KEY: such a job still refuses
 * garbage and other protocol versions, but anyone who reads this source
 * can join it (comm.c warns when more than one rank uses it). */
#define TNT_AUTH_DEFAULT_KEY "libtntcomm-default-job-key-not-secret"

typedef struct tnt_auth_key {
    unsigned char k[TNT_AUTH_KEY_BYTES];
} tnt_auth_key_t;

/** Initialise libsodium (idempotent, thread-safe). */
tnt_result_t tnt__auth_init(void);

/** The job id on the wire (FNV-1a of the key string): it tells two jobs
 *  on one host apart early; it is public, not a proof of anything. */
uint64_t tnt__auth_job_id(const char *job_key);

/** Derive the MAC key from the job key string (NULL: the default key). */
void tnt__auth_key_derive(const char *job_key, tnt_auth_key_t *out);

/** Fill buf with unpredictable bytes (nonces). */
void tnt__auth_random(void *buf, size_t len);

/** mac = HMAC-SHA256(key, data). */
void tnt__auth_mac(const tnt_auth_key_t *key, const void *data, size_t len,
                   unsigned char mac[TNT_AUTH_MAC_BYTES]);

/** 1 if mac is HMAC-SHA256(key, data), compared in constant time. */
int tnt__auth_verify(const tnt_auth_key_t *key, const void *data,
                     size_t len, const unsigned char mac[TNT_AUTH_MAC_BYTES]);

/* Bytes of a transcript's direction label (zero-padded). */
#define TNT_AUTH_LABEL_BYTES 16

/** Write the input of a handshake MAC into out (cap bytes): a direction
 *  label, then the connector's hello, then the acceptor's answer (at
 *  least its fresh nonce). Every transport's handshake proves the key
 *  over such a transcript, so that a proof covers both sides' nonces and
 *  the direction and can be neither replayed nor reflected. Returns the
 *  length, or 0 when it does not fit in cap. */
size_t tnt__auth_transcript(const char *label, const void *hello,
                            size_t hello_len, const void *answer,
                            size_t answer_len, unsigned char *out,
                            size_t cap);

/** Forget a key (memory the compiler may not optimise away). */
void tnt__auth_key_wipe(tnt_auth_key_t *key);

#endif /* TNT_UTIL_AUTH_H */
