/*
 * libFuzzer harness of the verbs transport's wire decoders
 * (lib/transport/verbs/verbs_wire.c): the message header at the start of every
 * SEND, the immediate of the RDMA WRITE that ends a large message, and
 * the side channel's hello, challenge and proof. The first input byte
 * picks the decoder; the rest is the message (the immediate: its first
 * four bytes). Whatever a decoder accepts must satisfy what verbs.c and
 * verbs_io.c rely on, and must encode back to the same bytes, so that no
 * field is read that the checks did not cover.
 */
#include <stdint.h>
#include <string.h>

#include "util/auth.h"
#include "fuzz_common.h"
#include "transport/verbs/verbs_wire.h"

static void check_msg(const uint8_t *m, size_t len)
{
    vb_msg_t d;
    if (tnt__vb_msg_decode(m, len, &d))
        return;
    FUZZ_ASSERT(len >= VB_MSG_HDR_LEN);
    FUZZ_ASSERT(d.kind >= VB_K_EAGER && d.kind <= VB_K_CREDIT);
    if (d.kind == VB_K_EAGER || d.kind == VB_K_RTS) {
        /* verbs_io.c hands the core header to the core from here. */
        FUZZ_ASSERT(d.core_hdr_len <= VB_CORE_HDR_MAX);
        FUZZ_ASSERT(VB_MSG_HDR_LEN + (size_t)d.core_hdr_len <= len);
    }
    if (d.kind == VB_K_EAGER)
        FUZZ_ASSERT(VB_MSG_HDR_LEN + (size_t)d.core_hdr_len + d.len == len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const tnt_auth_key_t *key = fuzz_key();
    if (size < 1)
        return 0;
    const uint8_t *m = data + 1;
    size_t len = size - 1;
    switch (data[0] % 5) {
    case 0:
        check_msg(m, len);
        break;
    case 1: {
        if (len < 4)
            break;
        uint32_t raw;
        memcpy(&raw, m, 4);
        vb_imm_t imm;
        if (!tnt__vb_imm_decode(raw, &imm)) {
            FUZZ_ASSERT(imm.kind == VB_K_FIN);
            FUZZ_ASSERT(imm.token <= VB_IMM_TOKEN_MAX);
            FUZZ_ASSERT(tnt__vb_imm_encode(&imm) == raw);
        }
        break;
    }
    case 2: {
        vb_hello_t h;
        if (tnt__vb_hello_decode(m, len, &h))
            break;
        FUZZ_ASSERT(len == VB_HELLO_LEN && h.version == VB_PROTO_VERSION);
        FUZZ_ASSERT(h.from >= 0 && h.to >= 0 && h.mtu >= 1 && h.mtu <= 5);
        FUZZ_ASSERT(h.qpn <= 0xffffffu && h.psn <= 0xffffffu);
        unsigned char back[VB_HELLO_LEN];
        tnt__vb_hello_encode(&h, back);
        FUZZ_ASSERT(memcmp(back, m, VB_HELLO_LEN) == 0);
        /* Fuzzed bytes as a MAC over the hello: never a valid proof. */
        unsigned char in[VB_AUTH_INPUT_MAX];
        size_t n = tnt__vb_auth_input(1, m, h.nonce, in);
        FUZZ_ASSERT(n == VB_AUTH_INPUT_MAX);
        unsigned char mac[VB_MAC_BYTES];
        memcpy(mac, m + VB_HELLO_LEN - VB_MAC_BYTES, VB_MAC_BYTES);
        FUZZ_ASSERT(!tnt__auth_verify(key, in, n, mac));
        break;
    }
    default: {
        uint32_t kind = data[0] % 5 == 3 ? VB_AUTH_CHALLENGE : VB_AUTH_PROOF;
        vb_auth_t a;
        if (tnt__vb_auth_decode(m, len, kind, &a))
            break;
        FUZZ_ASSERT(len == VB_REC_LEN && a.kind == kind);
        unsigned char back[VB_REC_LEN];
        tnt__vb_auth_encode(&a, back);
        FUZZ_ASSERT(memcmp(back, m, VB_REC_LEN) == 0);
        break;
    }
    }
    return 0;
}
