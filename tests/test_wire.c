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

static void test_boot_reply_table(void)
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
    tnt_boot_entry_t t[3];
    memset(t, 0, sizeof(t));
    for (int i = 0; i < 3; i++) {
        t[i].rank = i;
        t[i].addr_len = 8;
    }
    TH_CHECK(!tnt__boot_table_check(t, 3), "good table refused");
    t[1].rank = 2;
    TH_CHECK(tnt__boot_table_check(t, 3) != NULL, "wrong rank accepted");
    t[1].rank = 1;
    t[2].addr_len = TNT_TRANSPORT_ADDR_MAX + 1;
    TH_CHECK(tnt__boot_table_check(t, 3) != NULL, "long address accepted");
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
    n = tnt__boot_auth_input(1, &bh, n1, &reg, bin);
    tnt__auth_mac(&k1, bin, n, reg.mac);
    TH_CHECK(tnt__auth_verify(&k1, bin, n, reg.mac), "registration MAC");
    reg.rank = 2;
    n = tnt__boot_auth_input(1, &bh, n1, &reg, bin);
    TH_CHECK(!tnt__auth_verify(&k1, bin, n, reg.mac),
             "altered registration accepted");
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

static const th_test_def_t k_tests[] = {
    {"boot", "hello", test_boot_hello},
    {"boot", "register", test_boot_register},
    {"boot", "reply_table", test_boot_reply_table},
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
