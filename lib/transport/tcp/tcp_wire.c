/*
 * Parsers of the TCP transport's handshake and frames (see tcp_wire.h).
 * Each checks the length first and then every field, most telling reason
 * first: a stranger's garbage is "not a libtntcomm hello", an old peer's
 * is "another protocol version".
 */
#include <string.h>

#include "transport/tcp/tcp_wire.h"

const char *tnt__tcp_hello_parse(const void *buf, size_t len,
                                 const tcp_expect_t *e, tcp_hello_t *out)
{
    if (len != sizeof(*out))
        return "not a libtntcomm hello (wrong length)";
    memcpy(out, buf, sizeof(*out));
    if (out->magic != TCP_HELLO_MAGIC && out->magic != TCP_PROBE_MAGIC)
        return "not a libtntcomm hello";
    if (out->version != TCP_PROTO_VERSION)
        return "another protocol version";
    if (out->job_id != e->job_id)
        return "hello from another job (another job key)";
    if (out->comm_id != e->comm_id || out->to != e->rank)
        return "hello for another communicator or rank";
    /* A probe comes from a higher rank, which never connects here. */
    if (out->magic == TCP_PROBE_MAGIC)
        return out->from > e->rank && out->index == 0
                   ? NULL
                   : "probe from a rank that may not probe here";
    if (out->from < 0 || out->from >= e->rank)
        return "hello from a rank that may not connect here";
    if (out->count != e->nsock || out->index >= out->count)
        return "TNT_SOCKETS_PER_PEER differs between the ranks";
    return NULL;
}

const char *tnt__tcp_challenge_parse(const void *buf, size_t len,
                                     tcp_challenge_t *out)
{
    if (len != sizeof(*out))
        return "not a libtntcomm challenge (wrong length)";
    memcpy(out, buf, sizeof(*out));
    if (out->magic != TCP_CHAL_MAGIC)
        return "not a libtntcomm challenge";
    if (out->version != TCP_PROTO_VERSION)
        return "another protocol version";
    return NULL;
}

const char *tnt__tcp_proof_parse(const void *buf, size_t len,
                                 tcp_proof_t *out)
{
    if (len != sizeof(*out))
        return "not a libtntcomm proof (wrong length)";
    memcpy(out, buf, sizeof(*out));
    if (out->magic != TCP_PROOF_MAGIC)
        return "not a libtntcomm proof";
    if (out->version != TCP_PROTO_VERSION)
        return "another protocol version";
    return NULL;
}

const char *tnt__tcp_frame_parse(const void *buf, size_t len,
                                 tcp_frame_t *out)
{
    if (len < sizeof(*out))
        return "truncated frame";
    memcpy(out, buf, sizeof(*out));
    if (out->magic != TCP_FRAME_MAGIC)
        return "malformed frame (bad magic)";
    if (out->hdr_len == 0 || out->hdr_len > TCP_HDR_MAX)
        return "malformed frame (header length)";
    if (out->payload_len > SIZE_MAX)
        return "malformed frame (payload length)";
    return NULL;
}

size_t tnt__tcp_auth_input(int connector, const tcp_hello_t *h,
                           const unsigned char *acceptor_nonce,
                           unsigned char *out)
{
    static const char label_connect[16] = "TNT-tcp-connect";
    static const char label_accept[16] = "TNT-tcp-accept";
    memcpy(out, connector ? label_connect : label_accept, 16);
    memcpy(out + 16, h, sizeof(*h));
    memcpy(out + 16 + sizeof(*h), acceptor_nonce, TCP_NONCE_BYTES);
    return 16 + sizeof(*h) + TCP_NONCE_BYTES;
}
