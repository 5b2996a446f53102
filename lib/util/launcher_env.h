/*
 * Variables that other programs own and set: Open MPI's (OMPI_*), Slurm's
 * (SLURM_*), PMIx's (PMIX_*) and torchrun's (RANK, WORLD_SIZE,
 * LOCAL_RANK, MASTER_ADDR, ...), which launcher detection reads. Besides
 * param_table.c this is the only place in lib/ that calls getenv(); the
 * library's own TNT_* variables are read through the table
 * (param_table.h), never here.
 */
#ifndef TNT_UTIL_LAUNCHER_ENV_H
#define TNT_UTIL_LAUNCHER_ENV_H

/** Another program's variable: NULL when unset or empty, and for a name
 *  starting with TNT_ (those are the table's). */
const char *tnt__launcher_env(const char *name);

#endif /* TNT_UTIL_LAUNCHER_ENV_H */
