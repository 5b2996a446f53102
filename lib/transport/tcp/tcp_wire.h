/*
 * The TCP transport's wire messages and their parsers: the connection
 * handshake and the frame in front of every message. Whatever arrives on
 * a socket may come from a stranger, so each parser is a pure function of
 * the bytes (no I/O, no state) that checks every field before anything
 * uses it; unit tests and the libFuzzer harnesses call them directly.
 *
 * The handshake (connector = the lower rank of a pair):
 *   connector -> acceptor  hello      {magic, version, job, comm, from, to,
 *                                      socket index, count, nonce C}
 *   acceptor -> connector  challenge  {magic, version, nonce A, MAC A}
 *   connector -> acceptor  proof      {magic, version, MAC C}
 * MAC A = HMAC(key, "TNT-tcp-accept" + hello + nonce A) and
 * MAC C = HMAC(key, "TNT-tcp-connect" + hello + nonce A): each side's
 * proof covers both fresh nonces, both ranks and the direction, so a
 * recorded handshake replays to nothing and no proof can be reflected.
 * Frames follow the proof on the same socket.
 */
#ifndef TNT_TRANSPORT_TCP_TCP_WIRE_H
#define TNT_TRANSPORT_TCP_TCP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "tnt/transport.h"

#define TCP_FRAME_MAGIC 0x46544e54u /* "TNTF" */
#define TCP_HELLO_MAGIC 0x48544e54u /* "TNTH" */
#define TCP_CHAL_MAGIC 0x43544e54u  /* "TNTC" */
#define TCP_PROOF_MAGIC 0x50544e54u /* "TNTP" */
/* A hello that asks only "are you there?" (tcp_probe.c): the acceptor
 * answers with its challenge, proving the key, and the prober closes. */
#define TCP_PROBE_MAGIC 0x51544e54u /* "TNTQ" */
#define TCP_PROTO_VERSION 3u
#define TCP_NONCE_BYTES 16
#define TCP_HDR_MAX 256
#define TCP_MAX_SOCKETS 16

typedef struct tcp_frame {
    uint32_t magic;
    uint32_t hdr_len;
    uint64_t payload_len;
} tcp_frame_t;

typedef struct tcp_hello {
    uint32_t magic;
    uint32_t version;
    uint64_t job_id;
    uint32_t comm_id;
    int32_t from;
    int32_t to;
    uint16_t index; /* which of the pair's sockets this is */
    uint16_t count; /* sockets per pair on the connecting side */
    unsigned char nonce[TCP_NONCE_BYTES];
} tcp_hello_t;

typedef struct tcp_challenge {
    uint32_t magic;
    uint32_t version;
    unsigned char nonce[TCP_NONCE_BYTES];
    unsigned char mac[TNT_AUTH_MAC_BYTES];
} tcp_challenge_t;

typedef struct tcp_proof {
    uint32_t magic;
    uint32_t version;
    unsigned char mac[TNT_AUTH_MAC_BYTES];
} tcp_proof_t;

/** What the accepting rank expects of a hello. */
typedef struct tcp_expect {
    uint64_t job_id;
    uint32_t comm_id;
    int rank;   /* the acceptor */
    int nsock;  /* its TNT_SOCKETS_PER_PEER */
} tcp_expect_t;

/** Parse a hello: NULL if it fits (*out filled), else why not. */
const char *tnt__tcp_hello_parse(const void *buf, size_t len,
                                 const tcp_expect_t *e, tcp_hello_t *out);

/** Parse a challenge (its MAC is the caller's to verify). */
const char *tnt__tcp_challenge_parse(const void *buf, size_t len,
                                     tcp_challenge_t *out);

/** Parse a proof (its MAC is the caller's to verify). */
const char *tnt__tcp_proof_parse(const void *buf, size_t len,
                                 tcp_proof_t *out);

/** Parse a frame header: NULL if sane, else why not. */
const char *tnt__tcp_frame_parse(const void *buf, size_t len,
                                 tcp_frame_t *out);

/* Bytes a handshake MAC covers (label + hello + acceptor nonce). */
#define TCP_AUTH_INPUT_MAX (16 + sizeof(tcp_hello_t) + TCP_NONCE_BYTES)

/** Write the input of MAC A (connector = 0) or MAC C (connector = 1)
 *  into out (TCP_AUTH_INPUT_MAX bytes); returns its length. */
size_t tnt__tcp_auth_input(int connector, const tcp_hello_t *h,
                           const unsigned char *acceptor_nonce,
                           unsigned char *out);

#endif /* TNT_TRANSPORT_TCP_TCP_WIRE_H */
