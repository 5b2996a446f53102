/*
 * Staging areas (the transport's pair area TNT_TP_AREA_STAGES): where the
 * staged allreduce and broadcast (onhost/staged_allreduce.c,
 * staged_bcast.c, mapped_allreduce.c, rounds in stage_rounds.c) among
 * ranks that all share this host leave their data for a peer to read in
 * place. Each side of a pair's segment owns
 * two input buffers (this rank's part of the slice the peer reduces) and
 * two output buffers (the slice this rank reduced, or the broadcast
 * root's data, for the peer to copy), used by rounds alternately: round g
 * uses buffer g % 2, so that round g + 1 can be filled while the peer
 * still reads round g. Rounds are numbered per communicator across staged
 * collectives, in posting order.
 *
 * The mapped allreduce publishes no data: its input header names where
 * the publisher's buffers lie in its shared allocations, and the input
 * "done" counter says that this side has read the peer's input and
 * written its result there.
 *
 * Who writes what: a side writes its own headers and buffers, and its
 * "done" counters say how far it has read the *other* side's buffers
 * (the other side may then reuse them). Every field the peer writes is
 * untrusted: the reader compares the signature with its own call and
 * reads the data as plain numbers.
 */
#ifndef TNT_CORE_ONHOST_STAGE_LAYOUT_H
#define TNT_CORE_ONHOST_STAGE_LAYOUT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tnt/transport.h"

/* One buffer. Large enough that a round's copies dwarf its
 * synchronisation, small enough that a round's data stays in cache
 * (a prototype with 64 KiB, 256 KiB and 1 MiB buffers, p=4 on 2 cores:
 * 256 KiB fastest at 1 MiB and 8 MiB). */
#define TNT_STAGE_BYTES ((size_t)256 << 10)

typedef struct tnt_stage_hdr {
    /* Round + 1 whose data the buffer holds; stored last, with release
     * order, after the fields below and the data. */
    _Alignas(64) _Atomic uint64_t no;
    uint64_t seq;      /* the collective's sequence number */
    uint64_t count;    /* the whole collective's, in elements */
    uint8_t kind, dtype, op, algo;
    int32_t root;      /* a broadcast's; 0 for an allreduce */
    /* A mapped allreduce's buffers (no data in the buffer): the shared
     * allocation (its number, core/mem.h) and offset of the send and
     * receive buffers; zero otherwise. */
    uint32_t send_id, recv_id;
    uint64_t send_off, recv_off;
} tnt_stage_hdr_t;

typedef struct tnt_stage_side {
    tnt_stage_hdr_t in_hdr[2], out_hdr[2];
    /* Round + 1 of the last round of parity b whose input (output) from
     * the other side this side has read. */
    _Alignas(64) _Atomic uint64_t in_done[2];
    _Alignas(64) _Atomic uint64_t out_done[2];
    _Alignas(4096) unsigned char in[2][TNT_STAGE_BYTES];
    unsigned char out[2][TNT_STAGE_BYTES];
} tnt_stage_side_t;

_Static_assert(sizeof(tnt_stage_side_t) % TNT_TP_AREA_ALIGN == 0 &&
               _Alignof(tnt_stage_side_t) <= TNT_TP_AREA_ALIGN,
               "a side is whole pages of the pair areas' alignment");

/* The core reaches a pair's staging areas through the transport's
 * pair_area entry (TNT_TP_AREA_STAGES). */

#endif /* TNT_CORE_ONHOST_STAGE_LAYOUT_H */
