/*
 * Writes the seed corpus of the fuzz harnesses (tests/fuzz/corpus/): one
 * well-formed instance of every message, in each harness's input format,
 * built from the real structs so that the seeds follow the wire layout.
 * Usage: gen_corpus DIR (run by run.sh; the output is committed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot/boot_wire.h"
#include "core/msg_hdr.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/verbs/verbs_wire.h"

static const char *g_dir;

static void put(const char *sub, const char *name, unsigned char prefix0,
                int has_prefix1, unsigned char prefix1, const void *msg,
                size_t len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s/%s", g_dir, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputc(prefix0, f);
    if (has_prefix1)
        fputc(prefix1, f);
    fwrite(msg, 1, len, f);
    fclose(f);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_corpus DIR\n");
        return 2;
    }
    g_dir = argv[1];

    /* Handshake: byte 0 = kind | rank << 2 | (nsock - 1) << 5. */
    tcp_hello_t h = {TCP_HELLO_MAGIC, TCP_PROTO_VERSION,
                     0x1122334455667788ull, 1, 0, 2, 0, 1, {1, 2, 3}};
    put("handshake", "hello", 0 | 2 << 2, 0, 0, &h, sizeof(h));
    tcp_challenge_t c = {TCP_CHAL_MAGIC, TCP_PROTO_VERSION, {4}, {5}};
    put("handshake", "challenge", 1, 0, 0, &c, sizeof(c));
    tcp_proof_t p = {TCP_PROOF_MAGIC, TCP_PROTO_VERSION, {6}};
    put("handshake", "proof", 2, 0, 0, &p, sizeof(p));
    tcp_frame_t fr = {TCP_FRAME_MAGIC, sizeof(tnt_msg_hdr_t), 4096};
    put("handshake", "frame", 3, 0, 0, &fr, sizeof(fr));

    /* Message header: byte 0 = nranks - 1, 8 bytes payload length. */
    tnt_msg_hdr_t m;
    memset(&m, 0, sizeof(m));
    m.magic = TNT_MSG_MAGIC;
    m.comm_id = 1;
    m.seq = 3;
    m.step = 1;
    m.kind = TNT_COLL_ALLREDUCE;
    m.dtype = TNT_F32;
    m.op = TNT_SUM;
    m.algo = TNT_ALGO_RING;
    m.count = 1000;
    m.nranks = 4;
    unsigned char buf[9 + sizeof(m)];
    uint64_t payload = 1000;
    memcpy(buf, &payload, 8);
    memcpy(buf + 8, &m, sizeof(m));
    put("msg_hdr", "allreduce", 3, 0, 0, buf, 8 + sizeof(m));
    m.kind = TNT_COLL_KIND_END - 1;
    m.dtype = TNT_DTYPE_COUNT - 1;
    m.root = 2;
    memcpy(buf + 8, &m, sizeof(m));
    put("msg_hdr", "last_kind", 3, 0, 0, buf, 8 + sizeof(m));
    /* Flow control: an RTS and a CTS are headers with no payload. */
    payload = 0;
    memcpy(buf, &payload, 8);
    m.step = 1 | TNT_STEP_RTS;
    memcpy(buf + 8, &m, sizeof(m));
    put("msg_hdr", "rts", 3, 0, 0, buf, 8 + sizeof(m));
    m.step = 1 | TNT_STEP_CTS;
    memcpy(buf + 8, &m, sizeof(m));
    put("msg_hdr", "cts", 3, 0, 0, buf, 8 + sizeof(m));

    /* Verbs: byte 0 = decoder (0 message, 1 immediate, 2 hello,
     * 3 challenge, 4 proof). */
    unsigned char vb[VB_MSG_HDR_LEN + sizeof(m) + 16];
    vb_msg_t vm = {.kind = VB_K_EAGER, .ctrl_ret = 1, .data_ret = 2,
                   .core_hdr_len = sizeof(m), .len = 16};
    tnt__vb_msg_encode(&vm, vb);
    memcpy(vb + VB_MSG_HDR_LEN, &m, sizeof(m));
    memset(vb + VB_MSG_HDR_LEN + sizeof(m), 7, 16);
    put("verbs", "eager", 0, 0, 0, vb, sizeof(vb));
    vb_msg_t cts = {.kind = VB_K_CTS, .rtoken = 5, .token = 6,
                    .raddr = 0x10000, .rkey = 9};
    tnt__vb_msg_encode(&cts, vb);
    put("verbs", "cts", 0, 0, 0, vb, VB_MSG_HDR_LEN);
    vb_imm_t imm = {.kind = VB_K_FIN, .data_ret = 3, .ctrl_ret = 1,
                    .token = 77};
    uint32_t raw = tnt__vb_imm_encode(&imm);
    put("verbs", "imm", 1, 0, 0, &raw, sizeof(raw));
    vb_hello_t vh = {.version = VB_PROTO_VERSION, .job_id = 7, .comm_id = 1,
                     .from = 0, .to = 1, .qpn = 0x100, .psn = 5, .lid = 1,
                     .mtu = 3, .depth = 64, .bounce_kib = 8,
                     .nonce = {1, 2, 3}};
    unsigned char rec[VB_REC_LEN];
    tnt__vb_hello_encode(&vh, rec);
    put("verbs", "hello", 2, 0, 0, rec, sizeof(rec));
    vb_auth_t va = {.kind = VB_AUTH_CHALLENGE, .nonce = {4}, .mac = {5}};
    tnt__vb_auth_encode(&va, rec);
    put("verbs", "challenge", 3, 0, 0, rec, sizeof(rec));
    vb_auth_t vp = {.kind = VB_AUTH_PROOF, .mac = {6}};
    tnt__vb_auth_encode(&vp, rec);
    put("verbs", "proof", 4, 0, 0, rec, sizeof(rec));

    /* Bootstrap: byte 0 = kind, byte 1 = nranks - 1. */
    tnt_boot_hello_t bh = {TNT_BOOT_MAGIC, TNT_BOOT_VERSION, 42, {7}, 3, 1};
    put("bootstrap", "hello", 0, 1, 3, &bh, sizeof(bh));
    tnt_boot_challenge_t bc = {TNT_BOOT_MAGIC, TNT_BOOT_VERSION, {8}, {10},
                               {9}};
    put("bootstrap", "challenge", 1, 1, 3, &bc, sizeof(bc));
    tnt_boot_register_t r;
    memset(&r, 0, sizeof(r));
    r.magic = TNT_BOOT_MAGIC;
    r.version = TNT_BOOT_VERSION;
    r.nranks = 4;
    r.rank = 2;
    r.entry.rank = 2;
    r.entry.addr_len = 16;
    snprintf(r.entry.host, sizeof(r.entry.host), "node2");
    put("bootstrap", "register", 2, 1, 3, &r, sizeof(r));
    tnt_boot_reply_t rp;
    memset(&rp, 0, sizeof(rp));
    rp.magic = TNT_BOOT_MAGIC;
    rp.nranks = 4;
    snprintf(rp.msg, sizeof(rp.msg), "ok");
    put("bootstrap", "reply", 3, 1, 3, &rp, sizeof(rp));
    rp.status = TNT_BOOT_WAITING;
    snprintf(rp.msg, sizeof(rp.msg), "3 of 4 ranks registered; waiting");
    put("bootstrap", "reply_waiting", 3, 1, 3, &rp, sizeof(rp));
    tnt_boot_entry_t t[2];
    memset(t, 0, sizeof(t));
    for (int i = 0; i < 2; i++) {
        t[i].rank = i;
        t[i].addr_len = 16;
        snprintf(t[i].host, sizeof(t[i].host), "node%d", i);
    }
    /* Rank 1 with an IPv4 tree listener. */
    tnt_boot_listener_t l[2];
    memset(l, 0, sizeof(l));
    l[1].family = 4;
    l[1].port = 4242;
    l[1].ip[0] = 127;
    l[1].ip[3] = 1;
    unsigned char enc[2 * TNT_BOOT_WIRE_ENTRY_MAX];
    size_t elen = tnt__boot_table_encode(t, l, 2, enc);
    tnt_boot_table_hdr_t th;
    tnt__boot_table_hdr_init(&th, 2, (uint32_t)elen, NULL);
    put("bootstrap", "table_hdr", 4, 1, 1, &th, sizeof(th));
    put("bootstrap", "table", 5, 1, 1, enc, elen);
    tnt_boot_ack_t ack;
    memset(&ack, 0, sizeof(ack));
    ack.magic = TNT_BOOT_MAGIC;
    ack.version = TNT_BOOT_VERSION;
    ack.rank = 1;
    put("bootstrap", "ack", 6, 1, 3, &ack, sizeof(ack));
    ack.status = TNT_ERR_CONNECT;
    ack.about = 3;
    snprintf(ack.msg, sizeof(ack.msg), "connect: Connection refused");
    put("bootstrap", "ack_failed", 6, 1, 3, &ack, sizeof(ack));
    return 0;
}
