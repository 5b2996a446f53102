/*
 * Unit tests of everything a stranger's bytes reach first: the bootstrap
 * messages (boot/boot_wire.h), the TCP handshake and frames
 * (transport/tcp/tcp_wire.h), the core's message header (core/msg_hdr.h) and
 * the job-key MACs (util/auth.h). Each parser is fed a good message and
 * then the same message with one field wrong at a time: it must name the
 * problem, and accept only the good one. No network: the multi-process
 * intruder suite (test_intruder.c) covers the sockets.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "util/auth.h"
#include "boot/boot_tree.h"
#include "boot/boot_wire.h"
#include "core/msg_hdr.h"
#include "harness.h"
#include "transport/shm/shm_internal.h"
#include "transport/tcp/tcp_wire.h"

/* ---- bootstrap messages ---------------------------------------------- */

static tnt_boot_hello_t good_boot_hello(void)
{
    tnt_boot_hello_t h;
    memset(&h, 0, sizeof(h));
    h.magic = TNT_BOOT_MAGIC;
    h.version = TNT_BOOT_VERSION;
    h.job_id = 42;
    memset(h.nonce, 7, sizeof(h.nonce));
    return h;
}

static void test_boot_hello(void)
{
    tnt_boot_hello_t h = good_boot_hello(), out;
    TH_CHECK(!tnt__boot_hello_parse(&h, sizeof(h), 42, &out),
             "a good hello was refused");
    TH_CHECK(memcmp(&h, &out, sizeof(h)) == 0, "hello not copied");
    TH_CHECK(tnt__boot_hello_parse(&h, sizeof(h) - 1, 42, &out) != NULL,
             "short hello accepted");
    TH_CHECK(tnt__boot_hello_parse(&h, sizeof(h), 43, &out) != NULL,
             "hello of another job accepted");
    tnt_boot_hello_t bad = h;
    bad.magic ^= 1;
    TH_CHECK(tnt__boot_hello_parse(&bad, sizeof(bad), 42, &out) != NULL,
             "bad magic accepted");
    bad = h;
    bad.version = TNT_BOOT_VERSION + 1;
    const char *why = tnt__boot_hello_parse(&bad, sizeof(bad), 42, &out);
    TH_CHECK(why && strstr(why, "version"), "other version: %s",
             why ? why : "accepted");
}

static tnt_boot_register_t good_register(int rank)
{
    tnt_boot_register_t r;
    memset(&r, 0, sizeof(r));
    r.magic = TNT_BOOT_MAGIC;
    r.version = TNT_BOOT_VERSION;
    r.nranks = 4;
    r.rank = rank;
    r.entry.rank = rank;
    r.entry.addr_len = 16;
    snprintf(r.entry.host, sizeof(r.entry.host), "host%d", rank);
    return r;
}

static void test_boot_register(void)
{
    tnt_boot_register_t r = good_register(2), out;
    int taken[4] = {1, 0, 0, 0};
    char msg[240];
    TH_CHECK(!tnt__boot_register_parse(&r, sizeof(r), &out),
             "a good registration was refused");
    TH_CHECK(tnt__boot_register_check(&out, 4, taken, msg, sizeof(msg)) == 0,
             "good registration judged bad");
    TH_CHECK(tnt__boot_register_parse(&r, sizeof(r) + 1, &out) != NULL,
             "long registration accepted");
    /* An unterminated host string is cut, not read past. */
    memset(r.entry.host, 'x', sizeof(r.entry.host));
    TH_CHECK(!tnt__boot_register_parse(&r, sizeof(r), &out) &&
             strlen(out.entry.host) == TNT_HOST_MAX - 1,
             "host not terminated");
    struct { int rank, nranks, erank; unsigned alen; int taken2; } bad[] = {
        {2, 5, 2, 16, 0}, {0, 4, 0, 16, 0}, {4, 4, 4, 16, 0},
        {-1, 4, -1, 16, 0}, {2, 4, 3, 16, 0}, {2, 4, 2, 0, 0},
        {2, 4, 2, TNT_TRANSPORT_ADDR_MAX + 1, 0}, {2, 4, 2, 16, 1},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tnt_boot_register_t b = good_register(2);
        b.rank = bad[i].rank;
        b.nranks = bad[i].nranks;
        b.entry.rank = bad[i].erank;
        b.entry.addr_len = bad[i].alen;
        taken[2] = bad[i].taken2;
        msg[0] = '\0';
        TH_CHECK(tnt__boot_register_check(&b, 4, taken, msg,
                                          sizeof(msg)) != 0 && msg[0],
                 "bad registration %zu accepted", i);
    }
}

