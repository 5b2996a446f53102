/*
 * Unit tests of the verbs wire formats: round trips of every message
 * kind, the immediate and the handshake records, and rejection of every
 * malformed field (wire input is untrusted), including random garbage;
 * and the side channel's key proof run through both roles without a
 * device: what passes, and what a stranger, a replay or a reflection
 * cannot get past.
 */
#include <string.h>

#include "util/auth.h"
#include "harness.h"
#include "transport/verbs/verbs_wire.h"

static void test_msg_roundtrip(void)
{
    unsigned char buf[VB_MSG_HDR_LEN + 64 + 100];
    vb_msg_t m = {.kind = VB_K_EAGER, .ctrl_ret = 2, .data_ret = 300,
                  .core_hdr_len = 64, .len = 100};
    vb_msg_t d;
    tnt__vb_msg_encode(&m, buf);
    const char *why = tnt__vb_msg_decode(buf, sizeof(buf), &d);
    TH_CHECK(!why && d.kind == VB_K_EAGER && d.ctrl_ret == 2 &&
             d.data_ret == 300 && d.core_hdr_len == 64 && d.len == 100,
             "eager round trip: %s", why ? why : "fields differ");
    m = (vb_msg_t){.kind = VB_K_RTS, .core_hdr_len = 64,
                   .len = (uint64_t)5 << 30, .token = 77};
    tnt__vb_msg_encode(&m, buf);
    why = tnt__vb_msg_decode(buf, VB_MSG_HDR_LEN + 64, &d);
    TH_CHECK(!why && d.len == (uint64_t)5 << 30 && d.token == 77,
             "RTS round trip: %s", why ? why : "fields differ");
    m = (vb_msg_t){.kind = VB_K_CTS, .token = 77, .rtoken = 12345,
                   .raddr = 0x7f0012345678u, .rkey = 0xdeadbeef};
    tnt__vb_msg_encode(&m, buf);
    why = tnt__vb_msg_decode(buf, VB_MSG_HDR_LEN, &d);
    TH_CHECK(!why && d.token == 77 && d.rtoken == 12345 &&
             d.raddr == 0x7f0012345678u && d.rkey == 0xdeadbeef,
             "CTS round trip: %s", why ? why : "fields differ");
    m = (vb_msg_t){.kind = VB_K_CREDIT, .data_ret = 9, .ctrl_ret = 1};
    tnt__vb_msg_encode(&m, buf);
    why = tnt__vb_msg_decode(buf, VB_MSG_HDR_LEN, &d);
    TH_CHECK(!why && d.data_ret == 9 && d.ctrl_ret == 1,
             "credit round trip: %s", why ? why : "fields differ");
}

/* Encode, corrupt with f, expect a rejection. */
static void expect_bad(const vb_msg_t *m, size_t len, int off, int val,
                       const char *what)
{
    unsigned char buf[512];
    memset(buf, 0, sizeof(buf));
    tnt__vb_msg_encode(m, buf);
    if (off >= 0)
        buf[off] = (unsigned char)val;
    vb_msg_t d;
    TH_CHECK(tnt__vb_msg_decode(buf, len, &d) != NULL, "accepted: %s",
             what);
}

