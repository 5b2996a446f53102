/*
 * The emitter of tnt-info: one call per value, two forms. JSON is written
 * with commas and escapes done here, so no section can write invalid
 * JSON; text is "key: value" lines indented by nesting, array elements
 * marked "-", rows (info_row) on one line, for people.
 */
#include <stdlib.h>
#include <string.h>

#include "tnt-info.h"

static void indent(info_out_t *o)
{
    for (int i = 1; i < o->depth; i++)
        fputs("  ", o->f);
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* Start a member: the comma, the indentation and the key (none in an
 * array, where text marks the element with "-"). In text a scalar's
 * value follows on the same line, an object's or array's members on the
 * next lines, except in a row (info_row), whose members share one line:
 * "- name: lo, address: 127.0.0.1". */
static void member(info_out_t *o, const char *key, int scalar)
{
    int d = o->depth;
    int in_array = d > 0 && o->array[d - 1];
    int first = d > 0 && o->count[d - 1] == 0;
    if (d > 0)
        o->count[d - 1]++;
    if (o->json) {
        if (d > 0 && !first)
            fputc(',', o->f);
        fputc('\n', o->f);
        for (int i = 0; i < d; i++)
            fputs("  ", o->f);
        if (!in_array) {
            json_string(o->f, key);
            fputs(": ", o->f);
        }
        return;
    }
    if (d > 0 && o->row[d - 1]) {
        fprintf(o->f, first ? "%s: " : ", %s: ", key);
        return;
    }
    indent(o);
    if (in_array)
        fputs(scalar ? "- " : "-", o->f);
    else
        fprintf(o->f, scalar ? "%s: " : "%s:", key);
}

/* After a scalar's value: the end of its text line, unless in a row. */
static void end_scalar(info_out_t *o)
{
    if (!o->json && !(o->depth > 0 && o->row[o->depth - 1]))
        fputc('\n', o->f);
}

static void open_level(info_out_t *o, const char *key, int array, int row)
{
    if (o->depth >= INFO_MAX_DEPTH)
        abort(); /* a section nests deeper than any does: a bug */
    if (o->depth > 0)
        member(o, key, row);
    if (o->json)
        fputc(array ? '[' : '{', o->f);
    else if (o->depth > 0 && !row)
        fputc('\n', o->f);
    o->count[o->depth] = 0;
    o->array[o->depth] = array;
    o->row[o->depth] = row;
    o->depth++;
}

void info_close(info_out_t *o)
{
    o->depth--;
    if (!o->json) {
        if (o->row[o->depth])
            fputc('\n', o->f);
        return;
    }
    if (o->count[o->depth] > 0) {
        fputc('\n', o->f);
        for (int i = 0; i < o->depth; i++)
            fputs("  ", o->f);
    }
    fputc(o->array[o->depth] ? ']' : '}', o->f);
}

void info_begin(info_out_t *o)
{
    o->depth = 0;
    open_level(o, NULL, 0, 0);
}

void info_end(info_out_t *o)
{
    info_close(o);
    if (o->json)
        fputc('\n', o->f);
    fflush(o->f);
}

void info_obj(info_out_t *o, const char *key) { open_level(o, key, 0, 0); }
void info_arr(info_out_t *o, const char *key) { open_level(o, key, 1, 0); }
void info_row(info_out_t *o) { open_level(o, NULL, 0, 1); }

void info_str(info_out_t *o, const char *key, const char *val)
{
    member(o, key, 1);
    if (o->json && val)
        json_string(o->f, val);
    else
        fputs(val ? val : o->json ? "null" : "-", o->f);
    end_scalar(o);
}

void info_int(info_out_t *o, const char *key, long long val)
{
    member(o, key, 1);
    fprintf(o->f, "%lld", val);
    end_scalar(o);
}

void info_bool(info_out_t *o, const char *key, int val)
{
    member(o, key, 1);
    fputs(o->json ? (val ? "true" : "false") : (val ? "yes" : "no"), o->f);
    end_scalar(o);
}
