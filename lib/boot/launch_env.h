/*
 * Which launcher started this process, and what it says about the job:
 * rank, size, local rank, where to rendezvous and what identifies the job.
 * tnt_comm_init_from_env() asks this first, so that a program runs
 * unchanged under tnt-run, PMIx (srun --mpi=pmix, Open MPI's mpirun),
 * plain Open MPI or Slurm environments, torchrun, or alone.
 */
#ifndef TNT_BOOT_LAUNCH_ENV_H
#define TNT_BOOT_LAUNCH_ENV_H

#include "tnt/tnt.h"

typedef enum tnt_launcher {
    TNT_LAUNCHER_TNT,      /* our tnt-run: TNT_RANK, TNT_SIZE, ... */
    TNT_LAUNCHER_PMIX,     /* a PMIx server: PMIx_Init, put/fence/get */
    TNT_LAUNCHER_OMPI,     /* OMPI_COMM_WORLD_* */
    TNT_LAUNCHER_SLURM,    /* SLURM_PROCID, SLURM_NTASKS, ... */
    TNT_LAUNCHER_TORCHRUN, /* RANK, WORLD_SIZE, MASTER_ADDR, ... */
    TNT_LAUNCHER_SINGLE,   /* nothing: a world of one */
    TNT_LAUNCHER_COUNT
} tnt_launcher_t;

/* Root port derived for Open MPI and Slurm jobs without PMIx:
 * TNT_ROOT_PORT_BASE + (FNV-1a of the job identity) % TNT_ROOT_PORT_SPAN,
 * i.e. 20000..31999, below Linux's ephemeral range (32768..60999) so that
 * the port is not already some connection's local end. */
#define TNT_ROOT_PORT_BASE 20000
#define TNT_ROOT_PORT_SPAN 12000

typedef struct tnt_launch {
    tnt_launcher_t kind;
    int forced;             /* chosen by TNT_BOOTSTRAP */
    int rank, size;
    int local_rank;         /* -1: the launcher did not say */
    int local_size;
    char root_addr[320];    /* host:port of rank 0; "" for PMIx or one */
    char job_key[320];      /* identifies the job (not a secret) */
} tnt_launch_t;

/**
 * Find the launcher (TNT_BOOTSTRAP forces one) and fill *l. Malformed or
 * inconsistent values are a TNT_ERR_CONFIG naming the variable. For PMIx
 * this initialises the PMIx client; tnt__launch_release() undoes it.
 */
tnt_result_t tnt__launch_detect(tnt_launch_t *l);
void tnt__launch_release(tnt_launch_t *l);

/** "tnt", "pmix", "ompi", "slurm", "torchrun", "single". */
const char *tnt__launcher_name(tnt_launcher_t kind);

/** The root port derived from a job identity (see TNT_ROOT_PORT_BASE). */
int tnt__launch_port_of(const char *identity);

#endif /* TNT_BOOT_LAUNCH_ENV_H */
