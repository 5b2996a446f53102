/*
 * The live communicators (util/handles.h): a call on a handle not in the
 * set is refused before anything of it is read. A thread remembers the
 * last handle it found live, which spares a small blocking allreduce the
 * set's lock. Below everything else of the core, so that any layer may
 * check a handle without reaching up to where communicators are made.
 */
#include "core/comm_live.h"
#include "util/error.h"
#include "util/handles.h"

static tnt_handles_t live_comms = TNT_HANDLES_INIT;
static _Thread_local tnt_handle_seen_t seen_comm;

tnt_result_t tnt__comm_check(tnt_comm_t comm, const char *fn)
{
    if (!tnt__handles_live(&live_comms, comm, &seen_comm))
        return tnt__error(TNT_ERR_INVALID_COMM, "%s: communicator %p is not "
                          "live (NULL, freed, or never created)", fn,
                          (void *)comm);
    return TNT_SUCCESS;
}

int tnt__comm_live_add(tnt_comm_t comm)
{
    return tnt__handles_add(&live_comms, comm);
}

int tnt__comm_live_remove(tnt_comm_t comm)
{
    return tnt__handles_remove(&live_comms, comm);
}
