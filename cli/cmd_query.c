/* cmd_query.c - kb query: ranked, cited passages for the shell or JSON. */
#include "cli/cli.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BOLD(cli) ((cli)->color ? "\033[1m" : "")
#define DIM(cli) ((cli)->color ? "\033[2m" : "")
#define CYAN(cli) ((cli)->color ? "\033[36m" : "")
#define HIT(cli) ((cli)->color ? "\033[1;33m" : "")
#define RESET(cli) ((cli)->color ? "\033[0m" : "")

/* the most of one heading a result's line shows */
#define HEADING_MAX 100
/* Near-identical results named under the one shown. */
#define SIMILAR_SHOWN 3

/* 1 if the word at s (len n) is one of the query's words (3+ letters). */
static int is_query_word(const char *query, const char *s, size_t n)
{
    if (n < 3)
        return 0;
    const char *q = query;
    while (*q) {
        while (*q && !isalnum((unsigned char)*q))
            q++;
        const char *w = q;
        while (*q && isalnum((unsigned char)*q))
            q++;
        if ((size_t)(q - w) == n && strncasecmp(w, s, n) == 0)
            return 1;
    }
    return 0;
}

/* Prints text indented, with the query's words highlighted on a terminal;
 * what a terminal would obey is escaped (kb_cli_put_safe). */
static void print_text(const kb_cli *cli, const char *text, const char *query)
{
    fputs("   ", stdout);
    const char *p = text;
    while (*p) {
        const char *w = p;
        if (isalnum((unsigned char)*p)) {
            while (*p && isalnum((unsigned char)*p))
                p++;
            size_t n = (size_t)(p - w);
            int hit = cli->color && is_query_word(query, w, n);
            printf("%s%.*s%s", hit ? HIT(cli) : "", (int)n, w, hit ? RESET(cli) : "");
        } else if (*p == '\n') {
            fputs("\n   ", stdout);
            p++;
        } else {
            while (*p && *p != '\n' && !isalnum((unsigned char)*p))
                p++;
            kb_cli_put_safe(stdout, w, (size_t)(p - w));
        }
    }
    putchar('\n');
}

/* A heading of a result for the terminal: a long one (a paper's title
 * list, a generated page's run-on heading) cut at about max bytes, on a
 * character boundary, with an ellipsis. */
static void put_heading(const char *h, size_t max)
{
    size_t n = strlen(h);
    if (n <= max) {
        kb_cli_put_safe(stdout, h, n);
        return;
    }
    while (max > 0 && ((unsigned char)h[max] & 0xC0) == 0x80)
        max--;
    kb_cli_put_safe(stdout, h, max);
    fputs("\xe2\x80\xa6", stdout);   /* … */
}

/* The near-identical results listed with x, by their own section titles
 * and chunk ids ('kb get ID' shows one), the first few of them. */
static void print_similar(const kb_cli *cli, const kb_result *x)
{
    if (!x->nsimilar)
        return;
    printf("   %salso, near-identical: ", DIM(cli));
    size_t shown = x->nsimilar < SIMILAR_SHOWN ? x->nsimilar : SIMILAR_SHOWN;
    for (size_t j = 0; j < shown; j++) {
        const kb_result *y = &x->similar[j];
        fputs(j ? "; " : "", stdout);
        put_heading(y->depth ? y->heading_path[y->depth - 1] : y->title, HEADING_MAX);
        printf(" (chunk %lld)", (long long)y->chunk_id);
    }
    if (x->nsimilar > shown)
        printf("; %zu more (--json lists them)", x->nsimilar - shown);
    printf("%s\n", RESET(cli));
}

