/*
 * Writes the seed corpus of the fuzz harnesses (tests/fuzz/corpus/): one
 * well-formed instance of every message, in each harness's input format,
 * built from the real structs so that the seeds follow the wire layout.
 * Usage: gen_corpus DIR (run by run.sh; the output is committed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/boot_wire.h"
#include "core/msg_hdr.h"
#include "transport/tcp_wire.h"

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

    /* Bootstrap: byte 0 = kind, byte 1 = nranks - 1. */
    tnt_boot_hello_t bh = {TNT_BOOT_MAGIC, TNT_BOOT_VERSION, 42, {7}};
    put("bootstrap", "hello", 0, 1, 3, &bh, sizeof(bh));
    tnt_boot_challenge_t bc = {TNT_BOOT_MAGIC, TNT_BOOT_VERSION, {8}, {9}};
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
    tnt_boot_entry_t t[2];
    memset(t, 0, sizeof(t));
    for (int i = 0; i < 2; i++) {
        t[i].rank = i;
        t[i].addr_len = 16;
        snprintf(t[i].host, sizeof(t[i].host), "node%d", i);
    }
    put("bootstrap", "table", 4, 1, 1, t, sizeof(t));
    return 0;
}
