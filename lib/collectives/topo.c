/*
 * Host layouts (see topo.h): grouping ranks by host key, and which local
 * rank owns which slice of the buffer in the hierarchical allreduce.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/topo.h"
#include "util/error.h"

tnt_result_t tnt__topo_init(tnt_topo_t *t, int n, const int *key)
{
    memset(t, 0, sizeof(*t));
    t->nranks = n;
    t->host_of = malloc((size_t)n * sizeof(int));
    t->local_of = malloc((size_t)n * sizeof(int));
    t->host_start = malloc(((size_t)n + 1) * sizeof(int));
    t->members = malloc((size_t)n * sizeof(int));
    int *first = malloc((size_t)n * sizeof(int)); /* lowest rank per host */
    int *size = calloc((size_t)n, sizeof(int));
    if (!t->host_of || !t->local_of || !t->host_start || !t->members ||
        !first || !size) {
        free(first);
        free(size);
        tnt__topo_fini(t);
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory for the host "
                          "layout of %d ranks", n);
    }
    /* Ranks in ascending order: a key not seen before opens the next
     * host, so hosts come in the order of their lowest rank. Quadratic in
     * the number of hosts, once per communicator. */
    for (int r = 0; r < n; r++) {
        int h = 0;
        while (h < t->nhosts && key[first[h]] != key[r])
            h++;
        if (h == t->nhosts)
            first[t->nhosts++] = r;
        t->host_of[r] = h;
        t->local_of[r] = size[h]++;
        if (size[h] > t->max_local)
            t->max_local = size[h];
    }
    t->host_start[0] = 0;
    for (int h = 0; h < t->nhosts; h++)
        t->host_start[h + 1] = t->host_start[h] + size[h];
    for (int r = 0; r < n; r++)
        t->members[t->host_start[t->host_of[r]] + t->local_of[r]] = r;
    free(first);
    free(size);
    return TNT_SUCCESS;
}

void tnt__topo_fini(tnt_topo_t *t)
{
    free(t->host_of);
    free(t->local_of);
    free(t->host_start);
    free(t->members);
    memset(t, 0, sizeof(*t));
}

int tnt__topo_slice_first(int nslices, int k, int c)
{
    return (int)((long long)c * nslices / k);
}

/* The largest c with first(c) <= j: c*nslices/k < j+1, i.e.
 * c <= ((j+1)*k - 1) / nslices. */
int tnt__topo_slice_owner(int nslices, int k, int j)
{
    return (int)(((long long)(j + 1) * k - 1) / nslices);
}
