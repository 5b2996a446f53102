/*
 * Encoding and validating decoding of the verbs transport's wire formats
 * (see verbs_wire.h).
 */
#include <string.h>

#include "util/auth.h"
#include "transport/verbs/verbs_wire.h"

static void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
    put16(p, (uint16_t)v);
    put16(p + 2, (uint16_t)(v >> 16));
}

static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

/* 1 if the n bytes at p are all zero (reserved fields, absent nonces). */
static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static uint16_t get16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32(const unsigned char *p)
{
    return get16(p) | ((uint32_t)get16(p + 2) << 16);
}

static uint64_t get64(const unsigned char *p)
{
    return get32(p) | ((uint64_t)get32(p + 4) << 32);
}

/* Layout of the 32-byte message header:
 *   0 magic16  2 kind8  3 ctrl_ret8  4 data_ret16  6 reserved16
 *   8 core_hdr_len32 (EAGER, RTS) | rtoken32 (CTS)
 *  12 token32 (RTS, CTS)
 *  16 len64 (EAGER, RTS) | raddr64 (CTS)
 *  24 rkey32 (CTS)  28 reserved32 */
void tnt__vb_msg_encode(const vb_msg_t *m, void *buf)
{
    unsigned char *p = buf;
    memset(p, 0, VB_MSG_HDR_LEN);
    put16(p, VB_MSG_MAGIC);
    p[2] = m->kind;
    p[3] = m->ctrl_ret;
    put16(p + 4, m->data_ret);
    if (m->kind == VB_K_CTS) {
        put32(p + 8, m->rtoken);
        put32(p + 12, m->token);
        put64(p + 16, m->raddr);
        put32(p + 24, m->rkey);
    } else {
        put32(p + 8, m->core_hdr_len);
        put32(p + 12, m->token);
        put64(p + 16, m->len);
    }
}

const char *tnt__vb_msg_decode(const void *buf, size_t len, vb_msg_t *m)
{
    const unsigned char *p = buf;
    memset(m, 0, sizeof(*m));
    if (len < VB_MSG_HDR_LEN)
        return "message shorter than its header";
    if (get16(p) != VB_MSG_MAGIC)
        return "bad message magic";
    if (get16(p + 6) != 0 || get32(p + 28) != 0)
        return "reserved header bits set";
    m->kind = p[2];
    m->ctrl_ret = p[3];
    m->data_ret = get16(p + 4);
    size_t body = len - VB_MSG_HDR_LEN;
    switch (m->kind) {
    case VB_K_EAGER:
    case VB_K_RTS:
        m->core_hdr_len = get32(p + 8);
        m->token = get32(p + 12);
        m->len = get64(p + 16);
        if (get32(p + 24) != 0)
            return "reserved header bits set";
        if (m->core_hdr_len == 0 || m->core_hdr_len > VB_CORE_HDR_MAX)
            return "core header length out of range";
        if (m->kind == VB_K_EAGER) {
            if (m->token != 0)
                return "token in an eager message";
            if (m->len > body || body - m->len != m->core_hdr_len)
                return "eager lengths do not add up to the message size";
        } else {
            if (body != m->core_hdr_len)
                return "RTS size does not match its core header";
            if (m->len == 0 || m->len > SIZE_MAX)
                return "RTS payload size out of range";
        }
        return NULL;
    case VB_K_CTS:
        m->rtoken = get32(p + 8);
        m->token = get32(p + 12);
        m->raddr = get64(p + 16);
        m->rkey = get32(p + 24);
        if (body != 0)
            return "CTS with a body";
        if (m->rtoken > VB_IMM_TOKEN_MAX)
            return "CTS receiver token out of range";
        if (m->raddr == 0)
            return "CTS with a null address";
        return NULL;
    case VB_K_CREDIT:
        if (body != 0 || get32(p + 8) || get32(p + 12) || get64(p + 16) ||
            get32(p + 24))
            return "credit message with a body";
        return NULL;
    default:
        return "unknown message kind";
    }
}

/* Immediate: kind 4 bits | data_ret 8 | ctrl_ret 2 | token 18. */
uint32_t tnt__vb_imm_encode(const vb_imm_t *imm)
{
    return ((uint32_t)(imm->kind & 0xfu) << 28) |
           ((uint32_t)imm->data_ret << 20) |
           ((uint32_t)(imm->ctrl_ret & 0x3u) << 18) |
           (imm->token & VB_IMM_TOKEN_MAX);
}

const char *tnt__vb_imm_decode(uint32_t raw, vb_imm_t *imm)
{
    imm->kind = (uint8_t)(raw >> 28);
    imm->data_ret = (uint8_t)(raw >> 20);
    imm->ctrl_ret = (uint8_t)((raw >> 18) & 0x3u);
    imm->token = raw & VB_IMM_TOKEN_MAX;
    if (imm->kind != VB_K_FIN)
        return "unknown immediate kind";
    return NULL;
}

