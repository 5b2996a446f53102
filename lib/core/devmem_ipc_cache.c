/*
 * Opened CUDA IPC handles (devmem_ipc_cache.h): a list kept in use
 * order, at most CACHE_MAX entries; the least recently used entry no
 * call holds is closed to make room.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/devmem.h"
#include "core/devmem_ipc_cache.h"
#include "util/error.h"

#define CACHE_MAX 256

typedef struct entry {
    int pid, dev;
    uint64_t base;
    tnt_cu_ipc_handle_t h;
    void *ctx;
    tnt_cu_ptr_t p;             /* the mapping here */
    int busy;                   /* calls using it now */
    struct entry *next;         /* most recently used first */
} entry_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t *g_list;
static int g_n;
static tnt_ipc_cache_stats_t g_st;

/* Close e's mapping in its own context (the caller may hold another
 * device's pushed). */
static void close_entry(const tnt_cuda_drv_t *d, entry_t *e)
{
    void *prev;
    if (d->ctx_push(e->ctx) == 0) {
        d->ipc_close_mem_handle(e->p);
        d->ctx_pop(&prev);
    }
    g_st.closes++;
    g_st.live--;
    free(e);
}

tnt_result_t tnt__ipc_map(const tnt_cuda_drv_t *d, void *ctx, int dev,
                          int pid, uint64_t base,
                          const tnt_cu_ipc_handle_t *h, tnt_cu_ptr_t *p)
{
    pthread_mutex_lock(&g_lock);
    for (entry_t **pp = &g_list; *pp; pp = &(*pp)->next) {
        entry_t *e = *pp;
        if (e->pid != pid || e->dev != dev || e->base != base)
            continue;
        if (memcmp(&e->h, h, sizeof *h) == 0) {
            *pp = e->next; /* to the front */
            e->next = g_list;
            g_list = e;
            e->busy++;
            g_st.hits++;
            *p = e->p;
            pthread_mutex_unlock(&g_lock);
            return TNT_SUCCESS;
        }
        if (e->busy == 0) { /* stale: the peer allocated anew there */
            *pp = e->next;
            g_n--;
            close_entry(d, e);
        }
        break;
    }
    /* Room: the least recently used entry nobody holds. */
    if (g_n >= CACHE_MAX) {
        entry_t **victim = NULL;
        for (entry_t **pp = &g_list; *pp; pp = &(*pp)->next)
            if ((*pp)->busy == 0)
                victim = pp;
        if (victim) {
            entry_t *e = *victim;
            *victim = e->next;
            g_n--;
            close_entry(d, e);
        }
    }
    entry_t *e = calloc(1, sizeof *e);
    if (!e) {
        pthread_mutex_unlock(&g_lock);
        return tnt__error(TNT_ERR_NO_MEMORY, "IPC handle cache: out of "
                          "memory");
    }
    int err = d->ipc_open_mem_handle(&e->p, *h, TNT_CU_IPC_LAZY_PEER);
    if (err) {
        pthread_mutex_unlock(&g_lock);
        free(e);
        return tnt__error(TNT_ERR_SYSTEM, "cuIpcOpenMemHandle of process "
                          "%d's allocation failed: %s", pid,
                          tnt__cuda_drv_strerror(err));
    }
    e->pid = pid, e->dev = dev, e->base = base, e->h = *h, e->ctx = ctx;
    e->busy = 1;
    e->next = g_list;
    g_list = e;
    g_n++;
    g_st.opens++;
    g_st.live++;
    *p = e->p;
    pthread_mutex_unlock(&g_lock);
    return TNT_SUCCESS;
}

void tnt__ipc_unmap(tnt_cu_ptr_t p)
{
    pthread_mutex_lock(&g_lock);
    for (entry_t *e = g_list; e; e = e->next) {
        if (e->p == p && e->busy > 0) {
            e->busy--;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
}

void tnt__ipc_cache_stats(tnt_ipc_cache_stats_t *out)
{
    pthread_mutex_lock(&g_lock);
    *out = g_st;
    pthread_mutex_unlock(&g_lock);
}
