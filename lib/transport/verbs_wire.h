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
 * - the handshake record exchanged over the side-channel socket: job,
 *   communicator, ranks and the queue pair's address (QPN, PSN, LID,
 *   GID, MTU, ring depth).
 *
 * Everything is little-endian, fixed layout, encoded field by field (no
 * struct copies, so padding and host byte order never leak). Every decode
 * validates every field against the received length and the protocol's
 * limits and says what was wrong: wire input is untrusted.
 */
#ifndef TNT_TRANSPORT_VERBS_WIRE_H
#define TNT_TRANSPORT_VERBS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define VB_MSG_MAGIC 0x5642u /* "BV" */
#define VB_HELLO_MAGIC 0x48425654u /* "TVBH" */
#define VB_PROTO_VERSION 1u
/* Largest core header the transport carries (the core's is 64 bytes). */
#define VB_CORE_HDR_MAX 256u
/* Bytes of the fixed message header. */
#define VB_MSG_HDR_LEN 32u
#define VB_HELLO_LEN 64u

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
} vb_hello_t;

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

#endif /* TNT_TRANSPORT_VERBS_WIRE_H */
