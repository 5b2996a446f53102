/*
 * libFuzzer harness of the TCP transport's handshake and frame parsers
 * (lib/transport/tcp/tcp_wire.c). The first input byte picks the message
 * (hello, challenge, proof, frame) and the acceptor's rank; the rest is
 * the message. Whatever a parser accepts must satisfy what tcp.c relies
 * on, and a MAC made from fuzzed bytes must never verify.
 */
#include <stdint.h>
#include <string.h>

#include "util/auth.h"
#include "fuzz_common.h"
#include "transport/tcp/tcp_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const tnt_auth_key_t *key = fuzz_key();
    if (size < 1)
        return 0;
    int kind = data[0] & 3, rank = (data[0] >> 2) & 7;
    const uint8_t *m = data + 1;
    size_t len = size - 1;
    tcp_expect_t e = {0x1122334455667788ull, 1, rank, 1 + (data[0] >> 5)};
    if (kind == 0) {
        tcp_hello_t h;
        if (tnt__tcp_hello_parse(m, len, &e, &h))
            return 0;
        /* tcp.c indexes accepting[] by from and conns[] by index; a
         * probe (answered, never assembled) only comes from above. */
        FUZZ_ASSERT(len == sizeof(h));
        if (h.magic == TCP_PROBE_MAGIC) {
            FUZZ_ASSERT(h.from > rank && h.to == rank && h.index == 0);
            return 0;
        }
        FUZZ_ASSERT(h.from >= 0 && h.from < rank && h.to == rank);
        FUZZ_ASSERT(h.index < h.count && h.count == e.nsock);
        FUZZ_ASSERT(h.count <= TCP_MAX_SOCKETS);
        unsigned char in[TCP_AUTH_INPUT_MAX];
        size_t n = tnt__tcp_auth_input(1, &h, h.nonce, in);
        FUZZ_ASSERT(n <= sizeof(in));
        /* The hello's own bytes as a MAC: a stranger cannot guess one. */
        unsigned char mac[TNT_AUTH_MAC_BYTES] = {0};
        memcpy(mac, &h, sizeof(mac) < sizeof(h) ? sizeof(mac) : sizeof(h));
        FUZZ_ASSERT(!tnt__auth_verify(key, in, n, mac));
    } else if (kind == 1) {
        tcp_challenge_t c;
        if (!tnt__tcp_challenge_parse(m, len, &c))
            FUZZ_ASSERT(c.magic == TCP_CHAL_MAGIC &&
                        c.version == TCP_PROTO_VERSION);
    } else if (kind == 2) {
        tcp_proof_t p;
        if (!tnt__tcp_proof_parse(m, len, &p))
            FUZZ_ASSERT(p.magic == TCP_PROOF_MAGIC && len == sizeof(p));
    } else {
        tcp_frame_t f;
        if (!tnt__tcp_frame_parse(m, len, &f)) {
            FUZZ_ASSERT(f.hdr_len >= 1 && f.hdr_len <= TCP_HDR_MAX);
            FUZZ_ASSERT(len >= sizeof(f));
        }
    }
    return 0;
}
