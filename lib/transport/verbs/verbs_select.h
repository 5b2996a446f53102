/*
 * Device, port and GID selection for the verbs transport, as a pure
 * function of device descriptions (filled from ibv_query_* by the glue,
 * or by hand in tests) and the two knobs:
 *
 * TNT_IB_HCA: comma-separated device names, each optionally with
 *   ":port" ("mlx5_0,mlx5_1:2"); tried in the order given. A leading '^'
 *   turns the list into exclusions ("^mlx5_2" = any device but mlx5_2).
 *   Names match exactly. Unset: every device in the order the system
 *   lists them. In every case the first ACTIVE port wins.
 * TNT_IB_GID_INDEX: the GID table index to use. Unset: on InfiniBand
 *   index 0 (addressing is by LID); on RoCE the best GID, in this order:
 *   RoCE v2 with an IPv4-mapped address (routable, what most RoCE
 *   fabrics are configured for), RoCE v2 with another global address,
 *   RoCE v2 link-local, RoCE v1; the lowest index among equals.
 */
#ifndef TNT_TRANSPORT_VERBS_VERBS_SELECT_H
#define TNT_TRANSPORT_VERBS_VERBS_SELECT_H

#include <stddef.h>
#include <stdint.h>

enum vb_gid_type { VB_GID_IB, VB_GID_ROCE_V1, VB_GID_ROCE_V2 };
enum vb_link { VB_LINK_IB, VB_LINK_ETH };

typedef struct vb_gid_desc {
    uint8_t raw[16];
    int type;        /* enum vb_gid_type */
} vb_gid_desc_t;

typedef struct vb_port_desc {
    int num;         /* 1-based, as verbs numbers ports */
    int active;
    int link;        /* enum vb_link */
    int ngids;
    const vb_gid_desc_t *gids;
} vb_port_desc_t;

typedef struct vb_dev_desc {
    const char *name;
    int nports;
    const vb_port_desc_t *ports;
} vb_dev_desc_t;

typedef struct vb_choice {
    int dev;         /* index into the description array */
    int port;        /* port number */
    int gid_index;
    int link;
} vb_choice_t;

/**
 * Pick device, port and GID. 0 on success; -1 with a sentence in `why`
 * (for the user: what was asked, what exists) when nothing fits or a knob
 * is malformed. hca / gid_index may be NULL or empty (unset).
 */
int tnt__vb_select(const vb_dev_desc_t *devs, int ndevs, const char *hca,
                   const char *gid_index, vb_choice_t *out, char *why,
                   size_t why_len);

/**
 * As tnt__vb_select, but the pick-th usable port (round robin over the
 * active ports that TNT_IB_HCA allows, in its order, else in the
 * devices' order): pick 0 is tnt__vb_select's choice. For
 * TNT_IB_HCA_MAP=local_rank, where pick is the rank's local rank.
 */
int tnt__vb_select_nth(const vb_dev_desc_t *devs, int ndevs, const char *hca,
                       const char *gid_index, int pick, vb_choice_t *out,
                       char *why, size_t why_len);

/** The GID selection alone (for a chosen port); -1 if none is usable. */
int tnt__vb_pick_gid(const vb_port_desc_t *port);

#endif /* TNT_TRANSPORT_VERBS_VERBS_SELECT_H */
