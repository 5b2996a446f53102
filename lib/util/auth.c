/*
 * The job key's cryptography, on libsodium: SHA-256 turns the key string
 * (any length, usually 64 hex digits from tnt-run) into a 32-byte MAC key,
 * HMAC-SHA256 proves knowledge of it, randombytes_buf makes nonces and
 * crypto_verify_32 compares MACs in constant time.
 */
#include <sodium.h>
#include <string.h>

#include "util/auth.h"
#include "util/error.h"

tnt_result_t tnt__auth_init(void)
{
    /* sodium_init is thread-safe and returns 1 once already done. */
    if (sodium_init() < 0)
        return tnt__error(TNT_ERR_SYSTEM, "libsodium failed to initialise "
                          "(no entropy source?)");
    return TNT_SUCCESS;
}

uint64_t tnt__auth_job_id(const char *key)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = key ? key : ""; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 1099511628211ull;
    }
    return h;
}

void tnt__auth_key_derive(const char *job_key, tnt_auth_key_t *out)
{
    const char *k = job_key && *job_key ? job_key : TNT_AUTH_DEFAULT_KEY;
    crypto_hash_sha256(out->k, (const unsigned char *)k, strlen(k));
}

void tnt__auth_random(void *buf, size_t len)
{
    randombytes_buf(buf, len);
}

void tnt__auth_mac(const tnt_auth_key_t *key, const void *data, size_t len,
                   unsigned char mac[TNT_AUTH_MAC_BYTES])
{
    crypto_auth_hmacsha256(mac, data, len, key->k);
}

int tnt__auth_verify(const tnt_auth_key_t *key, const void *data,
                     size_t len, const unsigned char mac[TNT_AUTH_MAC_BYTES])
{
    return crypto_auth_hmacsha256_verify(mac, data, len, key->k) == 0;
}

size_t tnt__auth_transcript(const char *label, const void *hello,
                            size_t hello_len, const void *answer,
                            size_t answer_len, unsigned char *out,
                            size_t cap)
{
    size_t n = TNT_AUTH_LABEL_BYTES + hello_len + answer_len;
    if (n > cap || n < hello_len)
        return 0;
    memset(out, 0, TNT_AUTH_LABEL_BYTES);
    memcpy(out, label, strnlen(label, TNT_AUTH_LABEL_BYTES));
    memcpy(out + TNT_AUTH_LABEL_BYTES, hello, hello_len);
    memcpy(out + TNT_AUTH_LABEL_BYTES + hello_len, answer, answer_len);
    return n;
}

void tnt__auth_key_wipe(tnt_auth_key_t *key)
{
    sodium_memzero(key->k, sizeof(key->k));
}
