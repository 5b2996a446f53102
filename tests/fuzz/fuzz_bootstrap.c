/*
 * libFuzzer harness of the bootstrap message parsers
 * (lib/boot/boot_wire.c). The first byte picks the message (hello,
 * challenge, registration, reply, table header, table entries, ack), the
 * second the job size; the rest is the message. Accepted messages must
 * satisfy what bootstrap.c relies on: ranks in range, addresses within
 * TNT_TRANSPORT_ADDR_MAX, strings terminated; an accepted table must
 * encode back to exactly the bytes it was decoded from.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "boot/boot_wire.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int kind = data[0] % 7, nranks = 1 + data[1] % 64;
    const uint8_t *m = data + 2;
    size_t len = size - 2;
    if (kind == 0) {
        tnt_boot_hello_t h;
        if (!tnt__boot_hello_parse(m, len, 42, &h))
            FUZZ_ASSERT(h.job_id == 42 && h.version == TNT_BOOT_VERSION);
    } else if (kind == 1) {
        tnt_boot_challenge_t c;
        if (!tnt__boot_challenge_parse(m, len, &c))
            FUZZ_ASSERT(c.magic == TNT_BOOT_MAGIC);
    } else if (kind == 2) {
        tnt_boot_register_t r;
        if (tnt__boot_register_parse(m, len, &r))
            return 0;
        FUZZ_ASSERT(strlen(r.entry.host) < TNT_HOST_MAX);
        int taken[64] = {1, 0};
        char msg[240];
        if (tnt__boot_register_check(&r, nranks, taken, msg,
                                     sizeof(msg)) == 0) {
            FUZZ_ASSERT(r.rank >= 1 && r.rank < nranks);
            FUZZ_ASSERT(r.entry.addr_len <= TNT_TRANSPORT_ADDR_MAX);
        } else {
            FUZZ_ASSERT(strlen(msg) < sizeof(msg) && msg[0]);
        }
        unsigned char in[TNT_BOOT_AUTH_MAX];
        tnt_boot_hello_t h;
        tnt_boot_challenge_t ch;
        memset(&h, 0, sizeof(h));
        memset(&ch, 0, sizeof(ch));
        FUZZ_ASSERT(tnt__boot_auth_input(1, &h, &ch, &r, in) <=
                    sizeof(in));
    } else if (kind == 3) {
        tnt_boot_reply_t r;
        /* An accepted answer is a result (0 or a negative tnt_result_t)
         * or rank 0's "still waiting" note, which bootstrap.c reads as
         * neither success nor failure. */
        if (!tnt__boot_reply_parse(m, len, nranks, &r))
            FUZZ_ASSERT(strlen(r.msg) < sizeof(r.msg) &&
                        (r.status <= 0 || r.status == TNT_BOOT_WAITING));
    } else if (kind == 4) {
        tnt_boot_table_hdr_t h;
        if (!tnt__boot_table_hdr_parse(m, len, nranks, &h))
            FUZZ_ASSERT(h.nranks == nranks &&
                        h.bytes <= (size_t)nranks * TNT_BOOT_WIRE_ENTRY_MAX);
    } else if (kind == 5) {
        tnt_boot_entry_t *t = malloc((size_t)nranks * sizeof(*t));
        tnt_boot_listener_t *l = malloc((size_t)nranks * sizeof(*l));
        if (!tnt__boot_table_decode(m, len, nranks, t, l)) {
            for (int i = 0; i < nranks; i++)
                FUZZ_ASSERT(t[i].rank == i && t[i].addr_len >= 1 &&
                            t[i].addr_len <= TNT_TRANSPORT_ADDR_MAX &&
                            strlen(t[i].host) < TNT_HOST_MAX &&
                            !tnt__boot_listener_check(&l[i]));
            unsigned char *again = malloc((size_t)nranks *
                                          TNT_BOOT_WIRE_ENTRY_MAX);
            FUZZ_ASSERT(tnt__boot_table_encode(t, l, nranks, again) == len &&
                        memcmp(again, m, len) == 0);
            free(again);
        }
        free(l);
        free(t);
    } else {
        /* An ack from rank 1: a failure names a rank of the job. */
        tnt_boot_ack_t k;
        if (!tnt__boot_ack_parse(m, len, 1, nranks, &k))
            FUZZ_ASSERT(k.rank == 1 && k.status <= 0 &&
                        strlen(k.msg) < sizeof(k.msg) &&
                        (k.status == 0 ||
                         (k.about >= 1 && k.about < nranks)));
    }
    return 0;
}
