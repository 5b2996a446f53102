/*
 * tnt-run's timeline merge (docs/timeline.md): after a job run with
 * --timeline PATH (or with TNT_TIMELINE=PATH in tnt-run's environment),
 * the per-rank files PATH.R.json found on this host become one file,
 * PATH.json, which chrome://tracing and Perfetto load whole.
 *
 * The library writes each file as {"traceEvents":[ EVENTS ], ...,
 * "otherData":{ META }} (lib/core/timeline_write.c); the merge copies the
 * EVENTS of every rank into one list and lists the ranks' META under
 * otherData.ranks, as `tnt-timeline merge` does. Files of ranks on other
 * hosts stay there; a file that is missing or was not finished (its rank
 * died) is named and left out.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tnt-run.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *nb = realloc(buf, 2 * cap + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* The events' text (between the list's brackets) and the metadata
 * object of one rank's file; 0 if the file is not one finished by the
 * library. */
static int split(char *buf, size_t len, char **ev, size_t *ev_len,
                 char **meta, size_t *meta_len)
{
    static const char head[] = "{\"traceEvents\":[\n";
    static const char tail[] = "\n],\n\"displayTimeUnit\"";
    static const char other[] = "\"otherData\":";
    if (strncmp(buf, head, sizeof(head) - 1) != 0)
        return 0;
    char *end = strstr(buf, tail);
    char *m = end ? strstr(end, other) : NULL;
    if (!m)
        return 0;
    *ev = buf + sizeof(head) - 1;
    *ev_len = (size_t)(end - *ev);
    *meta = m + sizeof(other) - 1;
    /* The metadata object ends one brace before the file's last one. */
    char *last = buf + len;
    while (last > *meta && last[-1] != '}')
        last--;
    if (last <= *meta)
        return 0;
    last--; /* the file's closing brace */
    while (last > *meta && last[-1] != '}')
        last--;
    if (last <= *meta)
        return 0;
    *meta_len = (size_t)(last - *meta);
    return 1;
}

int run_merge_timeline(const char *prefix, int nranks)
{
    char out_path[4096 + 8], path[4096 + 32];
    snprintf(out_path, sizeof(out_path), "%s.json", prefix);
    FILE *out = fopen(out_path, "w");
    if (!out) {
        fprintf(stderr, "tnt-run: timeline: cannot write %s: %s\n", out_path,
                strerror(errno));
        return -1;
    }
    fputs("{\"traceEvents\":[\n", out);
    int merged = 0, first = 1;
    char missing[512] = "";
    size_t mlen = 0;
    char **metas = calloc((size_t)nranks, sizeof(char *));
    for (int r = 0; r < nranks && metas; r++) {
        snprintf(path, sizeof(path), "%s.%d.json", prefix, r);
        size_t len = 0, ev_len, meta_len;
        char *buf = slurp(path, &len), *ev, *meta;
        if (!buf || !split(buf, len, &ev, &ev_len, &meta, &meta_len)) {
            if (mlen < sizeof(missing) - 16)
                mlen += (size_t)snprintf(missing + mlen,
                                         sizeof(missing) - mlen, " %d", r);
            free(buf);
            continue;
        }
        if (ev_len) {
            if (!first)
                fputs(",\n", out);
            fwrite(ev, 1, ev_len, out);
            first = 0;
        }
        metas[r] = strndup(meta, meta_len);
        merged++;
        free(buf);
    }
    fputs("\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"format\":"
          "\"libtntcomm timeline 1 (merged)\",\"ranks\":[", out);
    for (int r = 0, n = 0; metas && r < nranks; r++)
        if (metas[r]) {
            fprintf(out, "%s\n%s", n++ ? "," : "", metas[r]);
            free(metas[r]);
        }
    fputs("]}}\n", out);
    free(metas);
    int bad = fclose(out) != 0;
    if (bad || merged == 0) {
        fprintf(stderr, "tnt-run: timeline: %s\n", bad ? strerror(errno)
                : "no finished rank file to merge");
        remove(out_path);
        return -1;
    }
    printf("tnt-run: timeline: %d of %d ranks merged into %s%s%s\n", merged,
           nranks, out_path, mlen ? "; missing or unfinished (ranks on "
           "other hosts keep theirs):" : "", missing);
    return 0;
}
