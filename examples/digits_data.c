/*
 * Reading and splitting the scikit-learn digits data set (see
 * digits_data.h). gzgets reads the compressed file line by line, so the
 * loader never holds more than one line of text; a plain (uncompressed)
 * CSV file works too, since zlib passes such files through.
 */
#include "digits_data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* A row is 65 numbers such as "1.200000000000000000e+01," (25 bytes). */
#define LINE_MAX_BYTES 4096

/* Parses one CSV row into 64 pixels and a label; 0 or -1 with err set. */
static int parse_row(char *line, float *x, int *y, char *err, size_t len)
{
    char *p = line;
    for (int i = 0; i <= DIGITS_FEATURES; i++) {
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno) {
            snprintf(err, len, "field %d is not a number", i + 1);
            return -1;
        }
        if (i < DIGITS_FEATURES) {
            if (!(v >= 0.0 && v <= 16.0)) {
                snprintf(err, len, "pixel %d is %g, not in 0..16", i + 1, v);
                return -1;
            }
            x[i] = (float)(v / 16.0);
        } else {
            if (!(v >= 0.0 && v < DIGITS_CLASSES) || v != (double)(int)v) {
                snprintf(err, len, "label %g is not a digit", v);
                return -1;
            }
            *y = (int)v;
        }
        p = end;
        if (i < DIGITS_FEATURES) {
            if (*p != ',') {
                snprintf(err, len, "expected %d comma-separated fields, "
                         "found %d", DIGITS_FEATURES + 1, i + 1);
                return -1;
            }
            p++;
        }
    }
    p += strspn(p, " \r\n");
    if (*p) {
        snprintf(err, len, "more than %d fields", DIGITS_FEATURES + 1);
        return -1;
    }
    return 0;
}

static int grow(mlp_data_t *d, size_t *cap)
{
    size_t n = *cap ? 2 * *cap : 2048;
    float *x = realloc(d->x, n * DIGITS_FEATURES * sizeof(*x));
    if (!x)
        return -1;
    d->x = x;
    int *y = realloc(d->y, n * sizeof(*y));
    if (!y)
        return -1;
    d->y = y;
    *cap = n;
    return 0;
}

int digits_load(const char *path, mlp_data_t *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof(*d));
    d->dim = DIGITS_FEATURES;
    d->classes = DIGITS_CLASSES;
    gzFile f = gzopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open the digits data '%s': %s (it "
                 "comes with scikit-learn: apt-get install python3-sklearn, "
                 "or give its path with --data)", path,
                 errno ? strerror(errno) : "out of memory");
        return -1;
    }
    char line[LINE_MAX_BYTES], why[128];
    size_t cap = 0, lineno = 0;
    int rc = 0;
    while (gzgets(f, line, sizeof(line))) {
        lineno++;
        if (strspn(line, " \r\n") == strlen(line))
            continue;
        if (!strchr(line, '\n') && !gzeof(f)) {
            snprintf(err, errlen, "%s:%zu: line longer than %d bytes", path,
                     lineno, LINE_MAX_BYTES - 1);
            rc = -1;
            break;
        }
        if (d->n == cap && grow(d, &cap) != 0) {
            snprintf(err, errlen, "out of memory reading %s", path);
            rc = -1;
            break;
        }
        if (parse_row(line, d->x + d->n * DIGITS_FEATURES, &d->y[d->n], why,
                      sizeof(why)) != 0) {
            snprintf(err, errlen, "%s:%zu: %s", path, lineno, why);
            rc = -1;
            break;
        }
        d->n++;
    }
    int zerr = Z_OK;
    const char *zmsg = gzerror(f, &zerr);
    if (rc == 0 && zerr != Z_OK && zerr != Z_STREAM_END) {
        snprintf(err, errlen, "%s: cannot read: %s", path,
                 zerr == Z_ERRNO ? strerror(errno) : zmsg);
        rc = -1;
    }
    gzclose(f);
    if (rc == 0 && d->n < 2) {
        snprintf(err, errlen, "%s: %zu samples; expected the 1797 digits",
                 path, d->n);
        rc = -1;
    }
    if (rc != 0)
        mlp_data_free(d);
    return rc;
}

static int alloc_part(mlp_data_t *part, size_t n)
{
    memset(part, 0, sizeof(*part));
    part->n = n;
    part->dim = DIGITS_FEATURES;
    part->classes = DIGITS_CLASSES;
    part->x = malloc((n ? n : 1) * DIGITS_FEATURES * sizeof(float));
    part->y = malloc((n ? n : 1) * sizeof(int));
    return part->x && part->y ? 0 : -1;
}

int digits_split(mlp_data_t *all, size_t n_test, uint64_t seed,
                 mlp_data_t *train, mlp_data_t *test)
{
    size_t n = all->n;
    size_t *perm = malloc(n * sizeof(*perm));
    if (!perm || alloc_part(test, n_test) != 0 ||
        alloc_part(train, n - n_test) != 0) {
        free(perm);
        mlp_data_free(test);
        mlp_data_free(train);
        return -1;
    }
    /* Fisher-Yates with the example's portable generator: every rank
     * derives the same split from the seed. */
    uint64_t rng = seed;
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(mlp_rng_next(&rng) % (i + 1));
        size_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < n; i++) {
        mlp_data_t *to = i < n_test ? test : train;
        size_t k = i < n_test ? i : i - n_test;
        memcpy(to->x + k * DIGITS_FEATURES, all->x + perm[i] * DIGITS_FEATURES,
               DIGITS_FEATURES * sizeof(float));
        to->y[k] = all->y[perm[i]];
    }
    free(perm);
    mlp_data_free(all);
    return 0;
}
