/*
 * Alignment of what two processes write in shared memory. A core's
 * prefetchers fetch more than the line asked for, within its 4 KiB page:
 * a field one side writes near a field the other side writes has each
 * write pull the other side's line away, and the next store to it waits
 * for the line to come back. Measured p=2, 8-byte allreduce through the
 * slots: the lower side's "done" line, 128 bytes from the higher side's
 * first slot header (a separate line pair) cost about 170 cycles per
 * call; on a page of its own, nothing. So each side's fields start a
 * page of their own.
 */
#ifndef TNT_TRANSPORT_SHM_SHM_ALIGN_H
#define TNT_TRANSPORT_SHM_SHM_ALIGN_H

#define TNT_SHM_APART 4096

#endif /* TNT_TRANSPORT_SHM_SHM_ALIGN_H */
