/*
 * What the verbs transport puts on the wire, and the checks on what comes
 * off it. Three formats:
 *
 * - the message header at the start of every SEND (a bounce buffer):
 *   kind, credits returned, and per kind the core's header and payload
 *   (EAGER), the size and sender token of a large message (RTS), the
 *   remote buffer a large message may be written to (CTS);
 * - the 32-bit immediate of the RDMA WRITE that ends a large message:
 *   kind, credits returned and the receiver's token;
 * - the records exchanged over the side-channel socket, each
 *   VB_REC_LEN bytes: the hello (job, communicator, ranks, the queue
 *   pair's address: QPN, PSN, LID, GID, MTU, ring depth, and a fresh
 *   nonce), and the challenge and proof that prove the job key.
 *
 * The side channel (connector = the lower rank of the pair):
 *   connector -> acceptor  hello      its queue pair's address, nonce C
 *   acceptor -> connector  challenge  nonce A, MAC A
 *   connector -> acceptor  proof      MAC C
 *   acceptor -> connector  hello      (reply) its queue pair's address
 *   connector -> acceptor  'R'        both queue pairs are in RTS
 * MAC A = HMAC(key, "TNT-vb-accept" + hello + nonce A) and
 * MAC C = HMAC(key, "TNT-vb-connect" + hello + nonce A), as in the TCP
 * transport: each covers both fresh nonces, both ranks and the direction.
 * The acceptor creates no queue pair and gives the connection no rank
 * before the proof checks out, so a stranger can neither take a rank's
 * place nor make it allocate device resources.
 *
 * Everything is little-endian, fixed layout, encoded field by field (no
 * struct copies, so padding and host byte order never leak). Every decode
 * validates every field against the received length and the protocol's
 * limits and says what was wrong: wire input is untrusted.
 */
#ifndef TNT_TRANSPORT_VERBS_VERBS_WIRE_H
#define TNT_TRANSPORT_VERBS_VERBS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define VB_MSG_MAGIC 0x5642u /* "BV" */
#define VB_HELLO_MAGIC 0x48425654u /* "TVBH" */
#define VB_AUTH_MAGIC 0x41425654u  /* "TVBA" */
#define VB_PROTO_VERSION 2u
/* Largest core header the transport carries (the core's is 64 bytes). */
#define VB_CORE_HDR_MAX 256u
/* Bytes of the fixed message header. */
#define VB_MSG_HDR_LEN 32u
/* Every side-channel record (hello, challenge, proof) has this size. */
#define VB_REC_LEN 80u
#define VB_HELLO_LEN VB_REC_LEN
#define VB_NONCE_BYTES 16u
#define VB_MAC_BYTES 32u

enum vb_kind {
    VB_K_EAGER = 1,  /* core header + whole payload in this message */
    VB_K_RTS = 2,    /* core header; payload follows by RDMA WRITE */
    VB_K_CTS = 3,    /* where to write the payload of an RTS */
    VB_K_CREDIT = 4, /* credits only (uses a control buffer) */
    VB_K_FIN = 5     /* immediate only: the large payload has landed */
};

/* Immediate data of the RDMA WRITE that ends a large message. */
#define VB_IMM_DATA_RET_MAX 255u
#define VB_IMM_CTRL_RET_MAX 3u
#define VB_IMM_TOKEN_MAX ((1u << 18) - 1)
/* Wire field widths of the message header's returns. */
#define VB_HDR_DATA_RET_MAX 65535u
#define VB_HDR_CTRL_RET_MAX 255u

typedef struct vb_msg {
    uint8_t kind;
    uint8_t ctrl_ret;
    uint16_t data_ret;
    uint32_t core_hdr_len; /* EAGER, RTS */
    uint64_t len;          /* EAGER: payload bytes here; RTS: total */
    uint32_t token;        /* RTS: sender's; CTS: sender's (echoed) */
    uint32_t rtoken;       /* CTS: receiver's, for the FIN immediate */
    uint64_t raddr;        /* CTS: where to write */
    uint32_t rkey;         /* CTS */
} vb_msg_t;

typedef struct vb_imm {
    uint8_t kind;          /* VB_K_FIN */
    uint8_t data_ret;
    uint8_t ctrl_ret;
    uint32_t token;
} vb_imm_t;

typedef struct vb_hello {
    uint32_t version;
    uint64_t job_id;
    uint32_t comm_id;
    int32_t from, to;
    uint32_t qpn;          /* 24 bits */
    uint32_t psn;          /* 24 bits */
    uint16_t lid;
    uint8_t gid[16];
    uint8_t mtu;           /* enum ibv_mtu, 1..5 */
    uint8_t is_reply;
    uint16_t depth;        /* receive ring depth of the sender */
    uint16_t bounce_kib;   /* its bounce buffer size, KiB (4..1024) */
    uint8_t nonce[VB_NONCE_BYTES]; /* connector's hello: fresh; reply: 0 */
} vb_hello_t;

enum vb_auth_kind { VB_AUTH_CHALLENGE = 1, VB_AUTH_PROOF = 2 };

/* The challenge (nonce and MAC) or the proof (MAC only; nonce zero). */
typedef struct vb_auth {
    uint32_t kind;
    uint8_t nonce[VB_NONCE_BYTES];
    uint8_t mac[VB_MAC_BYTES];
} vb_auth_t;

/* Room for a MAC's input: label, hello, nonce A. */
#define VB_AUTH_INPUT_MAX (16u + VB_HELLO_LEN + VB_NONCE_BYTES)

/** Encode m (header part) into buf of at least VB_MSG_HDR_LEN bytes. */
void tnt__vb_msg_encode(const vb_msg_t *m, void *buf);
/** Decode and validate a received SEND of `len` bytes. The core header
 *  (and for EAGER the payload) follow the fixed header. NULL on success,
 *  else why the message is malformed. */
const char *tnt__vb_msg_decode(const void *buf, size_t len, vb_msg_t *m);

uint32_t tnt__vb_imm_encode(const vb_imm_t *imm);
/** NULL on success, else what is wrong. */
const char *tnt__vb_imm_decode(uint32_t raw, vb_imm_t *imm);

void tnt__vb_hello_encode(const vb_hello_t *h, void *buf);
/** Decode and check the fields that need no context (magic, version,
 *  ranges); the caller checks job, communicator and ranks. */
const char *tnt__vb_hello_decode(const void *buf, size_t len, vb_hello_t *h);

void tnt__vb_auth_encode(const vb_auth_t *a, void *buf);
/** Decode a challenge or proof of the expected kind; its MAC is the
 *  caller's to verify. NULL on success, else what is wrong. */
const char *tnt__vb_auth_decode(const void *buf, size_t len, uint32_t kind,
                                vb_auth_t *a);
/** The input of MAC C (connector = 1) or MAC A (0) over the connector's
 *  encoded hello and the acceptor's nonce; returns its length. */
size_t tnt__vb_auth_input(int connector, const void *hello_rec,
                          const uint8_t nonce_a[VB_NONCE_BYTES],
                          unsigned char out[VB_AUTH_INPUT_MAX]);

#endif /* TNT_TRANSPORT_VERBS_VERBS_WIRE_H */
