/*
 * PMIx client side of the launcher detection and of the bootstrap. Every
 * rank puts its bootstrap entry (transport address, host) under a key
 * that is new for each communicator, commits, joins a fence that collects
 * the data, and reads everyone's entry back: the same table the TCP
 * rendezvous at rank 0 builds, without rank 0 having to listen anywhere.
 * PMIx_Init is reference-counted by libpmix; each successful
 * tnt__pmix_start() is paired with one tnt__pmix_stop().
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <math.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <pmix.h>

#include "boot/boot_pmix.h"
#include "util/error.h"
#include "util/log.h"

#define PMIX_BOOT_MAGIC 0x50544e54u /* "TNTP" */

/* What one rank publishes. */
typedef struct pmix_boot_blob {
    uint32_t magic;
    int32_t nranks;
    uint64_t job_id;
    tnt_boot_entry_t entry;
} pmix_boot_blob_t;

/* The process's PMIx identity and the job's shape, from the last start. */
static pmix_proc_t g_me;
static int g_size, g_local_size;
/* Communicators created through PMIx so far: every rank creates them in
 * the same order, so the count names the keys of one bootstrap. */
static atomic_uint g_seq;

static tnt_result_t get_u32(const pmix_proc_t *p, const char *key,
                            uint32_t *out)
{
    pmix_value_t *v = NULL;
    pmix_status_t st = PMIx_Get(p, key, NULL, 0, &v);
    if (st != PMIX_SUCCESS || !v)
        return tnt__error(TNT_ERR_CONFIG, "PMIx_Get(%s) failed: %s", key,
                          PMIx_Error_string(st));
    tnt_result_t rc = TNT_SUCCESS;
    switch (v->type) {
    case PMIX_UINT32: *out = v->data.uint32; break;
    case PMIX_UINT16: *out = v->data.uint16; break;
    case PMIX_PROC_RANK: *out = v->data.rank; break;
    default:
        rc = tnt__error(TNT_ERR_CONFIG, "PMIx_Get(%s) returned type %d, "
                        "expected an unsigned integer", key, (int)v->type);
    }
    PMIX_VALUE_RELEASE(v);
    return rc;
}

tnt_result_t tnt__pmix_start(tnt_launch_t *l)
{
    pmix_proc_t me;
    pmix_status_t st = PMIx_Init(&me, NULL, 0);
    if (st != PMIX_SUCCESS)
        return tnt__error(TNT_ERR_CONFIG, "PMIx_Init failed: %s (is this "
                          "process started by a PMIx server?)",
                          PMIx_Error_string(st));
    pmix_proc_t wild;
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    uint32_t size = 0, lsize = 0, lrank = 0;
    tnt_result_t rc = get_u32(&wild, PMIX_JOB_SIZE, &size);
    if (rc == TNT_SUCCESS && (size < 1 || size > (1u << 20) ||
                              me.rank >= size))
        rc = tnt__error(TNT_ERR_CONFIG, "PMIx says rank %u of %u ranks",
                        me.rank, size);
    /* Local rank and size are optional: logging only. */
    int have_local = rc == TNT_SUCCESS &&
                     get_u32(&me, PMIX_LOCAL_RANK, &lrank) == TNT_SUCCESS &&
                     get_u32(&wild, PMIX_LOCAL_SIZE, &lsize) == TNT_SUCCESS &&
                     lrank < lsize && lsize <= size;
    if (rc != TNT_SUCCESS) {
        PMIx_Finalize(NULL, 0);
        return rc;
    }
    tnt__clear_error();
    g_me = me;
    g_size = (int)size;
    g_local_size = have_local ? (int)lsize : -1;
    l->rank = (int)me.rank;
    l->size = (int)size;
    l->local_rank = have_local ? (int)lrank : -1;
    l->local_size = g_local_size;
    snprintf(l->job_key, sizeof(l->job_key), "pmix:%s", me.nspace);
    return TNT_SUCCESS;
}

void tnt__pmix_stop(void)
{
    PMIx_Finalize(NULL, 0);
}

/* Where this rank's transport listens. There is no connection to rank 0
 * to learn the outgoing interface from: the loopback when the whole job
 * is on this node, else the first IPv4 address of an interface that is up
 * and not the loopback. */
static void local_ip(char *ip, size_t len)
{
    snprintf(ip, len, "127.0.0.1");
    if (g_local_size == g_size)
        return;
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) != 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
            (i->ifa_flags & IFF_UP) && !(i->ifa_flags & IFF_LOOPBACK)) {
            struct sockaddr_in *s = (struct sockaddr_in *)i->ifa_addr;
            inet_ntop(AF_INET, &s->sin_addr, ip, (socklen_t)len);
            break;
        }
    freeifaddrs(ifs);
}