/* Layout of the 80-byte hello:
 *   0 magic32  4 version32  8 job64  16 comm32  20 from32  24 to32
 *  28 qpn32  32 psn32  36 lid16  38 mtu8  39 is_reply8  40 gid[16]
 *  56 depth16  58 bounce_kib16  60 reserved (4 bytes)  64 nonce[16] */
void tnt__vb_hello_encode(const vb_hello_t *h, void *buf)
{
    unsigned char *p = buf;
    memset(p, 0, VB_HELLO_LEN);
    put32(p, VB_HELLO_MAGIC);
    put32(p + 4, h->version);
    put64(p + 8, h->job_id);
    put32(p + 16, h->comm_id);
    put32(p + 20, (uint32_t)h->from);
    put32(p + 24, (uint32_t)h->to);
    put32(p + 28, h->qpn);
    put32(p + 32, h->psn);
    put16(p + 36, h->lid);
    p[38] = h->mtu;
    p[39] = h->is_reply;
    memcpy(p + 40, h->gid, 16);
    put16(p + 56, h->depth);
    put16(p + 58, h->bounce_kib);
    memcpy(p + 64, h->nonce, VB_NONCE_BYTES);
}

const char *tnt__vb_hello_decode(const void *buf, size_t len, vb_hello_t *h)
{
    const unsigned char *p = buf;
    memset(h, 0, sizeof(*h));
    if (len != VB_HELLO_LEN)
        return "handshake record of the wrong size";
    if (get32(p) != VB_HELLO_MAGIC)
        return "not a libtntcomm verbs handshake";
    h->version = get32(p + 4);
    if (h->version != VB_PROTO_VERSION)
        return "wrong verbs protocol version";
    h->job_id = get64(p + 8);
    h->comm_id = get32(p + 16);
    h->from = (int32_t)get32(p + 20);
    h->to = (int32_t)get32(p + 24);
    h->qpn = get32(p + 28);
    h->psn = get32(p + 32);
    h->lid = get16(p + 36);
    h->mtu = p[38];
    h->is_reply = p[39];
    memcpy(h->gid, p + 40, 16);
    h->depth = get16(p + 56);
    h->bounce_kib = get16(p + 58);
    memcpy(h->nonce, p + 64, VB_NONCE_BYTES);
    if (!all_zero(p + 60, 4))
        return "reserved handshake bytes set";
    if (h->from < 0 || h->to < 0)
        return "negative rank in handshake";
    if (h->qpn < 2 || h->qpn > 0xffffffu)
        return "queue pair number out of range";
    if (h->psn > 0xffffffu)
        return "packet sequence number out of range";
    if (h->mtu < 1 || h->mtu > 5)
        return "path MTU out of range";
    if (h->is_reply > 1)
        return "bad reply flag";
    if (h->depth == 0 || h->depth > 4096)
        return "receive ring depth out of range";
    if (h->bounce_kib < 4 || h->bounce_kib > 1024)
        return "bounce buffer size out of range";
    return NULL;
}

/* Layout of the 80-byte challenge and proof:
 *   0 magic32  4 version32  8 kind32  12 nonce[16]  28 mac[32]
 *  60 reserved (20 bytes) */
void tnt__vb_auth_encode(const vb_auth_t *a, void *buf)
{
    unsigned char *p = buf;
    memset(p, 0, VB_REC_LEN);
    put32(p, VB_AUTH_MAGIC);
    put32(p + 4, VB_PROTO_VERSION);
    put32(p + 8, a->kind);
    memcpy(p + 12, a->nonce, VB_NONCE_BYTES);
    memcpy(p + 28, a->mac, VB_MAC_BYTES);
}

const char *tnt__vb_auth_decode(const void *buf, size_t len, uint32_t kind,
                                vb_auth_t *a)
{
    const unsigned char *p = buf;
    memset(a, 0, sizeof(*a));
    if (len != VB_REC_LEN)
        return "authentication record of the wrong size";
    if (get32(p) != VB_AUTH_MAGIC)
        return "not a libtntcomm verbs authentication record";
    if (get32(p + 4) != VB_PROTO_VERSION)
        return "wrong verbs protocol version";
    a->kind = get32(p + 8);
    if (a->kind != kind)
        return kind == VB_AUTH_CHALLENGE ? "expected a challenge"
                                         : "expected a proof";
    memcpy(a->nonce, p + 12, VB_NONCE_BYTES);
    memcpy(a->mac, p + 28, VB_MAC_BYTES);
    if (!all_zero(p + 60, VB_REC_LEN - 60))
        return "reserved authentication bytes set";
    if (kind == VB_AUTH_PROOF && !all_zero(a->nonce, VB_NONCE_BYTES))
        return "a proof carries no nonce";
    return NULL;
}

size_t tnt__vb_auth_input(int connector, const void *hello_rec,
                          const uint8_t nonce_a[VB_NONCE_BYTES],
                          unsigned char out[VB_AUTH_INPUT_MAX])
{
    return tnt__auth_transcript(connector ? "TNT-vb-connect"
                                          : "TNT-vb-accept",
                                hello_rec, VB_HELLO_LEN, nonce_a,
                                VB_NONCE_BYTES, out, VB_AUTH_INPUT_MAX);
}