/* One result: "LABEL. [source] heading path", its links, its text. */
static void print_result(const kb_cli *cli, const kb_query_opts *opts, const kb_result *x,
                         const char *label, size_t rank, int explain)
{
    printf("%s%s%zu.%s %s[", BOLD(cli), label, rank, RESET(cli), CYAN(cli));
    kb_cli_puts_safe(stdout, x->source);
    printf("]%s ", RESET(cli));
    for (size_t d = 0; d < x->depth; d++) {
        printf("%s%s", d ? " > " : "", d + 1 == x->depth ? BOLD(cli) : "");
        put_heading(x->heading_path[d], HEADING_MAX);
    }
    printf("%s  %s(%s, chunk %lld)%s\n", RESET(cli), DIM(cli), kb_kind_name(x->kind),
           (long long)x->chunk_id, RESET(cli));
    const char *lines[] = { x->url, x->path };
    for (size_t l = 0; l < 2; l++) {
        if (!*lines[l])
            continue;
        printf("   %s", DIM(cli));
        kb_cli_puts_safe(stdout, lines[l]);
        printf("%s\n", RESET(cli));
    }
    print_text(cli, x->text, opts->text);
    print_similar(cli, x);
    if (explain) {
        printf("   %schunk %lld, score %.4f; lexical ", DIM(cli),
               (long long)x->chunk_id, x->score);
        if (x->lexical_rank)
            printf("#%d (bm25 %.3f)", x->lexical_rank, x->lexical_score);
        else
            printf("-");
        printf(", vector ");
        if (x->vector_rank)
            printf("#%d (cos %.3f)", x->vector_rank, x->vector_score);
        else
            printf("-");
        printf("%s\n", RESET(cli));
    }
    putchar('\n');
}

/* --explain: what the reranking stage did. */
static void print_rerank(const kb_cli *cli, const kb_rerank_info *x)
{
    printf("%sreranked: ", DIM(cli));
    if (x->stage == KB_RERANK_LLM) {
        printf("llm '");
        kb_cli_puts_safe(stdout, x->model ? x->model : "");
        printf("' over the best %zu sections", x->pool);
        if (x->fallback[0]) {
            printf(", which failed: kb's own order (");
            kb_cli_puts_safe(stdout, x->fallback);
            printf(")");
        } else if (x->cached) {
            printf(", %zu ordered (cached)", x->ordered);
        } else {
            printf(", %zu ordered (%.0f ms)", x->ordered, x->llm_ms);
        }
    } else if (x->stage == KB_RERANK_LOCAL) {
        printf(x->remote ? "local stage, then KB_RERANK_URL's cross-encoder" : "local stage");
    } else {
        printf("no (fusion's order)");
    }
    printf("%s\n", RESET(cli));
}

static void print_human(const kb_cli *cli, const kb_query_opts *opts,
                        const kb_results *r, int explain)
{
    if (r->n == 0 && r->nskills == 0) {
        fputs("no results for '", stdout);
        kb_cli_puts_safe(stdout, opts->text);
        fputs("'\n", stdout);
        return;
    }
    for (size_t i = 0; i < r->n; i++)
        print_result(cli, opts, &r->items[i], "", i + 1, explain);
    if (r->nskills)   /* apart: the library's techniques, after the documentation */
        printf("%sskills from the library ('kb skill show NAME' has the whole):%s\n\n",
               BOLD(cli), RESET(cli));
    /* numbered on from the results: kb get @N reaches them too */
    for (size_t i = 0; i < r->nskills; i++)
        print_result(cli, opts, &r->skills[i], "skill ", r->n + i + 1, explain);
    if (cli->quiet && !explain)
        return;
    printf("%s%zu result%s", DIM(cli), r->n, r->n == 1 ? "" : "s");
    if (r->nskills)
        printf(" and %zu skill%s", r->nskills, r->nskills == 1 ? "" : "s");
    printf(" in %.1f ms (%s)", r->took_ms, kb_mode_name(r->mode));
    if (explain)
        printf(": lexical %.1f ms, query embedding %.1f ms (in parallel), "
               "vector search %.1f ms, fusion and results %.1f ms", r->lexical_ms,
               r->embed_ms, r->vector_ms, r->results_ms);
    printf("%s\n", RESET(cli));
    if (explain)
        print_rerank(cli, &r->rerank);
}

/* What --expand searched beside the query, dimmed, after the results. */
static void print_expansion(const kb_cli *cli, const kb_expansion *x)
{
    printf("%sexpanded by '", DIM(cli));
    kb_cli_puts_safe(stdout, x->model);
    if (x->cached)
        printf("' (cached)");
    else
        printf("' (%.0f ms)", x->llm_ms);
    if (x->error) {
        printf(": none used (%s)", x->error);   /* also warned on stderr */
    }
    for (size_t i = 0; i < x->n; i++) {
        const char *t = x->searches[i].text;
        printf("%s %s \"", i ? ";" : ":", kb_search_type_name(x->searches[i].type));
        size_t n = (size_t)kb_utf8_cut(t, 100);
        kb_cli_put_safe(stdout, t, n);
        printf("%s\"", t[n] ? "\xe2\x80\xa6" : "");
    }
    printf("%s\n", RESET(cli));
}

