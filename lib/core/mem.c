/*
 * Shared allocations (tnt_mem_alloc, tnt_mem_free): see core/mem.h.
 *
 * Each allocation is a memfd of this rank. How a peer maps it: by
 * opening /proc/<pid>/fd/<n> of the owner, which the kernel allows under
 * the same rule as the single-copy path (a ptrace read check: same user,
 * no Yama or seccomp in the way). Passing the descriptor over the pair's
 * socket would not need that check, but the socket is the transport's
 * and only watched for hang-ups after the hello; the /proc route needs
 * no protocol. A pid means nothing across PID namespaces, so the peer
 * compares the file's device and inode with the owner's before it maps
 * anything, and every rank's outcome is agreed (an allgather of "mapped
 * all") before the allocation counts as shared: an allocation some peer
 * could not map is plain private memory on every rank, and collectives
 * on it take the usual paths.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/comm_live.h"
#include "core/comm_tp.h"
#include "util/error.h"
#include "util/log.h"
#include "core/mem.h"

/* What a rank tells the others of its allocation (as TNT_U64s). */
typedef struct mem_desc {
    uint64_t pid, fd, dev, ino, bytes, ok;
} mem_desc_t;

#define DESC_WORDS (sizeof(mem_desc_t) / sizeof(uint64_t))

/* Map peer allocation d, after checking that the descriptor found is
 * the file the peer described (not another process's in another PID
 * namespace). NULL if not possible. */