static void test_boot_reply(void)
{
    tnt_boot_reply_t r, out;
    memset(&r, 0, sizeof(r));
    r.magic = TNT_BOOT_MAGIC;
    r.nranks = 3;
    memset(r.msg, 'a', sizeof(r.msg));
    TH_CHECK(!tnt__boot_reply_parse(&r, sizeof(r), 3, &out) &&
             strlen(out.msg) == sizeof(out.msg) - 1, "good reply refused");
    TH_CHECK(tnt__boot_reply_parse(&r, sizeof(r), 4, &out) != NULL,
             "reply for another size accepted");
    r.status = 5;
    TH_CHECK(tnt__boot_reply_parse(&r, sizeof(r), 3, &out) != NULL,
             "positive status accepted");
}

/* A table of p entries with addresses of 1..128 bytes and hosts of
 * 0..63 characters, encoded, decodes to the same entries; the encoding
 * holds each entry's used bytes only; every cut, every wrong rank, length
 * or stray NUL is refused with a reason, never read past. */
static void test_boot_table(void)
{
    enum { P = 7 };
    tnt_boot_entry_t t[P], back[P];
    tnt_boot_listener_t l[P], lback[P];
    memset(t, 0, sizeof(t));
    memset(l, 0, sizeof(l));
    size_t used = 0;
    for (int i = 0; i < P; i++) {
        t[i].rank = i;
        t[i].addr_len = i == 0 ? 1 : i == 1 ? TNT_TRANSPORT_ADDR_MAX
                                            : (unsigned)(5 + 11 * i);
        for (unsigned k = 0; k < t[i].addr_len; k++)
            t[i].addr[k] = (unsigned char)(i * 31 + k);
        memset(t[i].host, 'a' + i, i == 2 ? TNT_HOST_MAX - 1
                                          : (size_t)(i == 3 ? 0 : 4 + i));
        used += 4 + 2 + t[i].addr_len + 1 + strlen(t[i].host) + 1;
        /* Listeners: none on 0 and 1, then IPv4 and IPv6 in turn. */
        if (i >= 2) {
            l[i].family = i % 2 ? 4 : 6;
            l[i].port = (uint16_t)(1000 + i);
            for (int k = 0; k < (l[i].family == 4 ? 4 : 16); k++)
                l[i].ip[k] = (unsigned char)(i + 7 * k);
            used += 2 + (l[i].family == 4 ? 4 : 16);
        }
    }
    unsigned char enc[P * TNT_BOOT_WIRE_ENTRY_MAX + 8];
    size_t n = tnt__boot_table_encode(t, l, P, enc);
    TH_CHECK(n == used, "encoded %zu bytes, expected %zu", n, used);
    TH_CHECK(!tnt__boot_table_decode(enc, n, P, back, lback),
             "good table refused");
    for (int i = 0; i < P; i++)
        TH_CHECK(back[i].rank == i && back[i].addr_len == t[i].addr_len &&
                 memcmp(back[i].addr, t[i].addr, t[i].addr_len) == 0 &&
                 strcmp(back[i].host, t[i].host) == 0 &&
                 memcmp(&lback[i], &l[i], sizeof(l[i])) == 0,
                 "entry %d changed on the way", i);
    /* Without listeners: one family byte (0) an entry. */
    unsigned char enc0[P * TNT_BOOT_WIRE_ENTRY_MAX];
    size_t n0 = tnt__boot_table_encode(t, NULL, P, enc0);
    TH_CHECK(n0 == n - (2 + 4) * 2 - (2 + 16) * 3,
             "table without listeners of %zu bytes", n0);
    TH_CHECK(!tnt__boot_table_decode(enc0, n0, P, back, lback) &&
             lback[4].family == 0, "table without listeners refused");
    for (size_t cut = 0; cut < n; cut++)
        TH_CHECK(tnt__boot_table_decode(enc, cut, P, back, lback) != NULL,
                 "table cut to %zu of %zu bytes accepted", cut, n);
    enc[n] = 0;
    TH_CHECK(tnt__boot_table_decode(enc, n + 1, P, back, NULL) != NULL,
             "table with a trailing byte accepted");
    TH_CHECK(tnt__boot_table_decode(enc, n, P - 1, back, NULL) != NULL,
             "table of 7 entries accepted as 6");
    /* Entry 1 starts after entry 0's 4 + 2 + 1 + 1 + 4 + 1 bytes. */
    size_t e1 = 4 + 2 + 1 + 1 + 4 + 1;
    /* Entry 2 after entry 1's 4 + 2 + 128 + 1 + 5 + 1. */
    size_t e2 = e1 + 4 + 2 + TNT_TRANSPORT_ADDR_MAX + 1 + 5 + 1;
    size_t e2fam = e2 + 4 + 2 + t[2].addr_len + 1 + TNT_HOST_MAX - 1;
    unsigned char bad[sizeof(enc)];
    struct { size_t off; unsigned char v; const char *what; } cases[] = {
        {e1, 2, "wrong rank"},
        {e1 + 4, 0, "address length 0"},          /* low byte of 128 */
        {e1 + 5, 1, "address length 384"},
        {e1 + 6 + TNT_TRANSPORT_ADDR_MAX, TNT_HOST_MAX, "host of 64 bytes"},
        {e1 + 6 + TNT_TRANSPORT_ADDR_MAX + 2, 0, "NUL in a host name"},
        {e2fam, 5, "listener family 5"},
        {e2fam + 1, 0, "listener port 0"},                 /* 1002 */
    };
    TH_CHECK(enc[e2fam] == 6, "entry 2's listener not where expected");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memcpy(bad, enc, n);
        bad[cases[i].off] = cases[i].v;
        if (i == sizeof(cases) / sizeof(cases[0]) - 1)
            bad[cases[i].off + 1] = 0;
        TH_CHECK(tnt__boot_table_decode(bad, n, P, back, lback) != NULL,
                 "table with %s accepted", cases[i].what);
    }
    tnt_boot_table_hdr_t h, ho;
    tnt__boot_table_hdr_init(&h, P, (uint32_t)n, NULL);
    TH_CHECK(!tnt__boot_table_hdr_parse(&h, sizeof(h), P, &ho) &&
             ho.bytes == n, "good table header refused");
    tnt_boot_table_hdr_t hb = h;
    hb.version++;
    const char *why = tnt__boot_table_hdr_parse(&hb, sizeof(hb), P, &ho);
    TH_CHECK(why && strstr(why, "version"), "other version: %s",
             why ? why : "accepted");
    hb = h;
    hb.magic ^= 1;
    TH_CHECK(tnt__boot_table_hdr_parse(&hb, sizeof(hb), P, &ho) != NULL,
             "bad table magic accepted");
    hb = h;
    hb.label[0] = 'X';
    TH_CHECK(tnt__boot_table_hdr_parse(&hb, sizeof(hb), P, &ho) != NULL,
             "bad table label accepted");
    hb = h;
    hb.bytes = P * TNT_BOOT_WIRE_ENTRY_MAX + 1;
    TH_CHECK(tnt__boot_table_hdr_parse(&hb, sizeof(hb), P, &ho) != NULL,
             "table longer than p entries can be accepted");
    hb.bytes = P * TNT_BOOT_WIRE_ENTRY_MIN - 1;
    TH_CHECK(tnt__boot_table_hdr_parse(&hb, sizeof(hb), P, &ho) != NULL,
             "table shorter than p entries can be accepted");
    TH_CHECK(tnt__boot_table_hdr_parse(&h, sizeof(h), P + 1, &ho) != NULL,
             "table header for another size accepted");
    TH_CHECK(tnt__boot_table_hdr_parse(&h, sizeof(h) - 1, P, &ho) != NULL,
             "short table header accepted");
}