/* Keeps the chunk ids of a query's results, best first, then its skills
 * (as they are numbered), for 'kb get @N': the file last-query in the
 * state folder, its first line the KB's folder, its second "# " and the
 * query (for kb get's messages); with --json too, so that @N is never an
 * older query's. A KB that cannot keep it loses nothing but the
 * shorthand. */
typedef struct {
    const kb_cli *cli;
    const char *text;       /* the query */
    long long *ids;
    size_t n;
} last_query;

static void save_last(const last_query *q, const kb_store *store)
{
    const kb_cli *cli = q->cli;
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = kb_buf_printf(&b, "%s\n# ", kb_store_dir(store));
    for (const char *t = q->text; rc == KB_OK && *t; t++)   /* one line */
        rc = kb_buf_putc(&b, *t == '\n' || *t == '\r' ? ' ' : *t);
    if (rc == KB_OK)
        rc = kb_buf_putc(&b, '\n');
    for (size_t i = 0; i < q->n && rc == KB_OK; i++)
        rc = kb_buf_printf(&b, "%lld\n", q->ids[i]);
    char *path = kb_path_join(cli->config->state_dir, "last-query");
    if (rc == KB_OK && path && kb_mkdirs(cli->config->state_dir, &err) == KB_OK)
        rc = kb_write_file_atomic(path, b.data, b.len, &err);
    if (rc != KB_OK || err.msg[0])
        kb_log_debug("cannot keep the last query: %s", err.msg[0] ? err.msg : "no memory");
    free(path);
    kb_buf_release(&b);
}

/* save_last for a list printed: its results, then its skills. */
static void save_results(const kb_cli *cli, const char *text, const kb_store *store,
                         const kb_results *r)
{
    long long *ids = calloc(r->n + r->nskills + 1, sizeof *ids);
    if (!ids)
        return;
    for (size_t i = 0; i < r->n; i++)
        ids[i] = r->items[i].chunk_id;
    for (size_t i = 0; i < r->nskills; i++)
        ids[r->n + i] = r->skills[i].chunk_id;
    last_query q = { cli, text, ids, r->n + r->nskills };
    save_last(&q, store);
    free(ids);
}

/* cmd_tool_seen_fn: save_last for the search tool's object (--json): the
 * chunk_id of each of its results, then of its skills. */
static void save_json(void *ctx, kb_store *store, const cJSON *out)
{
    last_query *q = ctx;
    const cJSON *lists[] = { cJSON_GetObjectItemCaseSensitive(out, "results"),
                             cJSON_GetObjectItemCaseSensitive(out, "skills") };
    size_t max = (size_t)cJSON_GetArraySize(lists[0]) + (size_t)cJSON_GetArraySize(lists[1]);
    if (!(q->ids = calloc(max + 1, sizeof *q->ids)))
        return;
    q->n = 0;
    for (size_t l = 0; l < 2; l++) {
        const cJSON *e;
        cJSON_ArrayForEach(e, lists[l]) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "chunk_id");
            if (cJSON_IsNumber(id) && q->n < max)
                q->ids[q->n++] = (long long)id->valuedouble;
        }
    }
    save_last(q, store);
    free(q->ids);
    q->ids = NULL;
}

/* The search tool's arguments for the command line's options (mode NULL:
 * not given; budget 0: none). NULL when out of memory. */
