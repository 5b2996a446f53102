/*
 * The output of `tnt-bench fusion` on rank 0: a header that says what was
 * run and how the compute was emulated, a table with one row per way of
 * reducing the gradients (and per threshold with --sweep), and the same
 * numbers as JSON with --json.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_fusion.h"

#define MIB (1024.0 * 1024.0)

static const char *kind_name[3] = {"fused", "per-tensor", "one-shot"};

const char *fu_threshold_label(size_t thr, char *buf, size_t len)
{
    if (thr == TNT_FUSION_DEFAULT)
        snprintf(buf, len, "default");
    else if (thr == BENCH_THRESHOLD_ALL)
        snprintf(buf, len, "all");
    else if (thr && thr % (1 << 20) == 0)
        snprintf(buf, len, "%zuM", thr >> 20);
    else if (thr && thr % (1 << 10) == 0)
        snprintf(buf, len, "%zuk", thr >> 10);
    else
        snprintf(buf, len, "%zu", thr);
    return buf;
}

static const char *env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

void fu_print_header(const fu_t *c)
{
    const bench_opts_t *o = c->o;
    int maj, min, pat;
    tnt_get_version(&maj, &min, &pat);
    printf("# tnt-bench fusion: %d rank%s, libtntcomm %d.%d.%d\n",
           c->nranks, c->nranks == 1 ? "" : "s", maj, min, pat);
    printf("# model %s: %zu tensors, %zu parameters, %.2f MiB of f32 "
           "gradients; backprop order, tensor 0 (%s) first\n", c->m.label,
           c->m.n, c->m.params, (double)c->m.bytes / MIB,
           c->m.desc[0].name);
    if (o->fu.contiguous)
        printf("# gradients: one arena in backprop order (--contiguous): "
               "buckets are reduced in place\n");
    else
        printf("# gradients: one allocation per tensor: buckets of several "
               "tensors are packed\n");
    printf("# op %s, iters %d, warmup %d, check %s; TNT_TRANSPORT=%s, "
           "TNT_ALLREDUCE_ALGO=%s\n", bench_op_name(c->op), o->iters,
           o->warmup, o->check ? "on" : "off", env_or("TNT_TRANSPORT", "-"),
           env_or("TNT_ALLREDUCE_ALGO", "-"));
    if (!o->fu.sweep && o->fu.threshold == TNT_FUSION_DEFAULT)
        printf("# threshold: library default (TNT_FUSION_THRESHOLD=%s)\n",
               env_or("TNT_FUSION_THRESHOLD", "unset: 32k"));
    if (o->fu.sleep_compute)
        printf("# compute before each gradient: write it (datagen values; "
               "all gradients: %.1f ms) + a sleep (an accelerator's "
               "backprop; the CPU is free) at X = %.3f us/MiB\n",
               c->fill_s * 1e3, c->us_per_mib);
    else
        printf("# compute before each gradient: write it (datagen values; "
               "all gradients: %.1f ms) + arithmetic loop (dependent 64-bit "
               "multiply-adds, %.0f steps/us per rank, calibrated with all "
               "%d ranks busy) at X = %.3f us/MiB\n", c->fill_s * 1e3,
               c->spin_per_us, c->nranks, c->us_per_mib);
    if (c->allreduce_s >= 0.0 && c->us_per_mib > 0.0)
        printf("# X chosen so that compute ~ 1.5 x one allreduce of all "
               "gradients (%.1f ms, measured at startup); set it with "
               "--compute-us-per-mb\n", c->allreduce_s * 1e3);
    else if (c->allreduce_s >= 0.0)
        printf("# X = 0: writing the gradients alone takes more than 1.5 x "
               "one allreduce of all gradients (%.1f ms, measured at "
               "startup); add compute with --compute-us-per-mb\n",
               c->allreduce_s * 1e3);
    else
        printf("# X given with --compute-us-per-mb\n");
    printf("# ms per iteration, max over ranks, mean over iterations; the "
           "rows take turns iteration by iteration\n# total: backprop start "
           "to all reduced; compute: emulated backprop alone; ready: in "
           "tnt_fusion_ready/tnt_iallreduce calls; longest: the longest "
           "such call; exposed: after the last one (one-shot: pack + "
           "allreduce + unpack)\n");
}

void fu_print_table(const fu_t *c, const fu_row_t *rows, size_t nrows,
                    size_t best)
{
    const fu_row_t *shot = NULL;
    char thr[32], wrong[24];
    for (size_t k = 0; k < nrows; k++)
        if (rows[k].kind == FU_ONE_SHOT)
            shot = &rows[k];
    printf("#\n#  %-10s %9s %7s %9s %9s %8s %8s %9s %8s %6s\n",
           "variant", "threshold", "buckets", "total", "compute", "ready",
           "longest", "exposed", "speedup", "#wrong");
    printf("#  %-10s %9s %7s %9s %9s %8s %8s %9s %8s\n", "", "", "",
           "(ms)", "(ms)", "(ms)", "(ms)", "(ms)", "vs 1shot");
    for (size_t k = 0; k < nrows; k++) {
        const fu_row_t *r = &rows[k];
        if (c->o->check)
            snprintf(wrong, sizeof wrong, "%" PRIu64, r->wrong);
        else
            snprintf(wrong, sizeof wrong, "N/A");
        printf("%c  %-10s %9s %7zu %9.2f %9.2f %8.2f %8.2f %9.2f %7.2fx "
               "%6s\n", k == best ? '*' : ' ', kind_name[r->kind],
               r->kind == FU_FUSED
                   ? fu_threshold_label(r->threshold, thr, sizeof thr) : "-",
               r->buckets, r->total * 1e3, r->compute * 1e3, r->ready * 1e3,
               r->longest * 1e3, r->exposed * 1e3,
               r->total > 0 ? shot->total / r->total : 0.0, wrong);
    }
    if (best < nrows)
        printf("# best threshold (*): %s\n",
               fu_threshold_label(rows[best].threshold, thr, sizeof thr));
    uint64_t w = 0;
    for (size_t k = 0; k < nrows; k++)
        w += rows[k].wrong;
    if (w)
        printf("# FAILED: %" PRIu64 " wrong elements\n", w);
}

/* The table for scripts; a failure to write is reported, not fatal. */
void fu_write_json(const fu_t *c, const fu_row_t *rows, size_t nrows,
                   size_t best)
{
    const bench_opts_t *o = c->o;
    FILE *f = fopen(o->json, "w");
    if (!f) {
        perror(o->json);
        return;
    }
    fprintf(f, "{\n  \"benchmark\": \"fusion\",\n  \"nranks\": %d,\n"
            "  \"model\": \"%s\",\n  \"tensors\": %zu,\n  \"params\": %zu,\n"
            "  \"bytes\": %zu,\n  \"contiguous\": %s,\n  \"op\": \"%s\",\n"
            "  \"iters\": %d,\n  \"warmup\": %d,\n  \"check\": %s,\n"
            "  \"compute\": \"%s\",\n"
            "  \"compute_us_per_mib\": %.6f,\n  \"spin_steps_per_us\": %.3f,"
            "\n  \"fill_ms\": %.3f,\n  \"startup_allreduce_ms\": ",
            c->nranks, c->m.label, c->m.n, c->m.params, c->m.bytes,
            o->fu.contiguous ? "true" : "false", bench_op_name(c->op),
            o->iters, o->warmup, o->check ? "true" : "false",
            o->fu.sleep_compute ? "sleep" : "spin", c->us_per_mib,
            c->spin_per_us, c->fill_s * 1e3);
    if (c->allreduce_s >= 0.0)
        fprintf(f, "%.3f,\n", c->allreduce_s * 1e3);
    else
        fprintf(f, "null,\n");
    fprintf(f, "  \"rows\": [");
    for (size_t k = 0; k < nrows; k++) {
        const fu_row_t *r = &rows[k];
        char thr[32];
        fprintf(f, "%s\n    {\"variant\": \"%s\", \"threshold\": ",
                k ? "," : "", kind_name[r->kind]);
        if (r->kind == FU_FUSED)
            fprintf(f, "\"%s\"",
                    fu_threshold_label(r->threshold, thr, sizeof thr));
        else
            fprintf(f, "null");
        fprintf(f, ", \"buckets\": %zu, \"total_ms\": %.3f, \"compute_ms\": "
                "%.3f, \"ready_ms\": %.3f, \"longest_ready_ms\": %.3f, "
                "\"exposed_ms\": %.3f, \"best\": %s, \"wrong\": ",
                r->buckets, r->total * 1e3, r->compute * 1e3,
                r->ready * 1e3, r->longest * 1e3, r->exposed * 1e3,
                k == best ? "true" : "false");
        if (o->check)
            fprintf(f, "%" PRIu64 "}", r->wrong);
        else
            fprintf(f, "null}");
    }
    fprintf(f, "\n  ]\n}\n");
    if (fclose(f) != 0)
        perror(o->json);
}
