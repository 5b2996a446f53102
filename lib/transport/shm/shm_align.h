/*
 * Alignment of what two processes write in shared memory. A core's
 * prefetchers fetch more than the line asked for, within its 4 KiB page:
 * a field one side writes near a field the other side writes has each
 * write pull the other side's line away, and the next store to it waits
 * for the line to come back (docs/performance.md, "Fields a page
 * apart"). So each side's fields start a page of their own.
 */
#ifndef TNT_TRANSPORT_SHM_SHM_ALIGN_H
#define TNT_TRANSPORT_SHM_SHM_ALIGN_H

#define TNT_SHM_APART 4096

#endif /* TNT_TRANSPORT_SHM_SHM_ALIGN_H */