static unsigned char *map_peer(const mem_desc_t *d, int q)
{
    if (!d->ok)
        return NULL;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%" PRIu64 "/fd/%" PRIu64, d->pid,
             d->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        TNT_LOG_INFO("tnt_mem_alloc: cannot open rank %d's allocation "
                     "(%s): %s", q, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    void *p = MAP_FAILED;
    int seals = fcntl(fd, F_GET_SEALS);
    if (fstat(fd, &st) == 0 && (uint64_t)st.st_dev == d->dev &&
        (uint64_t)st.st_ino == d->ino && d->bytes <= SIZE_MAX / 2 &&
        (uint64_t)st.st_size >= tnt__mem_map_len((size_t)d->bytes) && seals >= 0 &&
        (seals & F_SEAL_SHRINK))
        p = mmap(NULL, tnt__mem_map_len((size_t)d->bytes), PROT_READ | PROT_WRITE,
                 MAP_SHARED, fd, 0);
    else
        TNT_LOG_INFO("tnt_mem_alloc: %s is not rank %d's allocation "
                     "(another PID namespace?)", path, q);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

/* This rank's memory: a memfd whose size is sealed (a peer that shrank
 * it would make every mapping fault), mapped. */
static int make_local(tnt_mem_region_t *r, int *fd)
{
    *fd = memfd_create("tnt-mem", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (*fd < 0)
        return -1;
    void *p = MAP_FAILED;
    if (ftruncate(*fd, (off_t)r->map_bytes) == 0 &&
        fcntl(*fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) ==
            0)
        p = mmap(NULL, r->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd,
                 0);
    if (p == MAP_FAILED)
        return -1;
    r->base = p;
    return 0;
}

/* Tell the peers about this rank's allocation, map theirs and agree
 * whether everyone mapped everything. Collective: a rank whose own
 * allocation failed takes part too (ok = 0), so nobody waits for it. */
static tnt_result_t exchange(tnt_comm_t comm, tnt_mem_region_t *r, int fd,
                             int local_ok)
{
    int k = comm->nranks;
    mem_desc_t mine = {0}, *all = calloc((size_t)k, sizeof(*all));
    struct stat st;
    if (!all)
        return tnt__error(TNT_ERR_NO_MEMORY, "rank %d: tnt_mem_alloc: out "
                          "of memory", comm->rank);
    if (local_ok && fstat(fd, &st) == 0) {
        mine.pid = (uint64_t)getpid();
        mine.fd = (uint64_t)fd;
        mine.dev = (uint64_t)st.st_dev;
        mine.ino = (uint64_t)st.st_ino;
        mine.bytes = r->bytes;
        mine.ok = 1;
    }
    int32_t agreed = (int32_t)mine.ok;
    tnt_result_t rc = tnt_allgather(comm, &mine, all, DESC_WORDS, TNT_U64);
    if (rc != TNT_SUCCESS) {
        free(all);
        return rc;
    }
    for (int q = 0; q < k && agreed; q++) {
        if (q == comm->rank)
            continue;
        r->peer_base[q] = map_peer(&all[q], q);
        r->peer_bytes[q] = (size_t)all[q].bytes;
        agreed = r->peer_base[q] != NULL;
    }
    /* An allgather, not an allreduce: TNT_ALLREDUCE_ALGO may force an
     * algorithm that does not apply to this small private buffer. */
    int32_t *votes = (int32_t *)all; /* k x 48 bytes hold k votes */
    rc = tnt_allgather(comm, &agreed, votes, 1, TNT_I32);
    for (int q = 0; q < k && rc == TNT_SUCCESS; q++)
        agreed &= votes[q];
    free(all);
    if (rc != TNT_SUCCESS)
        return rc;
    r->shared = agreed;
    if (!agreed) {
        TNT_LOG_INFO("tnt_mem_alloc: allocation %" PRIu32 " is private: "
                     "some rank could not map a peer's (see "
                     "docs/shm.md)", r->id);
        for (int q = 0; q < k; q++)
            if (r->peer_base[q]) {
                munmap(r->peer_base[q], tnt__mem_map_len(r->peer_bytes[q]));
                r->peer_base[q] = NULL;
            }
    }
    return TNT_SUCCESS;
}

TNT_API tnt_result_t tnt_mem_alloc(tnt_comm_t comm, size_t bytes, void **ptr)
{
    TNT_CHECK(tnt__comm_check(comm, "tnt_mem_alloc"));
    if (!ptr)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: tnt_mem_alloc: "
                          "output pointer is NULL", comm->rank);
    *ptr = NULL;
    if (bytes > SIZE_MAX / 2)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: tnt_mem_alloc: "
                          "%zu bytes is more than the address space",
                          comm->rank, bytes);
    tnt_mem_table_t *t = &comm->mem;
    pthread_mutex_lock(&t->lock);
    uint32_t id = t->next_id++; /* every rank counts every call */
    pthread_mutex_unlock(&t->lock);
    tnt_mem_region_t *r = calloc(1, sizeof(*r));
    if (r) {
        r->id = id;
        r->bytes = bytes;
        r->map_bytes = tnt__mem_map_len(bytes);
        r->peer_base = calloc((size_t)comm->nranks, sizeof(*r->peer_base));
        r->peer_bytes = calloc((size_t)comm->nranks,
                               sizeof(*r->peer_bytes));
        r->tp_reg = calloc(TNT_TP_MAX, sizeof(*r->tp_reg));
    }
    if (!r || !r->peer_base || !r->peer_bytes || !r->tp_reg) {
        if (r)
            tnt__mem_region_free(r, comm->nranks);
        return tnt__error(TNT_ERR_NO_MEMORY, "rank %d: tnt_mem_alloc: out "
                          "of memory", comm->rank);
    }
    int fd = -1;
    int ok = make_local(r, &fd) == 0;
    tnt_result_t rc = TNT_SUCCESS;
    if (comm->intra_host && comm->nranks > 1)
        rc = exchange(comm, r, fd, ok);
    if (fd >= 0)
        close(fd); /* the mappings keep the memory */
    if (rc == TNT_SUCCESS && !ok)
        rc = tnt__error(TNT_ERR_NO_MEMORY, "rank %d: tnt_mem_alloc: no "
                        "memory for %zu bytes", comm->rank, bytes);
    /* Registered once for its life (comm_tp.c says why), before any
     * collective can find it in the table. comm->group->lock is taken outside
     * the table's lock, never inside it. */
    if (rc == TNT_SUCCESS) {
        pthread_mutex_lock(&comm->group->lock);
        tnt__comm_tp_reg_mem(comm, r->base, r->map_bytes, r->tp_reg);
        pthread_mutex_unlock(&comm->group->lock);
    }
    pthread_mutex_lock(&t->lock);
    if (rc == TNT_SUCCESS && t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 8;
        tnt_mem_region_t **g = realloc(t->regions, (size_t)cap * sizeof(*g));
        if (g) {
            t->regions = g;
            t->cap = cap;
        } else {
            rc = tnt__error(TNT_ERR_NO_MEMORY, "rank %d: tnt_mem_alloc: out "
                            "of memory", comm->rank);
        }
    }
    if (rc == TNT_SUCCESS) {
        t->regions[t->n] = r;
        __atomic_store_n(&t->n, t->n + 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&t->lock);
    if (rc != TNT_SUCCESS) {
        tnt__mem_region_dereg(comm, r);
        tnt__mem_region_free(r, comm->nranks);
        return rc;
    }
    *ptr = r->base;
    return TNT_SUCCESS;
}

TNT_API tnt_result_t tnt_mem_free(tnt_comm_t comm, void *ptr)
{
    TNT_CHECK(tnt__comm_check(comm, "tnt_mem_free"));
    if (!ptr)
        return TNT_SUCCESS;
    tnt_mem_table_t *t = &comm->mem;
    tnt_mem_region_t *r = NULL;
    pthread_mutex_lock(&t->lock);
    for (int i = 0; i < t->n; i++)
        if (t->regions[i]->base == ptr) {
            r = t->regions[i];
            t->regions[i] = t->regions[t->n - 1];
            __atomic_store_n(&t->n, t->n - 1, __ATOMIC_RELAXED);
            break;
        }
    pthread_mutex_unlock(&t->lock);
    if (!r)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: tnt_mem_free: %p "
                          "is not an allocation of tnt_mem_alloc on this "
                          "communicator (or was freed already)", comm->rank,
                          ptr);
    tnt__mem_region_dereg(comm, r);
    tnt__mem_region_free(r, comm->nranks);
    return TNT_SUCCESS;
}