/* ---- TCP handshake and frames ---------------------------------------- */

static const tcp_expect_t k_expect = {99, 1, 3, 2};

static tcp_hello_t good_tcp_hello(void)
{
    tcp_hello_t h;
    memset(&h, 0, sizeof(h));
    h = (tcp_hello_t){TCP_HELLO_MAGIC, TCP_PROTO_VERSION, 99, 1, 1, 3, 1, 2,
                      {0}};
    return h;
}

static void test_tcp_hello(void)
{
    tcp_hello_t h = good_tcp_hello(), out;
    TH_CHECK(!tnt__tcp_hello_parse(&h, sizeof(h), &k_expect, &out),
             "good hello refused");
    TH_CHECK(tnt__tcp_hello_parse(&h, 3, &k_expect, &out) != NULL,
             "short hello accepted");
    for (int f = 0; f < 10; f++) {
        tcp_hello_t b = good_tcp_hello();
        switch (f) {
        case 0: b.magic = 0; break;
        case 1: b.version = 2; break;
        case 2: b.job_id = 98; break;
        case 3: b.comm_id = 2; break;
        case 4: b.to = 2; break;
        case 5: b.from = 3; break;   /* only lower ranks connect */
        case 6: b.from = -1; break;
        case 7: b.count = 3; break;
        case 8: b.index = 2; break;
        case 9: b.from = 4; break;
        }
        TH_CHECK(tnt__tcp_hello_parse(&b, sizeof(b), &k_expect, &out) != NULL,
                 "bad hello (field %d) accepted", f);
    }
}

