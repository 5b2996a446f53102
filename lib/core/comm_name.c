/*
 * The names of communicators and the world ranks of their ranks
 * (comm_name.h says the rule).
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/comm_name.h"
#include "core/engine.h"

void tnt__comm_name_init(struct tnt_comm *comm, const struct tnt_comm *parent,
                         const tnt_comm_lineage_t *lineage)
{
    if (!parent || !lineage) {
        snprintf(comm->name, sizeof(comm->name), "world");
        comm->how[0] = '\0';
        comm->world_rank = comm->rank;
        return;
    }
    /* A chain of derivations deeper than the field holds keeps its
     * beginning and its last number: still one name per communicator
     * on the members, if a shortened one. */
    int n = snprintf(comm->name, sizeof(comm->name), "%s/%u", parent->name,
                     lineage->nth);
    if (n < 0 || (size_t)n >= sizeof(comm->name))
        snprintf(comm->name, sizeof(comm->name), "%.40s.../%u", parent->name,
                 lineage->nth);
    if (lineage->how[0] == 's' && lineage->how[1] == 'p')
        snprintf(comm->how, sizeof(comm->how), "split of %.60s, color %d",
                 parent->name, lineage->color);
    else
        snprintf(comm->how, sizeof(comm->how), "%s of %.60s", lineage->how,
                 parent->name);
    comm->world_rank = parent->world_rank;
}

int tnt__comm_name_ranks(struct tnt_comm *comm, const struct tnt_comm *parent,
                         const tnt_comm_lineage_t *lineage)
{
    if (!parent || !lineage || !lineage->parent_of)
        return 0;
    int *w = malloc((size_t)comm->nranks * sizeof(*w));
    if (!w)
        return -1;
    for (int i = 0; i < comm->nranks; i++)
        w[i] = tnt__comm_world_rank(parent, lineage->parent_of[i]);
    comm->world_of = w;
    return 0;
}

int tnt__comm_world_rank(const struct tnt_comm *comm, int rank)
{
    if (rank < 0 || rank >= comm->nranks)
        return -1;
    if (!comm->how[0])
        return rank;
    if (rank == comm->rank)
        return comm->world_rank;
    return comm->world_of ? comm->world_of[rank] : -1;
}

void tnt__comm_who(const struct tnt_comm *comm, char *buf, size_t len)
{
    if (!comm->how[0])
        snprintf(buf, len, "rank %d", comm->rank);
    else
        snprintf(buf, len, "comm %s (%s) rank %d = world rank %d",
                 comm->name, comm->how, comm->rank, comm->world_rank);
}

void tnt__comm_name_fini(struct tnt_comm *comm)
{
    free(comm->world_of);
    comm->world_of = NULL;
}