static tnt_result_t fence(const tnt_boot_args_t *a)
{
    pmix_info_t info[2];
    bool collect = true;
    int timeout = (int)ceil(a->timeout_s);
    PMIX_INFO_CONSTRUCT(&info[0]);
    PMIX_INFO_CONSTRUCT(&info[1]);
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &timeout, PMIX_INT);
    pmix_status_t st = PMIx_Fence(NULL, 0, info, timeout > 0 ? 2 : 1);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (st != PMIX_SUCCESS)
        return tnt__error(st == PMIX_ERR_TIMEOUT ? TNT_TIMEOUT
                                                 : TNT_ERR_CONNECT,
                          "rank %d: PMIx_Fence of the bootstrap failed: %s "
                          "(a rank died or never joined within "
                          "TNT_CONNECT_TIMEOUT=%.0f s?)", a->rank,
                          PMIx_Error_string(st), a->timeout_s);
    return TNT_SUCCESS;
}

static tnt_result_t publish(const tnt_boot_args_t *a, const char *key)
{
    pmix_boot_blob_t b;
    memset(&b, 0, sizeof(b));
    b.magic = PMIX_BOOT_MAGIC;
    b.nranks = a->nranks;
    b.job_id = a->job_id;
    b.entry.rank = a->rank;
    snprintf(b.entry.host, sizeof(b.entry.host), "%s", a->host);
    char ip[64];
    local_ip(ip, sizeof(ip));
    TNT_CHECK(a->listen(a->listen_arg, ip, &b.entry));

    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)&b;
    v.data.bo.size = sizeof(b);
    pmix_status_t st = PMIx_Put(PMIX_GLOBAL, key, &v);
    if (st == PMIX_SUCCESS)
        st = PMIx_Commit();
    if (st != PMIX_SUCCESS)
        return tnt__error(TNT_ERR_CONNECT, "rank %d: PMIx_Put/Commit of the "
                          "bootstrap entry failed: %s", a->rank,
                          PMIx_Error_string(st));
    return TNT_SUCCESS;
}

static tnt_result_t fetch(const tnt_boot_args_t *a, const char *key, int r,
                          tnt_boot_entry_t *e)
{
    pmix_proc_t p;
    PMIX_LOAD_PROCID(&p, g_me.nspace, (pmix_rank_t)r);
    pmix_value_t *v = NULL;
    pmix_status_t st = PMIx_Get(&p, key, NULL, 0, &v);
    if (st != PMIX_SUCCESS || !v)
        return tnt__error(TNT_ERR_CONNECT, "rank %d: PMIx_Get of rank %d's "
                          "bootstrap entry failed: %s", a->rank, r,
                          PMIx_Error_string(st));
    pmix_boot_blob_t b;
    int ok = v->type == PMIX_BYTE_OBJECT && v->data.bo.size == sizeof(b);
    if (ok)
        memcpy(&b, v->data.bo.bytes, sizeof(b));
    PMIX_VALUE_RELEASE(v);
    ok = ok && b.magic == PMIX_BOOT_MAGIC && b.entry.rank == r &&
         b.entry.addr_len <= TNT_TRANSPORT_ADDR_MAX;
    if (!ok)
        return tnt__error(TNT_ERR_PROTOCOL, "rank %d: rank %d's bootstrap "
                          "entry in PMIx is malformed", a->rank, r);
    if (b.nranks != a->nranks || b.job_id != a->job_id)
        return tnt__error(TNT_ERR_CONFIG, "rank %d: rank %d has %d ranks "
                          "and job id %016llx, this rank %d and %016llx",
                          a->rank, r, (int)b.nranks,
                          (unsigned long long)b.job_id, a->nranks,
                          (unsigned long long)a->job_id);
    b.entry.host[TNT_HOST_MAX - 1] = '\0';
    *e = b.entry;
    return TNT_SUCCESS;
}

tnt_result_t tnt__bootstrap_pmix(const tnt_boot_args_t *a,
                                 tnt_boot_entry_t *table)
{
    if (a->nranks != g_size || a->rank != (int)g_me.rank)
        return tnt__error(TNT_ERR_CONFIG, "PMIx bootstrap for rank %d of "
                          "%d, but PMIx says rank %u of %d", a->rank,
                          a->nranks, g_me.rank, g_size);
    char key[64];
    snprintf(key, sizeof(key), "tnt.boot.%u", atomic_fetch_add(&g_seq, 1));
    TNT_CHECK(publish(a, key));
    TNT_CHECK(fence(a));
    for (int r = 0; r < a->nranks; r++)
        TNT_CHECK(fetch(a, key, r, &table[r]));
    TNT_LOG_DEBUG("bootstrap through PMIx namespace %s done (key %s)",
                  g_me.nspace, key);
    return TNT_SUCCESS;
}