static void test_tcp_challenge_proof_frame(void)
{
    tcp_challenge_t c = {TCP_CHAL_MAGIC, TCP_PROTO_VERSION, {1}, {2}}, co;
    TH_CHECK(!tnt__tcp_challenge_parse(&c, sizeof(c), &co),
             "good challenge refused");
    c.version++;
    TH_CHECK(tnt__tcp_challenge_parse(&c, sizeof(c), &co) != NULL,
             "challenge of another version accepted");
    tcp_proof_t p = {TCP_PROOF_MAGIC, TCP_PROTO_VERSION, {3}}, po;
    TH_CHECK(!tnt__tcp_proof_parse(&p, sizeof(p), &po), "good proof refused");
    p.magic = TCP_CHAL_MAGIC;
    TH_CHECK(tnt__tcp_proof_parse(&p, sizeof(p), &po) != NULL,
             "a challenge passed as a proof");
    tcp_frame_t f = {TCP_FRAME_MAGIC, 40, 1000}, fo;
    TH_CHECK(!tnt__tcp_frame_parse(&f, sizeof(f), &fo), "good frame refused");
    TH_CHECK(tnt__tcp_frame_parse(&f, sizeof(f) - 1, &fo) != NULL,
             "truncated frame accepted");
    f.hdr_len = 0;
    TH_CHECK(tnt__tcp_frame_parse(&f, sizeof(f), &fo) != NULL,
             "empty header accepted");
    f.hdr_len = TCP_HDR_MAX + 1;
    TH_CHECK(tnt__tcp_frame_parse(&f, sizeof(f), &fo) != NULL,
             "oversized header accepted");
}

/* ---- the message header ---------------------------------------------- */

static tnt_msg_hdr_t good_msg(void)
{
    tnt_msg_hdr_t h;
    memset(&h, 0, sizeof(h));
    h.magic = TNT_MSG_MAGIC;
    h.comm_id = 1;
    h.seq = 5;
    h.kind = TNT_COLL_ALLREDUCE;
    h.dtype = TNT_F32;
    h.op = TNT_SUM;
    h.algo = TNT_ALGO_RING;
    h.count = 100;
    h.root = 0;
    h.nranks = 4;
    return h;
}

