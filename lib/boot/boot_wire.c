/*
 * Parsers of the bootstrap messages (see boot_wire.h). Each checks the
 * length first, then every field it hands on; strings from the wire are
 * NUL-terminated here so that no caller can read past them.
 */
#include <stdio.h>
#include <string.h>

#include "boot/boot_wire.h"

const char *tnt__boot_hello_parse(const void *buf, size_t len,
                                  uint64_t job_id, tnt_boot_hello_t *out)
{
    if (len != sizeof(*out))
        return "not a libtntcomm bootstrap hello (wrong length)";
    memcpy(out, buf, sizeof(*out));
    if (out->magic != TNT_BOOT_MAGIC)
        return "not a libtntcomm bootstrap hello";
    if (out->version != TNT_BOOT_VERSION)
        return "another bootstrap protocol version";
    if (out->job_id != job_id)
        return "hello for another job";
    return NULL;
}

const char *tnt__boot_challenge_parse(const void *buf, size_t len,
                                      tnt_boot_challenge_t *out)
{
    if (len != sizeof(*out))
        return "not a bootstrap challenge (wrong length)";
    memcpy(out, buf, sizeof(*out));
    if (out->magic != TNT_BOOT_MAGIC)
        return "not a libtntcomm bootstrap challenge";
    if (out->version != TNT_BOOT_VERSION)
        return "another bootstrap protocol version";
    return NULL;
}

const char *tnt__boot_register_parse(const void *buf, size_t len,
                                     tnt_boot_register_t *out)
{
    if (len != sizeof(*out))
        return "not a bootstrap registration (wrong length)";
    memcpy(out, buf, sizeof(*out));
    if (out->magic != TNT_BOOT_MAGIC || out->version != TNT_BOOT_VERSION)
        return "not a libtntcomm bootstrap registration";
    out->entry.host[TNT_HOST_MAX - 1] = '\0';
    return NULL;
}

int tnt__boot_register_check(const tnt_boot_register_t *r, int nranks,
                             const int *taken, char *msg, size_t msglen)
{
    if (r->nranks != nranks)
        snprintf(msg, msglen, "rank %d has TNT_SIZE=%d but rank 0 has "
                 "TNT_SIZE=%d", r->rank, r->nranks, nranks);
    else if (r->rank <= 0 || r->rank >= nranks || r->entry.rank != r->rank)
        snprintf(msg, msglen, "a rank registered as rank %d, outside "
                 "1..%d", r->rank, nranks - 1);
    else if (taken[r->rank])
        snprintf(msg, msglen, "two processes registered as rank %d",
                 r->rank);
    else if (r->entry.addr_len == 0 ||
             r->entry.addr_len > TNT_TRANSPORT_ADDR_MAX)
        snprintf(msg, msglen, "rank %d sent a malformed address (%u "
                 "bytes)", r->rank, r->entry.addr_len);
    else
        return 0;
    return -1;
}

const char *tnt__boot_reply_parse(const void *buf, size_t len, int nranks,
                                  tnt_boot_reply_t *out)
{
    if (len != sizeof(*out))
        return "bootstrap answer of the wrong length";
    memcpy(out, buf, sizeof(*out));
    out->msg[sizeof(out->msg) - 1] = '\0';
    if (out->magic != TNT_BOOT_MAGIC)
        return "not a libtntcomm bootstrap answer";
    if (out->nranks != nranks)
        return "bootstrap answer for another job size";
    if (out->status > 0 && out->status != TNT_BOOT_WAITING)
        return "bootstrap answer with an invalid status";
    return NULL;
}

size_t tnt__boot_table_encode(const tnt_boot_entry_t *table, int nranks,
                              unsigned char *out)
{
    size_t n = 0;
    for (int i = 0; i < nranks; i++) {
        const tnt_boot_entry_t *e = &table[i];
        uint32_t rank = (uint32_t)e->rank;
        uint16_t alen = (uint16_t)e->addr_len;
        size_t hl = strnlen(e->host, TNT_HOST_MAX - 1);
        uint8_t hlen = (uint8_t)hl;
        memcpy(out + n, &rank, 4);
        memcpy(out + n + 4, &alen, 2);
        memcpy(out + n + 6, e->addr, alen);
        n += 6 + alen;
        out[n++] = hlen;
        memcpy(out + n, e->host, hl);
        n += hl;
    }
    return n;
}

const char *tnt__boot_table_hdr_parse(const void *buf, size_t len,
                                      int nranks, tnt_boot_table_hdr_t *out)
{
    if (len != sizeof(*out))
        return "bootstrap table header of the wrong length";
    memcpy(out, buf, sizeof(*out));
    if (out->magic != TNT_BOOT_MAGIC)
        return "not a libtntcomm bootstrap table";
    if (out->version != TNT_BOOT_VERSION)
        return "a bootstrap table of another protocol version";
    if (nranks <= 0 || out->nranks != nranks)
        return "a bootstrap table for another job size";
    if ((uint64_t)out->bytes < (uint64_t)nranks * TNT_BOOT_WIRE_ENTRY_MIN ||
        (uint64_t)out->bytes > (uint64_t)nranks * TNT_BOOT_WIRE_ENTRY_MAX)
        return "a bootstrap table of an impossible length";
    return NULL;
}

const char *tnt__boot_table_decode(const void *buf, size_t len, int nranks,
                                   tnt_boot_entry_t *table)
{
    const unsigned char *b = buf;
    size_t n = 0;
    for (int i = 0; i < nranks; i++) {
        tnt_boot_entry_t *e = &table[i];
        uint32_t rank;
        uint16_t alen;
        /* Each length is checked against what is left before use. */
        if (len - n < 6)
            return "bootstrap table cut short";
        memcpy(&rank, b + n, 4);
        memcpy(&alen, b + n + 4, 2);
        n += 6;
        if (rank != (uint32_t)i)
            return "bootstrap table entry for the wrong rank";
        if (alen == 0 || alen > TNT_TRANSPORT_ADDR_MAX)
            return "bootstrap table entry with a malformed address";
        if (len - n < (size_t)alen + 1)
            return "bootstrap table cut short";
        memset(e, 0, sizeof(*e));
        e->rank = i;
        e->addr_len = alen;
        memcpy(e->addr, b + n, alen);
        n += alen;
        size_t hlen = b[n++];
        if (hlen >= TNT_HOST_MAX)
            return "bootstrap table entry with a host name too long";
        if (len - n < hlen)
            return "bootstrap table cut short";
        if (memchr(b + n, '\0', hlen))
            return "bootstrap table entry with a NUL in its host name";
        memcpy(e->host, b + n, hlen);
        e->host[hlen] = '\0';
        n += hlen;
    }
    if (n != len)
        return "bootstrap table with bytes after its last entry";
    return NULL;
}

size_t tnt__boot_auth_input(int client, const tnt_boot_hello_t *h,
                            const unsigned char *root_nonce,
                            const tnt_boot_register_t *reg,
                            unsigned char *out)
{
    /* Fixed 16-byte labels, so that no two inputs can be confused. */
    static const char label_client[16] = "TNTB-client";
    static const char label_root[16] = "TNTB-root";
    size_t n = 0;
    memcpy(out + n, client ? label_client : label_root, 16);
    n += 16;
    memcpy(out + n, h, sizeof(*h));
    n += sizeof(*h);
    memcpy(out + n, root_nonce, TNT_AUTH_NONCE_BYTES);
    n += TNT_AUTH_NONCE_BYTES;
    if (reg) {
        size_t covered = offsetof(tnt_boot_register_t, mac);
        memcpy(out + n, reg, covered);
        n += covered;
    }
    return n;
}
