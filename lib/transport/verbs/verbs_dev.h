/*
 * Device discovery and opening for the verbs transport (verbs_dev.c).
 */
#ifndef TNT_TRANSPORT_VERBS_VERBS_DEV_H
#define TNT_TRANSPORT_VERBS_VERBS_DEV_H

#include <infiniband/verbs.h>
#include <stddef.h>

#include "tnt/tnt.h"

#define VB_PORTS_MAX 64

typedef struct vb_opened {
    struct ibv_context *ib;
    char name[64];
    int port, gid_index, link;
    struct ibv_port_attr pa;
    union ibv_gid gid;
} vb_opened_t;

/** ibv_fork_init once per process; its result (0 = ok). */
int tnt__vb_fork_init(void);

/** 1 if an active port is usable under TNT_IB_HCA / TNT_IB_GID_INDEX
 *  (`why` then names it), else 0 with the reason in `why`. Quiet. */
int tnt__verbs_probe(char *why, size_t why_len);

/** Select and open the device (TNT_ERR_UNSUPPORTED when none fits);
 *  `pick`: which usable port, round robin (tnt__vb_select_nth). */
tnt_result_t tnt__vb_open(vb_opened_t *o, int pick);

double tnt__vb_port_gbps(const struct ibv_port_attr *pa);

#endif /* TNT_TRANSPORT_VERBS_VERBS_DEV_H */