static void test_msg_hdr(void)
{
    tnt_msg_hdr_t h = good_msg(), out;
    TH_CHECK(!tnt__msg_hdr_parse(&h, sizeof(h), 400, 1, 4, &out),
             "good header refused");
    TH_CHECK(tnt__msg_hdr_parse(&h, sizeof(h), 400 * 4 + 1, 1, 4, &out) !=
             NULL, "payload beyond the collective accepted");
    TH_CHECK(tnt__msg_hdr_parse(&h, sizeof(h) - 1, 0, 1, 4, &out) != NULL,
             "short header accepted");
    for (int f = 0; f < 12; f++) {
        tnt_msg_hdr_t b = good_msg();
        switch (f) {
        case 0: b.magic++; break;
        case 1: b.comm_id = 2; break;
        case 2: b.nranks = 5; break;
        case 3: b.kind = TNT_COLL_KIND_END; break;
        case 4: b.kind = 0; break;
        case 5: b.dtype = TNT_DTYPE_COUNT; break;
        case 6: b.op = TNT_OP_COUNT; break;
        case 7: b.algo = TNT_ALGO_END; break;
        case 8: b.root = 4; break;
        case 9: b.root = -1; break;
        case 10: b.count = UINT64_MAX / 2; break;
        case 11: b.dtype = 255; break;
        }
        TH_CHECK(tnt__msg_hdr_parse(&b, sizeof(b), 0, 1, 4, &out) != NULL,
                 "bad header (field %d) accepted", f);
    }
    /* Flow control: RTS and CTS carry no payload, and never both flags. */
    h.step = 3 | TNT_STEP_RTS;
    TH_CHECK(!tnt__msg_hdr_parse(&h, sizeof(h), 0, 1, 4, &out),
             "RTS refused");
    TH_CHECK(tnt__msg_hdr_parse(&h, sizeof(h), 1, 1, 4, &out) != NULL,
             "RTS with a payload accepted");
    h.step = 3 | TNT_STEP_CTS;
    TH_CHECK(!tnt__msg_hdr_parse(&h, sizeof(h), 0, 1, 4, &out),
             "CTS refused");
    TH_CHECK(tnt__msg_hdr_parse(&h, sizeof(h), 400, 1, 4, &out) != NULL,
             "CTS with a payload accepted");
    /* A CTS's count: the steps it clears, at least one, none past the
     * last step a header can name. */
    h.count = 1;
    TH_CHECK(!tnt__msg_hdr_parse(&h, sizeof(h), 0, 1, 4, &out),
             "CTS of one step refused");
    h.count = TNT_STEP_CTS - 3;
    TH_CHECK(!tnt__msg_hdr_parse(&h, sizeof(h), 0, 1, 4, &out),
             "CTS up to the last step refused");
    h.count++;
    TH_CHECK(tnt__msg_hdr_parse(&h, sizeof(h), 0, 1, 4, &out) != NULL,
             "CTS past the last step accepted");
    h.count = 0;
    TH_CHECK(tnt__msg_hdr_parse(&h, sizeof(h), 0, 1, 4, &out) != NULL,
             "CTS of no step accepted");
    h.count = 100;
    h.step = 3 | TNT_STEP_CTL;
    TH_CHECK(tnt__msg_hdr_parse(&h, sizeof(h), 0, 1, 4, &out) != NULL,
             "both flow-control flags accepted");
}

/* ---- the MACs ---------------------------------------------------------- */

static void test_auth(void)
{
    TH_CHECK(tnt__auth_init() == TNT_SUCCESS, "libsodium init");
    tnt_auth_key_t k1, k2, kd, kn;
    tnt__auth_key_derive("secret-1", &k1);
    tnt__auth_key_derive("secret-2", &k2);
    tnt__auth_key_derive(NULL, &kd);
    tnt__auth_key_derive("", &kn);
    TH_CHECK(memcmp(&kd, &kn, sizeof(kd)) == 0 &&
             memcmp(&k1, &kd, sizeof(kd)) != 0, "key derivation");
    /* One handshake: the right key verifies, the wrong key, another
     * acceptor nonce (a replay) and the other direction do not. */
    tcp_hello_t h = good_tcp_hello();
    unsigned char n1[TCP_NONCE_BYTES], n2[TCP_NONCE_BYTES];
    tnt__auth_random(n1, sizeof(n1));
    tnt__auth_random(n2, sizeof(n2));
    TH_CHECK(memcmp(n1, n2, sizeof(n1)) != 0, "two nonces alike");
    unsigned char in[TCP_AUTH_INPUT_MAX], mac[TNT_AUTH_MAC_BYTES];
    size_t n = tnt__tcp_auth_input(1, &h, n1, in);
    tnt__auth_mac(&k1, in, n, mac);
    TH_CHECK(tnt__auth_verify(&k1, in, n, mac), "right key refused");
    TH_CHECK(!tnt__auth_verify(&k2, in, n, mac), "wrong key accepted");
    n = tnt__tcp_auth_input(1, &h, n2, in);
    TH_CHECK(!tnt__auth_verify(&k1, in, n, mac), "replay accepted");
    n = tnt__tcp_auth_input(0, &h, n1, in);
    TH_CHECK(!tnt__auth_verify(&k1, in, n, mac), "reflection accepted");
    /* The bootstrap's registration MAC covers its content. */
    tnt_boot_hello_t bh = good_boot_hello();
    tnt_boot_register_t reg = good_register(1);
    unsigned char bin[TNT_BOOT_AUTH_MAX];
    tnt_boot_challenge_t bc;
    memset(&bc, 0, sizeof(bc));
    memcpy(bc.nonce, n1, sizeof(bc.nonce));
    n = tnt__boot_auth_input(1, &bh, &bc, &reg, bin);
    tnt__auth_mac(&k1, bin, n, reg.mac);
    TH_CHECK(tnt__auth_verify(&k1, bin, n, reg.mac), "registration MAC");
    reg.rank = 2;
    n = tnt__boot_auth_input(1, &bh, &bc, &reg, bin);
    TH_CHECK(!tnt__auth_verify(&k1, bin, n, reg.mac),
             "altered registration accepted");
    /* The challenge's MAC covers its table nonce (the table's MAC does
     * too: a rank accepts only tables of the nonce rank 0 proved). */
    n = tnt__boot_auth_input(0, &bh, &bc, NULL, bin);
    tnt__auth_mac(&k1, bin, n, bc.mac);
    bc.table_nonce[3] ^= 1;
    n = tnt__boot_auth_input(0, &bh, &bc, NULL, bin);
    TH_CHECK(!tnt__auth_verify(&k1, bin, n, bc.mac),
             "challenge with another table nonce accepted");
}

