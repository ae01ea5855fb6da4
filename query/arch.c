/* arch.c - the GPU architectures a question names ("Hopper", "H100",
 * "sm_90a", "Blackwell", "RTX 5090") as sm_ numbers, and what a
 * section's text says of them ("requires sm_90a", "compute_90"): an
 * architecture word favours that architecture's instructions (issue 22).
 * Counting "compute capability 9.0" too favoured the guides' sections
 * that say it in passing over those asked for (three dev questions worse;
 * rerank.c has the figures). */
#include "query/query_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Names of architectures and their chips, lower case, whole words, and
 * the sm_ numbers they stand for (0 ends a list). */
static const struct {
    const char *name;
    int sm[6];
} arch_names[] = {
    { "volta", { 70, 72 } },         { "v100", { 70 } },
    { "turing", { 75 } },            { "t4", { 75 } },
    { "ampere", { 80, 86, 87 } },    { "a100", { 80 } },   { "a10", { 86 } },
    { "a30", { 80 } },               { "a40", { 86 } },
    { "ada", { 89 } },               { "lovelace", { 89 } }, { "l4", { 89 } },
    { "l40", { 89 } },               { "l40s", { 89 } },   { "4090", { 89 } },
    { "hopper", { 90 } },            { "h100", { 90 } },   { "h200", { 90 } },
    { "h800", { 90 } },              { "gh200", { 90 } },  { "h20", { 90 } },
    { "blackwell", { 100, 101, 103, 110, 120, 121 } },
    { "b100", { 100 } },             { "b200", { 100 } },  { "gb200", { 100 } },
    { "b300", { 103 } },             { "gb300", { 103 } }, { "5090", { 120 } },
    { "thor", { 110 } },
};

static void add_sm(kb_arch_set *a, int sm)
{
    for (size_t i = 0; i < a->n; i++)
        if (a->sm[i] == sm)
            return;
    if (a->n < KB_ARCH_MAX)
        a->sm[a->n++] = sm;
}

/* The number of an "sm_NN" or "compute_NN" at s (lower case, len bytes
 * left), with *suffix its letter ('a', 'f') or 0, and *used the bytes
 * read; 0 when s holds none. */
static int sm_at(const char *s, size_t len, char *suffix, size_t *used)
{
    size_t p = 0;
    if (len > 3 && memcmp(s, "sm_", 3) == 0)
        p = 3;
    else if (len > 8 && memcmp(s, "compute_", 8) == 0)
        p = 8;
    else
        return 0;
    int v = 0;
    size_t d = p;
    while (d < len && d - p < 3 && isdigit((unsigned char)s[d]))
        v = v * 10 + (s[d++] - '0');
    if (d - p < 2 || (d < len && isdigit((unsigned char)s[d])))
        return 0;
    *suffix = d < len && (s[d] == 'a' || s[d] == 'f') ? s[d] : 0;
    *used = d + (*suffix != 0);
    return v;
}

void kb_arch_of_query(const char *query, kb_arch_set *out)
{
    memset(out, 0, sizeof *out);
    const char *p = query;
    while (*p) {
        while (*p && !isalnum((unsigned char)*p))
            p++;
        const char *w = p;
        while (*p && (isalnum((unsigned char)*p) || *p == '_'))
            p++;
        size_t len = (size_t)(p - w);
        char lw[24];
        if (!len || len >= sizeof lw)
            continue;
        for (size_t i = 0; i < len; i++)
            lw[i] = (char)tolower((unsigned char)w[i]);
        lw[len] = '\0';
        char suffix;
        size_t used;
        int sm = sm_at(lw, len, &suffix, &used);
        if (sm && used == len) {
            add_sm(out, sm);
            continue;
        }
        for (size_t k = 0; k < sizeof arch_names / sizeof *arch_names; k++)
            if (strcmp(lw, arch_names[k].name) == 0)
                for (size_t j = 0; j < 6 && arch_names[k].sm[j]; j++)
                    add_sm(out, arch_names[k].sm[j]);
    }
}

/* Whether an instruction for sm (with its suffix) runs on want's
 * architectures: one of them, or an older one's that carries forward (an
 * 'a' feature is that architecture's alone). */
static int runs_on(const kb_arch_set *want, int sm, char suffix, int *same)
{
    *same = 0;
    int older = 0;
    for (size_t i = 0; i < want->n; i++) {
        if (want->sm[i] == sm)
            *same = 1;
        else if (sm < want->sm[i] && suffix != 'a')
            older = 1;
    }
    return *same || older;
}

void kb_arch_scan(const kb_arch_set *want, const char *text, size_t len, int *state)
{
    for (size_t i = 0; i + 4 < len; i++) {
        char c = (char)tolower((unsigned char)text[i]);
        if ((c != 's' && c != 'c') || (i > 0 && isalnum((unsigned char)text[i - 1])))
            continue;
        char w[16];   /* what follows, lower case */
        size_t wl = len - i < sizeof w ? len - i : sizeof w;
        for (size_t k = 0; k < wl; k++)
            w[k] = (char)tolower((unsigned char)text[i + k]);
        char suffix = 0;
        size_t used = 0;
        int sm = sm_at(w, wl, &suffix, &used), same;
        if (!sm)
            continue;
        if (runs_on(want, sm, suffix, &same))
            *state |= same ? KB_ARCH_SAME : KB_ARCH_RUNS;
        else
            *state |= KB_ARCH_OTHER;
    }
}

double kb_arch_feature(int state)
{
    if (state & KB_ARCH_SAME)
        return 1;
    return (state & KB_ARCH_OTHER) && !(state & KB_ARCH_RUNS) ? -1 : 0;
}