static cJSON *search_args(const kb_query_opts *opts, const char *mode, long budget,
                          int explain)
{
    cJSON *a = cJSON_CreateObject(), *arr = NULL;
    kb_rerank_kind rerank = opts->no_rerank ? KB_RERANK_NONE : opts->rerank;
    int ok = a && cJSON_AddStringToObject(a, "query", opts->text) &&
             (!explain || cJSON_AddBoolToObject(a, "explain", 1)) &&
             (rerank == KB_RERANK_DEFAULT ||
              cJSON_AddStringToObject(a, "rerank", kb_rerank_kind_name(rerank))) &&
             cJSON_AddNumberToObject(a, "k", opts->k) &&
             (!mode || cJSON_AddStringToObject(a, "mode", mode)) &&
             (!budget || cJSON_AddNumberToObject(a, "budget_tokens", (double)budget));
    if (ok && opts->filter.nsources)
        ok = (arr = cJSON_AddArrayToObject(a, "sources")) != NULL;
    for (size_t i = 0; ok && i < opts->filter.nsources; i++)
        ok = cJSON_AddItemToArray(arr, cJSON_CreateString(opts->filter.sources[i]));
    if (ok && opts->filter.kinds)
        ok = (arr = cJSON_AddArrayToObject(a, "kinds")) != NULL;
    for (int k = KB_KIND_TEXT; ok && k <= KB_KIND_SKILL; k++)
        if (opts->filter.kinds & (1u << k))
            ok = cJSON_AddItemToArray(arr, cJSON_CreateString(kb_kind_name((kb_kind)k)));
    if (ok && opts->nsearches)
        ok = (arr = cJSON_AddArrayToObject(a, "searches")) != NULL;
    for (size_t i = 0; ok && i < opts->nsearches; i++) {
        cJSON *s = cJSON_CreateObject();
        ok = cJSON_AddItemToArray(arr, s) &&
             cJSON_AddStringToObject(s, "type", kb_search_type_name(opts->searches[i].type)) &&
             cJSON_AddStringToObject(s, "query", opts->searches[i].text);
    }
    if (!ok) {
        cJSON_Delete(a);
        return NULL;
    }
    return a;
}

static const kb_option query_options[] = {
    { "k", 'k', "N", "number of results, 1-50 (default 10)" },
    { "mode", KB_OPT_LONG('m'), "MODE", "hybrid (default), lexical or vector" },
    { "source", KB_OPT_LONG('s'), "ID", "only this source (repeatable)" },
    { "kind", KB_OPT_LONG('K'), "KIND", "only text, code, table, paper or skill (repeatable)" },
    { "json", KB_OPT_LONG('j'), NULL, "one JSON object (docs/query.md)" },
    { "explain", KB_OPT_LONG('e'), NULL, "show each list's rank and score" },
    { "full", KB_OPT_LONG('f'), NULL, "print whole chunks instead of snippets" },
    { "no-rerank", KB_OPT_LONG('R'), NULL, "hybrid in fusion's order, without the reranking\n"
      "stage (--rerank none)" },
    { "rerank", KB_OPT_LONG('r'), "STAGE", "local (default; KB_RERANK), llm (KB_LLM_URL's model\n"
      "orders the best 30 sections: one request, cached) or none" },
    { "lex", KB_OPT_LONG('L'), "TEXT", "also search these keywords, fused (repeatable)" },
    { "vec", KB_OPT_LONG('V'), "TEXT", "also search this phrase by meaning (repeatable)" },
    { "hyde", KB_OPT_LONG('H'), "TEXT", "also search by a hypothetical passage (repeatable);\n"
      "at most 10 of --lex, --vec, --hyde" },
    { "expand", KB_OPT_LONG('X'), NULL, "also search an LLM's rewrites of the query (a\n"
      "hypothetical passage, keywords), fused; KB_LLM_URL names\n"
      "the LLM, the KB caches its answers" },
    { "budget", KB_OPT_LONG('b'), "TOKENS", "with --json: whole results, best first, within\n"
      "about TOKENS tokens (1000-200000; default: no limit)" },
    { "file", KB_OPT_LONG('F'), "FILE", "the query is FILE's text ('-': standard input)" },
    { "exit-code", KB_OPT_LONG('E'), NULL, "grep's convention, for scripts: exit 1 when nothing\n"
      "matches, 2 on an error" },
    { NULL, 0, NULL, NULL },
};

static int cmd_query(int argc, char **argv, const kb_cli *cli, const kb_command *self);