/* The shared-memory handshake: each parser with a good message and one
 * bad field at a time; its MACs refuse a wrong key, a replay (another
 * challenge) and the reflected direction; the transcript helper refuses
 * what does not fit. */
static void test_shm_handshake(void)
{
    shm_expect_t e = {99, 1, 2, 4};
    shm_hello_t h, out;
    memset(&h, 0, sizeof(h));
    h = (shm_hello_t){SHM_MAGIC, SHM_VERSION, 99, 1, 0, 2,
                      (uint32_t)SHM_RING_BYTES, 0, {0}};
    TH_CHECK(!tnt__shm_hello_parse(&h, sizeof(h), &e, &out),
             "good shm hello refused");
    TH_CHECK(tnt__shm_hello_parse(&h, sizeof(h) - 1, &e, &out) != NULL,
             "short shm hello accepted");
    for (int f = 0; f < 8; f++) {
        shm_hello_t b = h;
        switch (f) {
        case 0: b.magic = 0; break;
        case 1: b.version = 1; break;
        case 2: b.job_id = 98; break;
        case 3: b.comm_id = 2; break;
        case 4: b.to = 1; break;
        case 5: b.from = 2; break;  /* only lower ranks connect */
        case 6: b.from = -1; break;
        case 7: b.ring_bytes = 4096; break;
        }
        TH_CHECK(tnt__shm_hello_parse(&b, sizeof(b), &e, &out) != NULL,
                 "bad shm hello (field %d) accepted", f);
    }
    shm_challenge_t c, cout;
    memset(&c, 0, sizeof(c));
    c.magic = SHM_CHAL_MAGIC;
    c.version = SHM_VERSION;
    c.from = 3;
    c.to = 2;
    TH_CHECK(!tnt__shm_challenge_parse(&c, sizeof(c), &e, 3, &cout),
             "good shm challenge refused");
    TH_CHECK(tnt__shm_challenge_parse(&c, sizeof(c), &e, 1, &cout) &&
             tnt__shm_challenge_parse(&c, 8, &e, 3, &cout),
             "shm challenge from the wrong rank or short accepted");
    shm_proof_t p = {SHM_PROOF_MAGIC, SHM_VERSION, {0}}, pout;
    TH_CHECK(!tnt__shm_proof_parse(&p, sizeof(p), &pout),
             "good shm proof refused");
    p.version = 1;
    TH_CHECK(tnt__shm_proof_parse(&p, sizeof(p), &pout) != NULL,
             "shm proof of another version accepted");

    TH_CHECK(tnt__auth_init() == TNT_SUCCESS, "libsodium init");
    tnt_auth_key_t k1, k2;
    tnt__auth_key_derive("secret-1", &k1);
    tnt__auth_key_derive("secret-2", &k2);
    shm_challenge_t c2 = c;
    tnt__auth_random(c.nonce, sizeof(c.nonce));
    tnt__auth_random(c2.nonce, sizeof(c2.nonce));
    unsigned char in[SHM_AUTH_INPUT_MAX], mac[TNT_AUTH_MAC_BYTES];
    size_t n = tnt__shm_auth_input(1, &h, &c, in);
    TH_CHECK(n == SHM_AUTH_INPUT_MAX, "shm transcript of %zu bytes", n);
    tnt__auth_mac(&k1, in, n, mac);
    TH_CHECK(tnt__auth_verify(&k1, in, n, mac), "right key refused");
    TH_CHECK(!tnt__auth_verify(&k2, in, n, mac), "wrong key accepted");
    n = tnt__shm_auth_input(1, &h, &c2, in);
    TH_CHECK(!tnt__auth_verify(&k1, in, n, mac), "shm replay accepted");
    n = tnt__shm_auth_input(0, &h, &c, in);
    TH_CHECK(!tnt__auth_verify(&k1, in, n, mac), "shm reflection accepted");
    unsigned char small[20];
    TH_CHECK(tnt__auth_transcript("x", &h, sizeof(h), "", 0, small,
                                  sizeof(small)) == 0,
             "a transcript larger than its buffer was written");
    int none[1] = {-1};
    TH_CHECK(tnt__shm_fds_check(none, 0, 4096) != NULL &&
             tnt__shm_fds_check(none, 1, 4096) != NULL,
             "shm proof descriptors: too few accepted");
}