static void test_msg_rejects(void)
{
    vb_msg_t e = {.kind = VB_K_EAGER, .core_hdr_len = 64, .len = 10};
    size_t elen = VB_MSG_HDR_LEN + 64 + 10;
    expect_bad(&e, VB_MSG_HDR_LEN - 1, -1, 0, "short message");
    expect_bad(&e, elen, 0, 0x00, "bad magic");
    expect_bad(&e, elen, 2, 9, "unknown kind");
    expect_bad(&e, elen, 6, 1, "reserved bits");
    expect_bad(&e, elen + 1, -1, 0, "eager lengths too long");
    expect_bad(&e, elen - 1, -1, 0, "eager lengths too short");
    expect_bad(&e, elen, 12, 1, "token in eager");
    expect_bad(&e, elen, 23, 0x80, "huge eager length");
    vb_msg_t z = {.kind = VB_K_EAGER, .core_hdr_len = 0, .len = 0};
    expect_bad(&z, VB_MSG_HDR_LEN, -1, 0, "no core header");
    vb_msg_t big = {.kind = VB_K_EAGER, .core_hdr_len = VB_CORE_HDR_MAX + 1};
    expect_bad(&big, VB_MSG_HDR_LEN + VB_CORE_HDR_MAX + 1, -1, 0,
               "core header too long");
    vb_msg_t r = {.kind = VB_K_RTS, .core_hdr_len = 64, .len = 0};
    expect_bad(&r, VB_MSG_HDR_LEN + 64, -1, 0, "empty RTS");
    r.len = 1 << 20;
    expect_bad(&r, VB_MSG_HDR_LEN + 65, -1, 0, "RTS with extra bytes");
    vb_msg_t c = {.kind = VB_K_CTS, .rtoken = VB_IMM_TOKEN_MAX + 1,
                  .raddr = 1};
    expect_bad(&c, VB_MSG_HDR_LEN, -1, 0, "CTS token too large");
    c = (vb_msg_t){.kind = VB_K_CTS, .raddr = 0};
    expect_bad(&c, VB_MSG_HDR_LEN, -1, 0, "CTS null address");
    c.raddr = 4096;
    expect_bad(&c, VB_MSG_HDR_LEN + 1, -1, 0, "CTS with a body");
    vb_msg_t cr = {.kind = VB_K_CREDIT};
    expect_bad(&cr, VB_MSG_HDR_LEN, 12, 1, "credit with a token");
    /* Random garbage: never accepted as anything but well-formed, and
     * never read beyond the length given. */
    th_rng_t rng = {42};
    int accepted = 0;
    for (int i = 0; i < 20000; i++) {
        unsigned char buf[96];
        for (size_t k = 0; k < sizeof(buf); k++)
            buf[k] = (unsigned char)th_rnd(&rng);
        size_t len = th_rnd_below(&rng, sizeof(buf) + 1);
        vb_msg_t d;
        if (!tnt__vb_msg_decode(buf, len, &d))
            accepted++;
    }
    TH_CHECK(accepted == 0, "%d random buffers decoded as messages",
             accepted);
}

static void test_imm(void)
{
    vb_imm_t i = {VB_K_FIN, 255, 3, VB_IMM_TOKEN_MAX}, d;
    const char *why = tnt__vb_imm_decode(tnt__vb_imm_encode(&i), &d);
    TH_CHECK(!why && d.kind == VB_K_FIN && d.data_ret == 255 &&
             d.ctrl_ret == 3 && d.token == VB_IMM_TOKEN_MAX,
             "immediate round trip: %s", why ? why : "fields differ");
    i = (vb_imm_t){VB_K_FIN, 1, 0, 5};
    why = tnt__vb_imm_decode(tnt__vb_imm_encode(&i), &d);
    TH_CHECK(!why && d.data_ret == 1 && d.ctrl_ret == 0 && d.token == 5,
             "small immediate");
    TH_CHECK(tnt__vb_imm_decode(0, &d) != NULL &&
             tnt__vb_imm_decode(0x3u << 28, &d) != NULL &&
             tnt__vb_imm_decode(0xfu << 28, &d) != NULL,
             "immediate of another kind accepted");
}