const kb_command kb_cmd_query = {
    .name = "query",
    .fn = cmd_query,
    .usage = "kb query [options] [--] TEXT... | -",
    .summary = "search the KB; prints ranked, cited passages",
    .options = query_options,
    .notes = "A query that starts with '-' goes after '--': kb query -- -arch=sm_90\n"
             "'-' alone reads the query from standard input: make 2>&1 | kb query -\n"
             "'kb get @N' prints the Nth result of the last query in full.\n"
             "Exit status: 0, also when nothing matches (with --exit-code: 1), 1 on an\n"
             "error, 2 on a usage error (with --exit-code: 2 on any error).\n",
    .operands = "text",
};

/* What the command line asks for: the search's options and what the
 * command does with them. */
typedef struct {
    kb_query_opts opts;
    kb_search searches[KB_QUERY_MAX_SEARCHES];
    int json, explain, expand;
    int exit_code;         /* --exit-code: grep's exit status */
    size_t found;          /* results and skills found */
    const char *mode;      /* as given; NULL: not given */
    const char *file;      /* --file, or "-" for standard input */
    long budget;           /* 0: none */
} query_args;

/* --source a,b is --source a --source b. Returns -1 to go on, or the exit
 * status of the usage error it reported. */
static int add_sources(const kb_command *self, kb_filter *filter, char *arg)
{
    for (char *id = arg, *next; id; id = next) {
        if ((next = strchr(id, ',')) != NULL)
            *next++ = '\0';
        if (!*id)
            return kb_cli_usage_error(self, "an empty --source");
        if (filter->nsources == KB_FILTER_MAX_SOURCES)
            return kb_cli_usage_error(self, "too many sources (at most %d)",
                                      KB_FILTER_MAX_SOURCES);
        filter->sources[filter->nsources++] = id;
    }
    return -1;
}

/* --lex, --vec, --hyde (option c): one more sub-query. Returns -1 to go
 * on, or the exit status of the usage error it reported. */
static int add_search(const kb_command *self, query_args *a, int c,
                      const char *text)
{
    if (a->opts.nsearches == KB_QUERY_MAX_SEARCHES)
        return kb_cli_usage_error(self, "at most %d sub-queries (--lex, "
                                  "--vec, --hyde)", KB_QUERY_MAX_SEARCHES);
    if (!*text)
        return kb_cli_usage_error(self, "an empty sub-query");
    kb_search *s = &a->searches[a->opts.nsearches++];
    s->type = c == KB_OPT_LONG('L') ? KB_SEARCH_LEX
            : c == KB_OPT_LONG('V') ? KB_SEARCH_VEC
            : KB_SEARCH_HYDE;
    s->text = text;
    return -1;
}

/* One option c of the command line (its argument arg) into a. Returns -1
 * to go on, or the exit status of the usage error it reported. */
static int take_option(const kb_command *self, query_args *a, int c,
                       const char *arg)
{
    long k;
    kb_kind kind;
    switch (c) {
    case 'k':
        /* one range for the list and --json (the search tool's) */
        if (kb_parse_long(arg, 1, KB_TOOL_SEARCH_K_MAX, &k) != KB_OK)
            return kb_cli_usage_error(self, "-k wants a number from 1 to %d, "
                                      "not '%s'", KB_TOOL_SEARCH_K_MAX, arg);
        a->opts.k = (int)k;
        break;
    case KB_OPT_LONG('m'):
        a->mode = arg;
        if (kb_mode_parse(arg, &a->opts.mode) != 0)
            return kb_cli_usage_error(self, "unknown mode '%s' (hybrid, "
                                      "lexical, vector)", arg);
        break;
    case KB_OPT_LONG('s'):
        return add_sources(self, &a->opts.filter, (char *)arg);
    case KB_OPT_LONG('K'):
        if (kb_kind_parse(arg, &kind) != 0)
            return kb_cli_usage_error(self, "unknown kind '%s' (text, code, "
                                      "table, paper, skill)", arg);
        a->opts.filter.kinds |= 1u << kind;
        break;
    case KB_OPT_LONG('b'):
        if (kb_parse_long(arg, KB_TOOL_BUDGET_MIN, KB_TOOL_BUDGET_MAX,
                          &a->budget) != KB_OK)
            return kb_cli_usage_error(self, "--budget wants a number of tokens "
                                      "from %d to %d, not '%s'", KB_TOOL_BUDGET_MIN,
                                      KB_TOOL_BUDGET_MAX, arg);
        break;
    case KB_OPT_LONG('L'):
    case KB_OPT_LONG('V'):
    case KB_OPT_LONG('H'):
        return add_search(self, a, c, arg);
    case KB_OPT_LONG('F'): a->file = arg; break;
    case KB_OPT_LONG('j'): a->json = 1; break;
    case KB_OPT_LONG('E'): a->exit_code = 1; break;
    case KB_OPT_LONG('e'): a->explain = 1; break;
    case KB_OPT_LONG('f'): a->opts.snippet = 0; break;
    case KB_OPT_LONG('R'): a->opts.no_rerank = 1; break;
    case KB_OPT_LONG('r'):
        if (kb_rerank_kind_parse(arg, &a->opts.rerank) != 0)
            return kb_cli_usage_error(self, "unknown reranking stage '%s' (local, "
                                      "llm, none)", arg);
        break;
    case KB_OPT_LONG('X'): a->expand = 1; break;
    }
    return -1;
}

