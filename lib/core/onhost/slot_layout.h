/*
 * Collective slots: a small fixed area of each pair's shared memory (the
 * transport's pair area TNT_TP_AREA_SLOTS) where a rank leaves the input
 * of a small allreduce for its peer to read in place (onhost/slots.c runs
 * the algorithm). A message
 * through the ring costs a frame, a header, a match against posted
 * receives and a copy out of the ring on the other side; a slot costs the
 * cache lines of the data and one of a header, which is what Open MPI's
 * shared-memory "fast boxes" cost too.
 *
 * Each side of a pair owns two slots (the parity of the slot operation's
 * number picks one, so that operation n+1 can be published while the
 * peer still reads n) and a line of "done" counters, written by the side
 * that reads the other's slots. Every field a peer writes is untrusted:
 * the reader compares the signature with its own call and reads the data
 * as plain numbers.
 */
#ifndef TNT_CORE_ONHOST_SLOT_LAYOUT_H
#define TNT_CORE_ONHOST_SLOT_LAYOUT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "collectives/algorithms.h"
#include "tnt/transport.h"

typedef struct tnt_slot {
    /* Number + 1 of the slot operation whose input the slot holds; stored
     * last, with release order, after the fields below and the data. */
    _Alignas(64) _Atomic uint64_t no;
    uint64_t seq;      /* the collective's sequence number */
    /* The publisher's slot operations finished when it published this
     * one: spares the reader a look at the done line (another cache
     * miss) when it publishes next. */
    uint64_t completed;
    uint32_t count;    /* at most TNT_SLOT_BYTES elements */
    uint8_t kind, dtype, op, algo; /* an allreduce: its root is 0 */
    /* From byte 32: the first 32 bytes share the header's line. */
    unsigned char data[TNT_SLOT_BYTES];
} tnt_slot_t;

/* Written by its owner only, on pages of its own: the transport starts
 * each side on a page (TNT_TP_AREA_ALIGN), and a side is whole pages, so
 * that the two sides' writes do not pull each other's lines away
 * (docs/performance.md, "Fields a page apart"). */
typedef struct tnt_slot_side {
    _Alignas(TNT_TP_AREA_ALIGN) tnt_slot_t slot[2];
    /* done[b]: number + 1 of the last operation of parity b whose input
     * this side has read from the other side's slot: the other side may
     * use that slot again. */
    _Alignas(64) _Atomic uint64_t done[2];
} tnt_slot_side_t;

_Static_assert(offsetof(tnt_slot_t, data) == 32,
               "a small input shares the line of the slot's header");
_Static_assert(sizeof(tnt_slot_side_t) % TNT_TP_AREA_ALIGN == 0 &&
               _Alignof(tnt_slot_side_t) <= TNT_TP_AREA_ALIGN,
               "a side is whole pages of the pair areas' alignment");

/* The core reaches a pair's slots through the transport's pair_area
 * (TNT_TP_AREA_SLOTS) and pair_notify entries. */

#endif /* TNT_CORE_ONHOST_SLOT_LAYOUT_H */
