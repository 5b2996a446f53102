/*
 * tnt-info: what this build of libtntcomm can do, on this host, with
 * this environment (docs/tnt-info.md). Each section is one file; they all
 * write through the emitter of tnt-info-out.c, so that every section has
 * the same text and --json forms and the JSON is valid by construction.
 */
#ifndef TNT_INFO_H
#define TNT_INFO_H

#include <stddef.h>
#include <stdio.h>

/* Nesting of objects and arrays; deeper than this is a bug of a section. */
#define INFO_MAX_DEPTH 8

typedef struct info_out {
    FILE *f;
    int json;
    int depth;
    int count[INFO_MAX_DEPTH]; /* members written at each level */
    int array[INFO_MAX_DEPTH]; /* level is an array (keys are ignored) */
    int row[INFO_MAX_DEPTH];   /* level is a row: one text line */
} info_out_t;

void info_begin(info_out_t *o);            /* the outer object */
void info_end(info_out_t *o);
void info_obj(info_out_t *o, const char *key);   /* open {...} */
void info_arr(info_out_t *o, const char *key);   /* open [...] */
void info_row(info_out_t *o); /* open {...} in an array: scalars only */
void info_close(info_out_t *o);                  /* close either */
void info_str(info_out_t *o, const char *key, const char *val); /* NULL: null */
void info_int(info_out_t *o, const char *key, long long val);
void info_bool(info_out_t *o, const char *key, int val);

/* The sections, each a member (or several) of the outer object. */
void info_build(info_out_t *o);
void info_host(info_out_t *o);
void info_rdma(info_out_t *o);
void info_numa(info_out_t *o);
void info_params(info_out_t *o);

/* --algorithms: the table; with nranks > 0 also the pick for one case. */
typedef struct info_algo_query {
    int nranks;          /* 0: table only */
    size_t bytes;
    int ranks_per_host;  /* 0: all ranks on this host */
    int mapped;          /* buffers from tnt_mem_alloc */
} info_algo_query_t;
int info_algorithms(info_out_t *o, const info_algo_query_t *q);

#endif /* TNT_INFO_H */
