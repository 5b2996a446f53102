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
    else if (tnt__boot_listener_check(&r->listener))
        snprintf(msg, msglen, "rank %d sent a malformed bootstrap listener "
                 "(%s)", r->rank, tnt__boot_listener_check(&r->listener));
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

const char *tnt__boot_listener_check(const tnt_boot_listener_t *l)
{
    if (l->family == 0)
        return NULL;
    if (l->family != 4 && l->family != 6)
        return "a bootstrap listener of an unknown address family";
    if (l->port == 0)
        return "a bootstrap listener without a port";
    return NULL;
}

size_t tnt__boot_table_encode(const tnt_boot_entry_t *table,
                              const tnt_boot_listener_t *listeners,
                              int nranks, unsigned char *out)
{
    size_t n = 0;
    for (int i = 0; i < nranks; i++) {
        const tnt_boot_entry_t *e = &table[i];
        uint32_t rank = (uint32_t)e->rank;
        uint16_t alen = (uint16_t)e->addr_len;
        size_t hl = strnlen(e->host, TNT_HOST_MAX - 1);
        memcpy(out + n, &rank, 4);
        memcpy(out + n + 4, &alen, 2);
        memcpy(out + n + 6, e->addr, alen);
        n += 6 + alen;
        out[n++] = (uint8_t)hl;
        memcpy(out + n, e->host, hl);
        n += hl;
        const tnt_boot_listener_t *l = listeners ? &listeners[i] : NULL;
        out[n++] = l ? l->family : 0;
        if (l && l->family) {
            size_t iplen = l->family == 4 ? 4 : 16;
            memcpy(out + n, &l->port, 2);
            memcpy(out + n + 2, l->ip, iplen);
            n += 2 + iplen;
        }
    }
    return n;
}

static const char k_table_label[16] = "TNTB-table";

void tnt__boot_table_hdr_init(tnt_boot_table_hdr_t *h, int nranks,
                              uint32_t bytes, const unsigned char *nonce)
{
    memset(h, 0, sizeof(*h));
    memcpy(h->label, k_table_label, sizeof(h->label));
    h->magic = TNT_BOOT_MAGIC;
    h->version = TNT_BOOT_VERSION;
    h->nranks = nranks;
    h->bytes = bytes;
    if (nonce)
        memcpy(h->table_nonce, nonce, sizeof(h->table_nonce));
}

const char *tnt__boot_table_hdr_parse(const void *buf, size_t len,
                                      int nranks, tnt_boot_table_hdr_t *out)
{
    if (len != sizeof(*out))
        return "bootstrap table header of the wrong length";
    memcpy(out, buf, sizeof(*out));
    if (out->magic != TNT_BOOT_MAGIC ||
        memcmp(out->label, k_table_label, sizeof(k_table_label)) != 0)
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
                                   tnt_boot_entry_t *table,
                                   tnt_boot_listener_t *listeners)
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
        if (len - n < hlen + 1)
            return "bootstrap table cut short";
        if (memchr(b + n, '\0', hlen))
            return "bootstrap table entry with a NUL in its host name";
        memcpy(e->host, b + n, hlen);
        e->host[hlen] = '\0';
        n += hlen;
        tnt_boot_listener_t l;
        memset(&l, 0, sizeof(l));
        l.family = b[n++];
        if (l.family != 0) {
            size_t iplen = l.family == 4 ? 4 : 16;
            if (l.family != 4 && l.family != 6)
                return "bootstrap table entry with an unknown listener "
                       "family";
            if (len - n < 2 + iplen)
                return "bootstrap table cut short";
            memcpy(&l.port, b + n, 2);
            memcpy(l.ip, b + n + 2, iplen);
            n += 2 + iplen;
            if (tnt__boot_listener_check(&l))
                return "bootstrap table entry with a malformed listener";
        }
        if (listeners)
            listeners[i] = l;
    }
    if (n != len)
        return "bootstrap table with bytes after its last entry";
    return NULL;
}

const char *tnt__boot_ack_parse(const void *buf, size_t len, int rank,
                                int nranks, tnt_boot_ack_t *out)
{
    if (len != sizeof(*out))
        return "bootstrap acknowledgement of the wrong length";
    memcpy(out, buf, sizeof(*out));
    out->msg[sizeof(out->msg) - 1] = '\0';
    if (out->magic != TNT_BOOT_MAGIC || out->version != TNT_BOOT_VERSION)
        return "not a libtntcomm bootstrap acknowledgement";
    if (out->rank != rank)
        return "a bootstrap acknowledgement for another rank";
    if (out->status > 0)
        return "a bootstrap acknowledgement with an invalid status";
    if (out->status < 0 && (out->about <= 0 || out->about >= nranks))
        return "a bootstrap acknowledgement about a rank out of range";
    return NULL;
}

int tnt__boot_tree_children(int rank, int nranks, int *out)
{
    /* Below rank's lowest set bit (rank 0: no bit, every power of 2). */
    unsigned low = rank == 0 ? 1u << 31 : (unsigned)rank & -(unsigned)rank;
    int n = 0;
    for (unsigned m = 1; m < low && (long)rank + m < nranks; m <<= 1)
        out[n++] = rank + (int)m;
    /* The largest subtree first: it has the longest way to go. */
    for (int i = 0; i < n / 2; i++) {
        int t = out[i];
        out[i] = out[n - 1 - i];
        out[n - 1 - i] = t;
    }
    return n;
}

size_t tnt__boot_auth_input(int client, const tnt_boot_hello_t *h,
                            const tnt_boot_challenge_t *ch,
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
    size_t chal = offsetof(tnt_boot_challenge_t, mac);
    memcpy(out + n, ch, chal);
    n += chal;
    if (reg) {
        size_t covered = offsetof(tnt_boot_register_t, mac);
        memcpy(out + n, reg, covered);
        n += covered;
    }
    return n;
}