/* Parses the command line into a, and *ind to the first word of the
 * query text. Returns -1 to go on, or the exit status to stop with: a
 * usage error it has reported (2), --help or --version printed (0). */
static int parse_options(int argc, char **argv, const kb_cli *cli,
                         const kb_command *self, query_args *a, int *ind)
{
    int c, stop = -1;
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    while (stop < 0 && (c = kb_getopt_next(&g)) > 0)
        stop = take_option(self, a, c, g.arg);
    if (stop >= 0)
        return stop;
    if (c < 0)
        return g.status;
    *ind = g.ind;
    if (!a->file && g.ind + 1 == argc && strcmp(argv[g.ind], "-") == 0)
        a->file = "-";   /* kb query - : standard input */
    else if (a->file && g.ind < argc)
        return kb_cli_usage_error(self, "the query comes from --file or the command "
                                  "line, not both");
    if (!a->file && g.ind >= argc)
        return kb_cli_usage_error(self, "no query text given");
    if (a->budget && !a->json)
        return kb_cli_usage_error(self, "--budget needs --json");
    kb_rerank_kind stage;   /* likewise for the llm stage, and a bad KB_RERANK */
    kb_err rerr;
    kb_err_clear(&rerr);
    if (kb_query_rerank_resolve(cli->config, a->opts.no_rerank ? KB_RERANK_NONE
                                                               : a->opts.rerank,
                                NULL, &stage, &rerr) != KB_OK)
        return kb_cli_usage_error(self, "%s", rerr.msg);
    if (a->expand) {   /* no LLM to ask: a usage error, before anything runs */
        kb_err xerr;
        kb_err_clear(&xerr);
        if (kb_query_expand_check(cli->config, &xerr) != KB_OK)
            return kb_cli_usage_error(self, "%s", xerr.msg);
    }
    return -1;
}

/* The query's text into text: --file's, standard input's, or the words
 * argv[ind...] joined by spaces; a->opts.text points to it. Returns -1 to
 * go on, or the exit status of the error it reported (no words to
 * search for is a usage error). */
static int read_text(int argc, char **argv, int ind, const kb_command *self,
                     query_args *a, kb_buf *text)
{
    if (a->file) {
        kb_err ferr;
        kb_err_clear(&ferr);
        kb_rc frc = kb_read_file(strcmp(a->file, "-") == 0 ? "/dev/stdin" : a->file,
                                 1 << 16, text, &ferr);
        if (frc != KB_OK) {
            if (strstr(ferr.msg, "too large"))
                return kb_cli_usage_error(self, "the query text is longer than %d bytes",
                                          1 << 16);
            return kb_cli_fail(&ferr);
        }
    }
    for (int i = ind; !a->file && i < argc; i++)
        if ((i > ind && kb_buf_putc(text, ' ') != KB_OK) ||
            kb_buf_puts(text, argv[i]) != KB_OK)
            return kb_cli_usage_error(self, "the query text is longer than %d bytes",
                                      1 << 16);
    if (!text->data && kb_buf_puts(text, "") != KB_OK)
        return kb_cli_usage_error(self, "out of memory");
    a->opts.text = text->data;
    /* blanks are no query, as "" is not; punctuation alone has no words */
    if (!text->data[strspn(text->data, " \t\r\n\v\f")])
        return kb_cli_usage_error(self, "empty query");
    if (!kb_query_has_words(text->data))
        return kb_cli_usage_error(self, "the query '%.80s' has no words to search "
                                  "for", text->data);
    return -1;
}