/* The fan-out tree: every rank but 0 is the child of exactly one rank,
 * r minus its lowest set bit; children come largest subtree first; with
 * each rank sending to its children one after the other, in that order,
 * the last rank has the table after ceil(log2 p) rounds. */
static void test_boot_tree(void)
{
    for (int p = 1; p <= 130; p++) {
        int parent_of[130], round[130], last = 0, kids[32];
        for (int r = 0; r < p; r++)
            parent_of[r] = -1;
        round[0] = 0;
        for (int r = 0; r < p; r++) {
            int n = tnt__boot_tree_children(r, p, kids);
            for (int k = 0; k < n; k++) {
                int c = kids[k];
                TH_CHECK(c > r && c < p && parent_of[c] == -1 &&
                         (k == 0 || kids[k - 1] > c),
                         "p=%d: rank %d's child %d", p, r, c);
                if (c > r && c < p) {
                    parent_of[c] = r;
                    round[c] = round[r] + k + 1;
                    if (round[c] > last)
                        last = round[c];
                }
            }
        }
        int rounds = 0;
        while ((1 << rounds) < p)
            rounds++;
        for (int r = 1; r < p; r++)
            TH_CHECK(parent_of[r] == r - (r & -r), "p=%d: rank %d's parent "
                     "%d", p, r, parent_of[r]);
        TH_CHECK(last == rounds, "p=%d: the last rank has the table in "
                 "round %d, expected %d", p, last, rounds);
    }
}

/* A rank's acknowledgement: its own rank, a status of 0 or an error
 * about a rank of the job. */
static void test_boot_ack(void)
{
    tnt_boot_ack_t k, out;
    memset(&k, 0, sizeof(k));
    k.magic = TNT_BOOT_MAGIC;
    k.version = TNT_BOOT_VERSION;
    k.rank = 3;
    memset(k.msg, 'm', sizeof(k.msg));
    TH_CHECK(!tnt__boot_ack_parse(&k, sizeof(k), 3, 8, &out) &&
             strlen(out.msg) == sizeof(out.msg) - 1, "good ack refused");
    TH_CHECK(tnt__boot_ack_parse(&k, sizeof(k), 4, 8, &out) != NULL,
             "ack of another rank accepted");
    TH_CHECK(tnt__boot_ack_parse(&k, sizeof(k) - 1, 3, 8, &out) != NULL,
             "short ack accepted");
    tnt_boot_ack_t b = k;
    b.version++;
    TH_CHECK(tnt__boot_ack_parse(&b, sizeof(b), 3, 8, &out) != NULL,
             "ack of another version accepted");
    b = k;
    b.status = 1;
    TH_CHECK(tnt__boot_ack_parse(&b, sizeof(b), 3, 8, &out) != NULL,
             "positive ack status accepted");
    b.status = TNT_ERR_CONNECT;
    b.about = 7;
    TH_CHECK(!tnt__boot_ack_parse(&b, sizeof(b), 3, 8, &out),
             "failure about rank 7 refused");
    b.about = 8;
    TH_CHECK(tnt__boot_ack_parse(&b, sizeof(b), 3, 8, &out) != NULL,
             "failure about rank 8 of 8 accepted");
    b.about = 0;
    TH_CHECK(tnt__boot_ack_parse(&b, sizeof(b), 3, 8, &out) != NULL,
             "failure about rank 0 accepted");
}

