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
                         const char *label, int explain)
{
    printf("%s%s%d.%s %s[", BOLD(cli), label, x->rank, RESET(cli), CYAN(cli));
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
        print_result(cli, opts, &r->items[i], "", explain);
    if (r->nskills)   /* apart: the library's techniques, after the documentation */
        printf("%sskills from the library ('kb skill show NAME' has the whole):%s\n\n",
               BOLD(cli), RESET(cli));
    for (size_t i = 0; i < r->nskills; i++)
        print_result(cli, opts, &r->skills[i], "skill ", explain);
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

/* Keeps the results' chunk ids, best first, for 'kb get @N': the file
 * last-query in the state folder, its first line the KB's folder. A KB
 * that cannot keep it loses nothing but the shorthand. */
static void save_last(const kb_cli *cli, const kb_store *store, const kb_results *r)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = kb_buf_printf(&b, "%s\n", kb_store_dir(store));
    for (size_t i = 0; i < r->n && rc == KB_OK; i++)
        rc = kb_buf_printf(&b, "%lld\n", (long long)r->items[i].chunk_id);
    char *path = kb_path_join(cli->config->state_dir, "last-query");
    if (rc == KB_OK && path && kb_mkdirs(cli->config->state_dir, &err) == KB_OK)
        rc = kb_write_file_atomic(path, b.data, b.len, &err);
    if (rc != KB_OK || err.msg[0])
        kb_log_debug("cannot keep the last query: %s", err.msg[0] ? err.msg : "no memory");
    free(path);
    kb_buf_release(&b);
}

/* The search tool's arguments for the command line's options (mode NULL:
 * not given; budget 0: none). NULL when out of memory. */
static cJSON *search_args(const kb_query_opts *opts, const char *mode, long budget,
                          int explain)
{
    cJSON *a = cJSON_CreateObject(), *arr = NULL;
    int ok = a && cJSON_AddStringToObject(a, "query", opts->text) &&
             (!explain || cJSON_AddBoolToObject(a, "explain", 1)) &&
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
    { "k", 'k', "N", "number of results (default 10)" },
    { "mode", KB_OPT_LONG('m'), "MODE", "hybrid (default), lexical or vector" },
    { "source", KB_OPT_LONG('s'), "ID", "only this source (repeatable)" },
    { "kind", KB_OPT_LONG('K'), "KIND", "only text, code, table, paper or skill (repeatable)" },
    { "json", KB_OPT_LONG('j'), NULL, "one JSON object (see README)" },
    { "explain", KB_OPT_LONG('e'), NULL, "show each list's rank and score" },
    { "full", KB_OPT_LONG('f'), NULL, "print whole chunks instead of snippets" },
    { "no-rerank", KB_OPT_LONG('R'), NULL, "hybrid in fusion's order, without the reranking\n"
      "stage" },
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
             "'kb get @N' prints the Nth result of the last query in full.\n",
    .operands = "text",
};