static void test_hello(void)
{
    vb_hello_t h = {.version = VB_PROTO_VERSION, .job_id = 0x1122334455ull,
                    .comm_id = 1, .from = 2, .to = 5, .qpn = 0x123456,
                    .psn = 0xabcdef, .lid = 17, .mtu = 5, .is_reply = 1,
                    .depth = 64, .bounce_kib = 32};
    for (int i = 0; i < 16; i++) {
        h.gid[i] = (uint8_t)(i * 7);
        h.nonce[i] = (uint8_t)(200 - i);
    }
    unsigned char buf[VB_HELLO_LEN];
    vb_hello_t d;
    tnt__vb_hello_encode(&h, buf);
    const char *why = tnt__vb_hello_decode(buf, sizeof(buf), &d);
    TH_CHECK(!why && d.job_id == h.job_id && d.from == 2 && d.to == 5 &&
             d.qpn == h.qpn && d.psn == h.psn && d.lid == 17 &&
             d.mtu == 5 && d.is_reply == 1 && d.depth == 64 &&
             d.bounce_kib == 32 &&
             memcmp(d.gid, h.gid, 16) == 0 &&
             memcmp(d.nonce, h.nonce, 16) == 0,
             "hello round trip: %s", why ? why : "fields differ");
    static const struct {
        int off;
        int val;
        const char *what;
    } bad[] = {
        {0, 0, "magic"},      {4, 1, "version 1"},  {23, 0x80, "from < 0"},
        {27, 0x80, "to < 0"}, {28, 1, "qpn 1"},   {31, 1, "qpn > 24 bits"},
        {35, 1, "psn > 24 bits"}, {38, 0, "mtu 0"}, {38, 6, "mtu 6"},
        {39, 2, "reply flag"}, {57, 0x20, "depth"}, {58, 3, "bounce 3 KiB"},
        {59, 0x04, "bounce above 1 MiB"}, {60, 1, "reserved"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tnt__vb_hello_encode(&h, buf);
        if (bad[i].off == 28) {
            memset(buf + 28, 0, 4);
            buf[28] = 1;
        } else {
            buf[bad[i].off] = (unsigned char)bad[i].val;
        }
        TH_CHECK(tnt__vb_hello_decode(buf, sizeof(buf), &d) != NULL,
                 "hello with bad %s accepted", bad[i].what);
    }
    TH_CHECK(tnt__vb_hello_decode(buf, sizeof(buf) - 1, &d) != NULL,
             "short hello accepted");
}

static void test_auth_record(void)
{
    vb_auth_t a = {.kind = VB_AUTH_CHALLENGE}, d;
    for (int i = 0; i < (int)VB_NONCE_BYTES; i++)
        a.nonce[i] = (uint8_t)(i + 1);
    for (int i = 0; i < (int)VB_MAC_BYTES; i++)
        a.mac[i] = (uint8_t)(3 * i);
    unsigned char buf[VB_REC_LEN];
    tnt__vb_auth_encode(&a, buf);
    const char *why = tnt__vb_auth_decode(buf, sizeof(buf),
                                          VB_AUTH_CHALLENGE, &d);
    TH_CHECK(!why && memcmp(&a, &d, sizeof(a)) == 0,
             "challenge round trip: %s", why ? why : "fields differ");
    TH_CHECK(tnt__vb_auth_decode(buf, sizeof(buf), VB_AUTH_PROOF, &d),
             "a challenge accepted as a proof");
    TH_CHECK(tnt__vb_auth_decode(buf, sizeof(buf) - 1, VB_AUTH_CHALLENGE,
                                 &d),
             "short challenge accepted");
    static const struct {
        int off;
        const char *what;
    } bad[] = {{0, "magic"}, {4, "version"}, {8, "kind"},
               {60, "reserved"}, {79, "last reserved byte"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tnt__vb_auth_encode(&a, buf);
        buf[bad[i].off] ^= 0x5a;
        TH_CHECK(tnt__vb_auth_decode(buf, sizeof(buf), VB_AUTH_CHALLENGE,
                                     &d) != NULL,
                 "challenge with bad %s accepted", bad[i].what);
    }
    vb_auth_t pr = {.kind = VB_AUTH_PROOF};
    pr.nonce[3] = 1;
    tnt__vb_auth_encode(&pr, buf);
    TH_CHECK(tnt__vb_auth_decode(buf, sizeof(buf), VB_AUTH_PROOF, &d),
             "a proof with a nonce accepted");
}

/* One side-channel exchange up to the proof, as verbs.c runs it:
 * returns 1 if the acceptor (key ka) accepts the connector (key kc).
 * `replay_from`, if not NULL, is a proof record recorded from another
 * exchange that the connector sends instead of its own; `reflect` makes
 * it send the acceptor's own MAC back. */
static int exchange(const tnt_auth_key_t *kc, const tnt_auth_key_t *ka,
                    const unsigned char *replay_from, int reflect,
                    unsigned char proof_out[VB_REC_LEN],
                    int *connector_accepted)
{
    vb_hello_t h = {.version = VB_PROTO_VERSION, .job_id = 7, .comm_id = 1,
                    .from = 0, .to = 1, .qpn = 0x100, .psn = 5, .lid = 1,
                    .mtu = 3, .depth = 64, .bounce_kib = 8};
    tnt__auth_random(h.nonce, sizeof(h.nonce));
    unsigned char hello[VB_REC_LEN], rec[VB_REC_LEN];
    tnt__vb_hello_encode(&h, hello);
    /* Acceptor: the challenge. */
    uint8_t nonce_a[VB_NONCE_BYTES];
    tnt__auth_random(nonce_a, sizeof(nonce_a));
    vb_auth_t ch = {.kind = VB_AUTH_CHALLENGE};
    memcpy(ch.nonce, nonce_a, sizeof(nonce_a));
    unsigned char in[VB_AUTH_INPUT_MAX];
    size_t n = tnt__vb_auth_input(0, hello, nonce_a, in);
    TH_CHECK(n == VB_AUTH_INPUT_MAX, "MAC input of %zu bytes", n);
    tnt__auth_mac(ka, in, n, ch.mac);
    tnt__vb_auth_encode(&ch, rec);
    /* Connector: check the challenge, then prove. */
    vb_auth_t got;
    TH_CHECK(tnt__vb_auth_decode(rec, VB_REC_LEN, VB_AUTH_CHALLENGE, &got)
                 == NULL, "challenge does not decode");
    n = tnt__vb_auth_input(0, hello, got.nonce, in);
    *connector_accepted = tnt__auth_verify(kc, in, n, got.mac);
    vb_auth_t pr = {.kind = VB_AUTH_PROOF};
    n = tnt__vb_auth_input(1, hello, got.nonce, in);
    tnt__auth_mac(kc, in, n, pr.mac);
    if (reflect)
        memcpy(pr.mac, got.mac, VB_MAC_BYTES);
    tnt__vb_auth_encode(&pr, rec);
    if (proof_out)
        memcpy(proof_out, rec, VB_REC_LEN);
    if (replay_from)
        memcpy(rec, replay_from, VB_REC_LEN);
    /* Acceptor: check the proof. */
    if (tnt__vb_auth_decode(rec, VB_REC_LEN, VB_AUTH_PROOF, &got))
        return 0;
    n = tnt__vb_auth_input(1, hello, nonce_a, in);
    return tnt__auth_verify(ka, in, n, got.mac);
}

static void test_auth_exchange(void)
{
    TH_CHECK(tnt__auth_init() == TNT_SUCCESS, "libsodium init");
    tnt_auth_key_t k, other;
    tnt__auth_key_derive("verbs-test-key", &k);
    tnt__auth_key_derive("another-job", &other);
    unsigned char proof[VB_REC_LEN];
    int conn_ok = 0;
    TH_CHECK(exchange(&k, &k, NULL, 0, proof, &conn_ok) && conn_ok,
             "an exchange with the same key failed");
    TH_CHECK(!exchange(&other, &k, NULL, 0, NULL, &conn_ok) && !conn_ok,
             "a connector with another key got in, or accepted the "
             "acceptor");
    TH_CHECK(!exchange(&k, &other, NULL, 0, NULL, &conn_ok) && !conn_ok,
             "a connector trusted an acceptor with another key");
    TH_CHECK(!exchange(&k, &k, proof, 0, NULL, &conn_ok),
             "a recorded proof was accepted again (replay)");
    TH_CHECK(!exchange(&k, &k, NULL, 1, NULL, &conn_ok),
             "the acceptor's own MAC was accepted as the proof "
             "(reflection)");
}

static const th_test_def_t k_tests[] = {
    {"verbs_wire", "msg_roundtrip", test_msg_roundtrip},
    {"verbs_wire", "msg_rejects", test_msg_rejects},
    {"verbs_wire", "immediate", test_imm},
    {"verbs_wire", "auth_record", test_auth_record},
    {"verbs_wire", "auth_exchange", test_auth_exchange},
    {"verbs_wire", "hello", test_hello},
    {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