/* A table on a rank's listener counts only with the job key's MAC over
 * this job's table nonce; the MAC covers every byte after it. */
static void test_boot_table_accept(void)
{
    TH_CHECK(tnt__auth_init() == TNT_SUCCESS, "libsodium init");
    tnt_auth_key_t key, other;
    tnt__auth_key_derive("table-key", &key);
    tnt__auth_key_derive("other-key", &other);
    tnt_boot_args_t a;
    memset(&a, 0, sizeof(a));
    a.nranks = 3;
    a.key = &key;
    tnt_boot_entry_t t[3], back[3];
    memset(t, 0, sizeof(t));
    for (int i = 0; i < 3; i++) {
        t[i].rank = i;
        t[i].addr_len = 8;
        snprintf(t[i].host, sizeof(t[i].host), "n%d", i);
    }
    unsigned char nonce[TNT_AUTH_NONCE_BYTES];
    memset(nonce, 0x42, sizeof(nonce));
    tnt_boot_table_hdr_t h;
    tnt__boot_table_hdr_init(&h, 3, 0, nonce);
    unsigned char m[sizeof(h) + 3 * TNT_BOOT_WIRE_ENTRY_MAX];
    h.bytes = (uint32_t)tnt__boot_table_encode(t, NULL, 3, m + sizeof(h));
    memcpy(m, &h, sizeof(h));
    size_t len = sizeof(h) + h.bytes;
    tnt__auth_mac(&key, m + TNT_AUTH_MAC_BYTES, len - TNT_AUTH_MAC_BYTES, m);
    TH_CHECK(!tnt__boot_table_accept(&a, nonce, m, len, back, NULL) &&
             strcmp(back[2].host, "n2") == 0, "good table refused");
    TH_CHECK(tnt__boot_table_accept(&a, nonce, m, len - 1, back, NULL),
             "short table accepted");
    unsigned char bad[sizeof(m)];
    for (size_t i = TNT_AUTH_MAC_BYTES; i < len; i++) {
        memcpy(bad, m, len);
        bad[i] ^= 0x10;
        TH_CHECK(tnt__boot_table_accept(&a, nonce, bad, len, back, NULL),
                 "table with byte %zu altered accepted", i);
    }
    unsigned char other_nonce[TNT_AUTH_NONCE_BYTES];
    memset(other_nonce, 0x43, sizeof(other_nonce));
    const char *why = tnt__boot_table_accept(&a, other_nonce, m, len, back,
                                             NULL);
    TH_CHECK(why && strstr(why, "nonce"), "table of another nonce: %s",
             why ? why : "accepted");
    a.key = &other;
    why = tnt__boot_table_accept(&a, nonce, m, len, back, NULL);
    TH_CHECK(why && strstr(why, "authentication"), "table with another "
             "key: %s", why ? why : "accepted");
}

static const th_test_def_t k_tests[] = {
    {"boot", "hello", test_boot_hello},
    {"boot", "register", test_boot_register},
    {"boot", "reply", test_boot_reply},
    {"boot", "table", test_boot_table},
    {"boot", "tree", test_boot_tree},
    {"boot", "ack", test_boot_ack},
    {"boot", "table_accept", test_boot_table_accept},
    {"tcp", "hello", test_tcp_hello},
    {"tcp", "challenge_proof_frame", test_tcp_challenge_proof_frame},
    {"core", "msg_hdr", test_msg_hdr},
    {"auth", "mac", test_auth},
    {"shm", "handshake", test_shm_handshake},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
