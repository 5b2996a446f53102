/*
 * The table of a communicator's shared allocations (core/mem.h): its
 * lifetime, and the lookups the engine makes on every buffer a
 * collective is given (is it in an allocation of this rank, and where
 * is a peer's). The allocations themselves are made and exchanged by
 * tnt_mem_alloc (mem.c), above the engine, since that takes a
 * collective.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/comm_tp.h"
#include "core/mem.h"

size_t tnt__mem_map_len(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return bytes == 0 ? page : (bytes + page - 1) / page * page;
}

void tnt__mem_table_init(tnt_mem_table_t *t)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
}

void tnt__mem_region_free(tnt_mem_region_t *r, int nranks)
{
    for (int q = 0; r->peer_base && q < nranks; q++)
        if (r->peer_base[q])
            munmap(r->peer_base[q], tnt__mem_map_len(r->peer_bytes[q]));
    if (r->base)
        munmap(r->base, r->map_bytes);
    free(r->peer_base);
    free(r->peer_bytes);
    free(r->tp_reg);
    free(r);
}

/* A transport's registration of r must end before r is unmapped. */
void tnt__mem_region_dereg(struct tnt_comm *comm, tnt_mem_region_t *r)
{
    if (!r->tp_reg)
        return;
    pthread_mutex_lock(&comm->group->lock);
    tnt__comm_tp_dereg_mem(comm, r->tp_reg);
    pthread_mutex_unlock(&comm->group->lock);
}

void tnt__mem_table_dereg(struct tnt_comm *comm)
{
    tnt_mem_table_t *t = &comm->mem;
    pthread_mutex_lock(&t->lock);
    int n = t->n;
    pthread_mutex_unlock(&t->lock);
    for (int i = 0; i < n; i++)
        tnt__mem_region_dereg(comm, t->regions[i]);
}

void tnt__mem_table_destroy(tnt_mem_table_t *t, int nranks)
{
    for (int i = 0; i < t->n; i++)
        tnt__mem_region_free(t->regions[i], nranks);
    free(t->regions);
    pthread_mutex_destroy(&t->lock);
}

int tnt__mem_find(struct tnt_comm *comm, const void *p, size_t bytes,
                  tnt_mem_ref_t *ref)
{
    tnt_mem_table_t *t = &comm->mem;
    const unsigned char *c = p;
    int found = 0;
    pthread_mutex_lock(&t->lock);
    for (int i = 0; i < t->n && !found; i++) {
        const tnt_mem_region_t *r = t->regions[i];
        if (r->shared && c >= r->base && (size_t)(c - r->base) <= r->bytes &&
            bytes <= r->bytes - (size_t)(c - r->base)) {
            ref->id = r->id;
            ref->off = (uint64_t)(c - r->base);
            found = 1;
        }
    }
    pthread_mutex_unlock(&t->lock);
    return found;
}

unsigned char *tnt__mem_peer(struct tnt_comm *comm, int q,
                             const tnt_mem_ref_t *ref, size_t bytes)
{
    tnt_mem_table_t *t = &comm->mem;
    unsigned char *p = NULL;
    pthread_mutex_lock(&t->lock);
    for (int i = 0; i < t->n; i++) {
        const tnt_mem_region_t *r = t->regions[i];
        if (r->id != ref->id)
            continue;
        size_t have = r->peer_bytes[q];
        if (r->shared && r->peer_base[q] && ref->off <= have &&
            bytes <= have - ref->off)
            p = r->peer_base[q] + ref->off;
        break;
    }
    pthread_mutex_unlock(&t->lock);
    return p;
}