/* A --source the KB lacks is a usage error, said before the search.
 * Returns -1 to go on, or the exit status of the error it reported. */
static int check_sources(const kb_cli *cli, const kb_command *self,
                         const kb_filter *filter)
{
    if (!filter->nsources)
        return -1;
    kb_err serr;
    kb_err_clear(&serr);
    kb_store *s = NULL;
    kb_rc src = kb_cli_open_store(cli, KB_STORE_READONLY, &s, &serr);
    if (src == KB_OK)
        src = kb_query_check_sources(s, filter, &serr);
    kb_store_close(s);
    if (src == KB_OK)
        return -1;
    return src == KB_ERR_USAGE && strncmp(serr.msg, "unknown source", 14) == 0
               ? kb_cli_usage_error(self, "%s", serr.msg) : kb_cli_fail(&serr);
}

/* Searches (after --expand's rewrites) and prints: with --json the search
 * tool's object, else the ranked list. Returns the exit status. */
static int run_query(const kb_cli *cli, query_args *a)
{
    kb_err err;
    kb_err_clear(&err);
    kb_store *store = NULL;
    kb_results res = { 0 };
    kb_expansion x;
    kb_expansion_init(&x);
    kb_rc rc = KB_OK;
    int status = -1;
    if (a->expand) {   /* the LLM's rewrites join the sub-queries */
        rc = kb_cli_open_store(cli, KB_STORE_READONLY, &store, &err);
        if (rc == KB_OK)
            rc = kb_query_expand(store, cli->config, a->opts.text, &x, &err);
        if (rc == KB_OK)
            kb_expansion_apply(&x, a->searches, &a->opts.nsearches);
    }
    if (rc == KB_OK && a->json) {   /* the search tool's object, whole chunks */
        cJSON *args = search_args(&a->opts, a->mode, a->budget, a->explain);
        cJSON *xj = a->expand ? kb_expansion_json(&x) : NULL;
        if (a->expand && !xj) {
            cJSON_Delete(args);
            args = NULL;   /* out of memory, said by cmd_tool_json_on */
        }
        last_query q = { cli, a->opts.text, NULL, 0 };
        status = cmd_tool_json_on(cli, store, "search", args, "expansion", xj, save_json, &q);
        a->found = q.n;
    } else if (rc == KB_OK && !store) {
        rc = kb_cli_open_store(cli, KB_STORE_READONLY, &store, &err);
    }
    if (rc == KB_OK && status < 0)
        rc = kb_query_run(store, NULL, &a->opts, &res, &err);
    if (rc == KB_OK && status < 0) {
        print_human(cli, &a->opts, &res, a->explain);
        if (a->expand && !cli->quiet)
            print_expansion(cli, &x);
        save_results(cli, a->opts.text, store, &res);
        a->found = res.n + res.nskills;
    }
    kb_results_release(&res);
    kb_expansion_release(&x);
    kb_store_close(store);
    if (status >= 0)
        return status;
    return rc == KB_OK ? 0 : kb_cli_fail(&err);
}

static int cmd_query(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    query_args a = { .budget = 0 };
    kb_query_opts_init(&a.opts);
    a.opts.snippet = 1;
    a.opts.k = 10;
    a.opts.searches = a.searches;
    a.opts.config = cli->config;
    int ind = 0;
    int status = parse_options(argc, argv, cli, self, &a, &ind);
    if (status >= 0)
        return status;
    kb_buf text;
    kb_buf_init(&text, 1 << 16);
    status = read_text(argc, argv, ind, self, &a, &text);
    if (status < 0)
        status = check_sources(cli, self, &a.opts.filter);
    if (status < 0)
        status = run_query(cli, &a);
    kb_buf_release(&text);
    if (a.exit_code)   /* grep's: 0 found, 1 nothing found, 2 trouble */
        status = status ? 2 : a.found ? 0 : 1;
    return status;
}