static int cmd_query(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    kb_query_opts opts;
    kb_query_opts_init(&opts);
    opts.snippet = 1;
    kb_search searches[KB_QUERY_MAX_SEARCHES];
    opts.searches = searches;
    int json = 0, explain = 0, expand = 0, c;
    const char *mode = NULL, *file = NULL;
    long k = 10, budget = 0;
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    while ((c = kb_getopt_next(&g)) > 0) {
        switch (c) {
        case 'k':
            if (kb_parse_long(g.arg, 1, 1000, &k) != KB_OK)
                return kb_cli_usage_error(self, "-k wants a number from 1 to "
                                          "1000, not '%s'", g.arg);
            break;
        case KB_OPT_LONG('m'):
            mode = g.arg;
            if (kb_mode_parse(g.arg, &opts.mode) != 0)
                return kb_cli_usage_error(self, "unknown mode '%s' (hybrid, "
                                          "lexical, vector)", g.arg);
            break;
        case KB_OPT_LONG('s'):
            /* --source a,b is --source a --source b */
            for (char *id = (char *)g.arg, *next; id; id = next) {
                if ((next = strchr(id, ',')) != NULL)
                    *next++ = '\0';
                if (!*id)
                    return kb_cli_usage_error(self, "an empty --source");
                if (opts.filter.nsources == KB_FILTER_MAX_SOURCES)
                    return kb_cli_usage_error(self, "too many sources (at most %d)",
                                              KB_FILTER_MAX_SOURCES);
                opts.filter.sources[opts.filter.nsources++] = id;
            }
            break;
        case KB_OPT_LONG('K'): {
            kb_kind kind;
            if (kb_kind_parse(g.arg, &kind) != 0)
                return kb_cli_usage_error(self, "unknown kind '%s' (text, code, "
                                          "table, paper, skill)", g.arg);
            opts.filter.kinds |= 1u << kind;
            break;
        }
        case KB_OPT_LONG('b'):
            /* the number's range is the search tool's to check */
            if (kb_parse_long(g.arg, 1, 1000000000L, &budget) != KB_OK)
                return kb_cli_usage_error(self, "--budget wants a number of "
                                          "tokens, not '%s'", g.arg);
            break;
        case KB_OPT_LONG('L'):
        case KB_OPT_LONG('V'):
        case KB_OPT_LONG('H'):
            if (opts.nsearches == KB_QUERY_MAX_SEARCHES)
                return kb_cli_usage_error(self, "at most %d sub-queries (--lex, "
                                          "--vec, --hyde)", KB_QUERY_MAX_SEARCHES);
            if (!*g.arg)
                return kb_cli_usage_error(self, "an empty sub-query");
            searches[opts.nsearches].type = c == KB_OPT_LONG('L') ? KB_SEARCH_LEX
                                          : c == KB_OPT_LONG('V') ? KB_SEARCH_VEC
                                          : KB_SEARCH_HYDE;
            searches[opts.nsearches++].text = g.arg;
            break;
        case KB_OPT_LONG('F'): file = g.arg; break;
        case KB_OPT_LONG('j'): json = 1; break;
        case KB_OPT_LONG('e'): explain = 1; break;
        case KB_OPT_LONG('f'): opts.snippet = 0; break;
        case KB_OPT_LONG('R'): opts.no_rerank = 1; break;
        case KB_OPT_LONG('X'): expand = 1; break;
        }
    }
    if (c < 0)
        return g.status;
    if (!file && g.ind + 1 == argc && strcmp(argv[g.ind], "-") == 0)
        file = "-";   /* kb query - : standard input */
    else if (file && g.ind < argc)
        return kb_cli_usage_error(self, "the query comes from --file or the command "
                                  "line, not both");
    if (!file && g.ind >= argc)
        return kb_cli_usage_error(self, "no query text given");
    if (budget && !json)
        return kb_cli_usage_error(self, "--budget needs --json");
    if (expand) {   /* no LLM to ask: a usage error, before anything runs */
        kb_err xerr;
        kb_err_clear(&xerr);
        if (kb_query_expand_check(cli->config, &xerr) != KB_OK)
            return kb_cli_usage_error(self, "%s", xerr.msg);
    }
    opts.k = (int)k;
    kb_buf text;
    kb_buf_init(&text, 1 << 16);
    if (file) {
        kb_err ferr;
        kb_err_clear(&ferr);
        kb_rc frc = kb_read_file(strcmp(file, "-") == 0 ? "/dev/stdin" : file, 1 << 16,
                                 &text, &ferr);
        if (frc != KB_OK) {
            kb_buf_release(&text);
            if (strstr(ferr.msg, "too large"))
                return kb_cli_usage_error(self, "the query text is longer than %d bytes",
                                          1 << 16);
            return kb_cli_fail(&ferr);
        }
    }
    for (int i = g.ind; !file && i < argc; i++)
        if ((i > g.ind && kb_buf_putc(&text, ' ') != KB_OK) ||
            kb_buf_puts(&text, argv[i]) != KB_OK) {
            kb_buf_release(&text);
            return kb_cli_usage_error(self, "the query text is longer than %d bytes",
                                      1 << 16);
        }
    if (!text.data && kb_buf_puts(&text, "") != KB_OK) {
        kb_buf_release(&text);
        return kb_cli_usage_error(self, "out of memory");
    }
    opts.text = text.data;
    opts.config = cli->config;
    /* blanks are no query, as "" is not; punctuation alone has no words */
    if (!text.data[strspn(text.data, " \t\r\n\v\f")]) {
        kb_buf_release(&text);
        return kb_cli_usage_error(self, "empty query");
    }
    if (!kb_query_has_words(text.data)) {
        int status = kb_cli_usage_error(self, "the query '%.80s' has no words to search "
                                        "for", text.data);
        kb_buf_release(&text);
        return status;
    }
    if (opts.filter.nsources) {   /* a source the KB lacks: a usage error */
        kb_err serr;
        kb_err_clear(&serr);
        kb_store *s = NULL;
        kb_rc src = kb_cli_open_store(cli, KB_STORE_READONLY, &s, &serr);
        if (src == KB_OK)
            src = kb_query_check_sources(s, &opts.filter, &serr);
        kb_store_close(s);
        if (src != KB_OK) {
            kb_buf_release(&text);
            return src == KB_ERR_NOTFOUND && strncmp(serr.msg, "unknown source", 14) == 0
                       ? kb_cli_usage_error(self, "%s", serr.msg) : kb_cli_fail(&serr);
        }
    }
    kb_err err;
    kb_err_clear(&err);
    kb_store *store = NULL;
    kb_embedder *emb = NULL;
    kb_results res = { 0 };
    kb_expansion x;
    kb_expansion_init(&x);
    kb_rc rc = KB_OK;
    int status = -1;
    if (expand) {   /* the LLM's rewrites join the sub-queries */
        rc = kb_cli_open_store(cli, KB_STORE_READONLY, &store, &err);
        if (rc == KB_OK)
            rc = kb_query_expand(store, cli->config, opts.text, &x, &err);
        if (rc == KB_OK)
            kb_expansion_apply(&x, searches, &opts.nsearches);
    }
    if (rc == KB_OK && json) {   /* the search tool's object, whole chunks */
        cJSON *args = search_args(&opts, mode, budget, explain);
        cJSON *xj = expand ? kb_expansion_json(&x) : NULL;
        if (expand && !xj) {
            cJSON_Delete(args);
            args = NULL;   /* out of memory, said by cmd_tool_json_on */
        }
        status = cmd_tool_json_on(cli, store, "search", args, "expansion", xj);
    } else if (rc == KB_OK && !store) {
        rc = kb_cli_open_store(cli, KB_STORE_READONLY, &store, &err);
    }
    if (rc == KB_OK && status < 0)
        rc = kb_query_run(store, emb, &opts, &res, &err);
    if (rc == KB_OK && status < 0) {
        print_human(cli, &opts, &res, explain);
        if (expand && !cli->quiet)
            print_expansion(cli, &x);
        save_last(cli, store, &res);
    }
    kb_results_release(&res);
    kb_expansion_release(&x);
    kb_store_close(store);
    kb_buf_release(&text);
    if (status >= 0)
        return status;
    return rc == KB_OK ? 0 : kb_cli_fail(&err);
}
