/* test_eval.c - the qrels parser, the match rule and the metrics of
 * index/eval.c, on hand-made cases whose answers are worked out below. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index/index.h"

#define EPS 1e-9

/* ------------------------------------------------------------ helpers */

/* A ranked list of hand-made results. */
typedef struct {
    kb_result r[16];
    char *hp[16][4];
    size_t n;
} rlist;

static void add(rlist *l, const char *source, const char *path,
                const char *h0, const char *h1)
{
    kb_result *r = &l->r[l->n];
    memset(r, 0, sizeof *r);
    r->rank = (int)l->n + 1;
    r->source = (char *)source;
    r->path = (char *)path;
    r->heading_path = l->hp[l->n];
    if (h0)
        l->hp[l->n][r->depth++] = (char *)h0;
    if (h1)
        l->hp[l->n][r->depth++] = (char *)h1;
    l->n++;
}

static void parse_ok(const char *json, kb_eval_qrels *q)
{
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = kb_eval_qrels_parse(json, strlen(json), "t.json", q, &err);
    if (rc != KB_OK)
        fail_msg("parse failed: %s", err.msg);
}

/* Expects parsing to fail with rc and a message containing want. */
static void parse_fails(const char *json, kb_rc want_rc, const char *want)
{
    kb_eval_qrels q;
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = kb_eval_qrels_parse(json, strlen(json), "bad.json", &q, &err);
    assert_int_equal(rc, want_rc);
    if (!strstr(err.msg, want))
        fail_msg("message '%s' lacks '%s'", err.msg, want);
    assert_non_null(strstr(err.msg, "'bad.json'"));
    assert_null(q.queries);
    assert_int_equal(q.n, 0);
}

static void norm_is(const char *in, const char *want)
{
    char *got = kb_eval_normalize_heading(in);
    assert_non_null(got);
    if (strcmp(got, want) != 0)
        fail_msg("normalize('%s') = '%s', wanted '%s'", in, got, want);
    free(got);
}

static void score(const kb_eval_qrels *q, const rlist *l, int k,
                  kb_eval_scores *s)
{
    assert_int_equal(kb_eval_score(&q->queries[0], l->r, l->n, k, s), KB_OK);
}

/* Three path judgments a.cu, b.cu, c.cu in source "s". */
static const char *QABC =
    "{\"queries\":[{\"id\":\"q\",\"query\":\"x\",\"kind\":\"concept\","
    "\"relevant\":[{\"source\":\"s\",\"path\":\"a.cu\"},"
    "{\"source\":\"s\",\"path\":\"b.cu\"},{\"source\":\"s\",\"path\":\"c.cu\"}]}]}";
static const char *QAB =
    "{\"queries\":[{\"id\":\"q\",\"query\":\"x\",\"relevant\":["
    "{\"source\":\"s\",\"path\":\"a.cu\"},{\"source\":\"s\",\"path\":\"b.cu\"}]}]}";
static const char *QA =
    "{\"queries\":[{\"id\":\"q\",\"query\":\"x\",\"relevant\":["
    "{\"source\":\"s\",\"path\":\"a.cu\"}]}]}";

/* ------------------------------------------------------------ normalising */

static void test_normalize_section_numbers(void **state)
{
    (void)state;
    norm_is("12.1.5. Loop Counters Signed vs. Unsigned",
            "loop counters signed vs. unsigned");
    norm_is("9.7.9.25. Data Movement and Conversion", "data movement and conversion");
    norm_is("18.2.3 Foo", "foo");
    norm_is("4. Foo", "foo");
    norm_is("4 Foo", "foo");
    /* digits that are part of the text stay */
    norm_is("2D Textures", "2d textures");
    norm_is("64-bit types", "64-bit types");
    norm_is("8.x Notes", "8.x notes");
    norm_is("1.5x Speedup", "1.5x speedup");
    norm_is("4.Foo", "4.foo");
    norm_is("Compute Capability 8.x", "compute capability 8.x");
    norm_is("3.2.14.1. 2D Textures", "2d textures");
    /* a heading that is only a number keeps it */
    norm_is("4.", "4.");
    norm_is("2024", "2024");
    /* only the leading number goes */
    norm_is("1. 2. Step", "2. step");
}

static void test_normalize_space_and_case(void **state)
{
    (void)state;
    norm_is("  Leading\t and\n\n trailing  ", "leading and trailing");
    norm_is("Warp   Shuffle\r\nFunctions", "warp shuffle functions");
    /* NBSP between the number and the title, as Sphinx HTML has it */
    norm_is("5.1.6.2.\xc2\xa0Kernel Function", "kernel function");
    /* Unicode case folding */
    norm_is("\xc3\x9c" "BER Stra\xc3\x9f" "e", "\xc3\xbc" "ber strasse");
    norm_is("Strong Scaling and Amdahl\xe2\x80\x99s Law",
            "strong scaling and amdahl\xe2\x80\x99s law");
    /* not UTF-8: ASCII folding only, bytes kept */
    norm_is("\xff  ABC", "\xff abc");
    norm_is("", "");
    norm_is("   ", "");
}

/* ------------------------------------------------------------ matching */

static void test_match_heading(void **state)
{
    (void)state;
    kb_eval_qrels q;
    parse_ok("{\"queries\":[{\"query\":\"x\",\"relevant\":["
             "{\"source\":\"cuda-best-practices\",\"heading\":\"Loop Counters Signed vs. Unsigned\"},"
             "{\"source\":\"cuda-best-practices\",\"heading\":\"amdahl\"},"
             "{\"source\":\"ptx-isa\",\"heading\":\"2D  textures\"},"
             "{\"source\":\"ptx-isa\",\"heading\":\"12.1.5 Loop Counters\"}]}]}", &q);
    const kb_eval_judgment *loop = &q.queries[0].rel[0], *amdahl = &q.queries[0].rel[1],
        *tex = &q.queries[0].rel[2], *numbered = &q.queries[0].rel[3];
    rlist l = { .n = 0 };
    add(&l, "cuda-best-practices", "best-practices/x.md",
        "12. Instruction Optimization", "12.1.5. LOOP  counters signed vs. unsigned");
    add(&l, "cuda-programming-guide", "", "12.1.5. Loop Counters Signed vs. Unsigned", NULL);
    add(&l, "cuda-best-practices", "", "4.1.3.1. Strong Scaling and Amdahl\xe2\x80\x99s Law", NULL);
    add(&l, "ptx-isa", "", "Textures", "3.2.14.1. 2D Textures");
    add(&l, "ptx-isa", "", "Textures", NULL);
    add(&l, "ptx-isa", "", "Loop Counters", NULL);
    add(&l, "cuda-best-practices", "", NULL, NULL);

    assert_true(kb_eval_judgment_matches(loop, &l.r[0]));
    assert_false(kb_eval_judgment_matches(loop, &l.r[1]));     /* other source */
    assert_true(kb_eval_judgment_matches(amdahl, &l.r[2]));    /* contains */
    assert_false(kb_eval_judgment_matches(amdahl, &l.r[0]));
    assert_true(kb_eval_judgment_matches(tex, &l.r[3]));       /* second entry */
    assert_false(kb_eval_judgment_matches(tex, &l.r[4]));
    /* the judgment's own section number is ignored too */
    assert_true(kb_eval_judgment_matches(numbered, &l.r[5]));
    assert_false(kb_eval_judgment_matches(loop, &l.r[6]));     /* no headings */
    assert_true(kb_eval_result_relevant(&q.queries[0], &l.r[0]));
    assert_false(kb_eval_result_relevant(&q.queries[0], &l.r[1]));
    kb_eval_qrels_release(&q);
}

static void test_match_path(void **state)
{
    (void)state;
    kb_eval_qrels q;
    parse_ok("{\"queries\":[{\"query\":\"x\",\"relevant\":["
             "{\"source\":\"cuda-samples\",\"path\":\"transpose/transpose.cu\"}]}]}", &q);
    const kb_eval_judgment *j = &q.queries[0].rel[0];
    rlist l = { .n = 0 };
    add(&l, "cuda-samples", "cuda-samples/2_Concepts_and_Techniques/transpose/transpose.cu", NULL, NULL);
    add(&l, "cuda-samples", "cuda-samples/2_Concepts_and_Techniques/transposeX/transpose.cu", NULL, NULL);
    add(&l, "cutlass-docs", "cuda-samples/2_Concepts_and_Techniques/transpose/transpose.cu", NULL, NULL);
    add(&l, "cuda-samples", "", "transpose/transpose.cu", NULL);   /* a heading is no path */
    add(&l, "cuda-samples", NULL, NULL, NULL);
    add(&l, "cuda-samples", "cuda-samples/Transpose/Transpose.cu", NULL, NULL); /* byte-wise */
    assert_true(kb_eval_judgment_matches(j, &l.r[0]));
    assert_false(kb_eval_judgment_matches(j, &l.r[1]));
    assert_false(kb_eval_judgment_matches(j, &l.r[2]));
    assert_false(kb_eval_judgment_matches(j, &l.r[3]));
    assert_false(kb_eval_judgment_matches(j, &l.r[4]));
    assert_false(kb_eval_judgment_matches(j, &l.r[5]));
    kb_eval_qrels_release(&q);
}

/* ------------------------------------------------------------ metrics */

static void test_one_judgment(void **state)
{
    (void)state;
    kb_eval_qrels q;
    parse_ok(QA, &q);
    kb_eval_scores s;

    /* at rank 1: everything is 1 */
    rlist l1 = { .n = 0 };
    add(&l1, "s", "a.cu", NULL, NULL);
    add(&l1, "s", "z.cu", NULL, NULL);
    score(&q, &l1, 10, &s);
    assert_true(fabs(s.ndcg - 1) < EPS);
    assert_true(fabs(s.recall - 1) < EPS);
    assert_true(fabs(s.success - 1) < EPS);
    assert_true(fabs(s.mrr - 1) < EPS);
    assert_int_equal(s.first_rank, 1);

    /* at rank 3: DCG = 1/log2(4) = 0.5, IDCG = 1 -> nDCG 0.5; MRR 1/3 */
    rlist l3 = { .n = 0 };
    add(&l3, "s", "x.cu", NULL, NULL);
    add(&l3, "t", "a.cu", NULL, NULL);          /* right path, wrong source */
    add(&l3, "s", "dir/a.cu", NULL, NULL);
    score(&q, &l3, 10, &s);
    assert_true(fabs(s.ndcg - 0.5) < EPS);
    assert_true(fabs(s.recall - 1) < EPS);
    assert_true(fabs(s.success - 1) < EPS);
    assert_true(fabs(s.mrr - 1.0 / 3) < EPS);
    assert_int_equal(s.first_rank, 3);
    kb_eval_qrels_release(&q);
}

static void test_two_judgments(void **state)
{
    (void)state;
    kb_eval_qrels q;
    parse_ok(QAB, &q);
    kb_eval_scores s;

    /* x, A, y, B: DCG = 1/log2(3) + 1/log2(5) = 0.630930 + 0.430677 = 1.061606
     * IDCG = 1 + 1/log2(3) = 1.630930 -> nDCG = 0.650921; MRR 1/2 */
    rlist l = { .n = 0 };
    add(&l, "s", "x.cu", NULL, NULL);
    add(&l, "s", "a.cu", NULL, NULL);
    add(&l, "s", "y.cu", NULL, NULL);
    add(&l, "s", "b.cu", NULL, NULL);
    score(&q, &l, 10, &s);
    assert_true(fabs(s.ndcg - 0.6509209298071326) < 1e-12);
    assert_true(fabs(s.recall - 1) < EPS);
    assert_true(fabs(s.mrr - 0.5) < EPS);
    assert_int_equal(s.first_rank, 2);
    assert_int_equal(s.matched, 2);

    /* A, A, B: the second A earns nothing. DCG = 1 + 1/log2(4) = 1.5,
     * nDCG = 1.5 / 1.630930 = 0.919721 */
    rlist m = { .n = 0 };
    add(&m, "s", "a.cu", NULL, NULL);
    add(&m, "s", "1/a.cu", NULL, NULL);
    add(&m, "s", "b.cu", NULL, NULL);
    score(&q, &m, 10, &s);
    assert_true(fabs(s.ndcg - 0.9197207891481876) < 1e-12);
    assert_true(fabs(s.recall - 1) < EPS);
    assert_true(fabs(s.mrr - 1) < EPS);

    /* A only, then nothing: DCG 1, nDCG 1/1.630930 = 0.613147, recall 1/2 */
    rlist o = { .n = 0 };
    add(&o, "s", "a.cu", NULL, NULL);
    add(&o, "s", "a.cu", NULL, NULL);
    score(&q, &o, 10, &s);
    assert_true(fabs(s.ndcg - 0.6131471927654584) < 1e-12);
    assert_true(fabs(s.recall - 0.5) < EPS);
    assert_true(fabs(s.success - 1) < EPS);
    kb_eval_qrels_release(&q);
}

static void test_result_matching_two_judgments(void **state)
{
    (void)state;
    kb_eval_qrels q;
    parse_ok("{\"queries\":[{\"query\":\"x\",\"relevant\":["
             "{\"source\":\"s\",\"heading\":\"Shared Memory\"},"
             "{\"source\":\"s\",\"heading\":\"Bank Conflicts\"}]}]}", &q);
    kb_eval_scores s;
    /* rank 1 matches both judgments: it earns gain 1 (not 2) and marks
     * both, so rank 2 (Bank Conflicts again) earns nothing.
     * DCG = 1, IDCG = 1 + 1/log2(3) -> nDCG 0.613147; recall 2/2 */
    rlist l = { .n = 0 };
    add(&l, "s", "", "9. Shared Memory", "9.2. Bank Conflicts");
    add(&l, "s", "", "Bank Conflicts", NULL);
    score(&q, &l, 10, &s);
    assert_true(fabs(s.ndcg - 0.6131471927654584) < 1e-12);
    assert_true(fabs(s.recall - 1) < EPS);
    assert_int_equal(s.matched, 2);
    assert_true(fabs(s.mrr - 1) < EPS);
    kb_eval_qrels_release(&q);
}

static void test_three_judgments(void **state)
{
    (void)state;
    kb_eval_qrels q;
    parse_ok(QABC, &q);
    kb_eval_scores s;
    /* A at 2, B at 5, C at 10 of 10:
     * DCG = 1/log2(3) + 1/log2(6) + 1/log2(11) = 0.630930 + 0.386853 + 0.289065
     *     = 1.306847; IDCG = 1 + 0.630930 + 0.5 = 2.130930 -> 0.613276 */
    rlist l = { .n = 0 };
    const char *paths[10] = { "x", "a.cu", "x", "x", "b.cu", "x", "x", "x", "x", "c.cu" };
    for (int i = 0; i < 10; i++)
        add(&l, "s", paths[i], NULL, NULL);
    score(&q, &l, 10, &s);
    assert_true(fabs(s.ndcg - 0.6132756769356656) < 1e-12);
    assert_true(fabs(s.recall - 1) < EPS);
    assert_true(fabs(s.mrr - 0.5) < EPS);

    /* at k = 5, C falls out: DCG = 1.017783; IDCG = 2.130930 -> 0.477623;
     * recall 2/3 */
    score(&q, &l, 5, &s);
    assert_true(fabs(s.ndcg - (1 / log2(3) + 1 / log2(6)) / (1 + 1 / log2(3) + 0.5)) < 1e-12);
    assert_true(fabs(s.recall - 2.0 / 3) < EPS);

    /* k = 2 with three judgments: IDCG holds min(3, 2) = 2 gains, so
     * A, B at ranks 1, 2 is a perfect 1 while recall is 2/3 */
    rlist m = { .n = 0 };
    add(&m, "s", "a.cu", NULL, NULL);
    add(&m, "s", "b.cu", NULL, NULL);
    add(&m, "s", "c.cu", NULL, NULL);
    score(&q, &m, 2, &s);
    assert_true(fabs(s.ndcg - 1) < EPS);
    assert_true(fabs(s.recall - 2.0 / 3) < EPS);
    kb_eval_qrels_release(&q);
}

static void test_nothing_in_top_k(void **state)
{
    (void)state;
    kb_eval_qrels q;
    parse_ok(QA, &q);
    kb_eval_scores s;
    /* the answer at rank 11 is past k = 10: all zero */
    rlist l = { .n = 0 };
    for (int i = 0; i < 10; i++)
        add(&l, "s", "x.cu", "A", NULL);
    add(&l, "s", "a.cu", NULL, NULL);
    score(&q, &l, 10, &s);
    assert_true(s.ndcg == 0 && s.recall == 0 && s.success == 0 && s.mrr == 0);
    assert_int_equal(s.first_rank, 0);
    /* at k = 11 it counts: nDCG = 1/log2(12) = 0.278943, MRR 1/11 */
    score(&q, &l, 11, &s);
    assert_true(fabs(s.ndcg - 0.27894294565112987) < 1e-12);
    assert_true(fabs(s.mrr - 1.0 / 11) < EPS);
    assert_int_equal(s.first_rank, 11);
    /* fewer results than k, none relevant; and no results at all */
    rlist m = { .n = 0 };
    add(&m, "s", "x.cu", NULL, NULL);
    score(&q, &m, 10, &s);
    assert_true(s.ndcg == 0 && s.success == 0);
    assert_int_equal(kb_eval_score(&q.queries[0], NULL, 0, 10, &s), KB_OK);
    assert_true(s.ndcg == 0 && s.recall == 0 && s.mrr == 0);
    kb_eval_qrels_release(&q);
}

static void test_means_by_kind(void **state)
{
    (void)state;
    kb_eval_qrels q;
    parse_ok("{\"queries\":["
             "{\"id\":\"a\",\"query\":\"x\",\"kind\":\"concept\",\"relevant\":[{\"source\":\"s\",\"path\":\"p\"}]},"
             "{\"id\":\"b\",\"query\":\"x\",\"kind\":\"lookup\",\"relevant\":[{\"source\":\"s\",\"path\":\"p\"}]},"
             "{\"id\":\"c\",\"query\":\"x\",\"kind\":\"concept\",\"relevant\":[{\"source\":\"s\",\"path\":\"p\"}]},"
             "{\"id\":\"d\",\"query\":\"x\",\"relevant\":[{\"source\":\"s\",\"path\":\"p\"}]}]}", &q);
    kb_eval_scores sc[4] = {
        { .ndcg = 1.0, .recall = 1.0, .success = 1, .mrr = 1.0 },
        { .ndcg = 0.5, .recall = 1.0, .success = 1, .mrr = 1.0 / 3 },
        { .ndcg = 0.0, .recall = 0.0, .success = 0, .mrr = 0.0 },
        { .ndcg = 0.3, .recall = 0.5, .success = 1, .mrr = 0.5 },
    };
    kb_eval_summary sum;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_eval_summarize(&q, sc, &sum, &err), KB_OK);
    /* overall: nDCG (1 + .5 + 0 + .3)/4 = .45, recall 2.5/4 = .625,
     * success 3/4, MRR (1 + 1/3 + 0 + .5)/4 = 0.458333 */
    assert_int_equal(sum.overall.n, 4);
    assert_true(fabs(sum.overall.ndcg - 0.45) < EPS);
    assert_true(fabs(sum.overall.recall - 0.625) < EPS);
    assert_true(fabs(sum.overall.success - 0.75) < EPS);
    assert_true(fabs(sum.overall.mrr - (1 + 1.0 / 3 + 0.5) / 4) < EPS);
    /* kinds in order of first appearance; a query without kind is "none" */
    assert_int_equal(sum.nkinds, 3);
    assert_string_equal(sum.by_kind[0].kind, "concept");
    assert_int_equal(sum.by_kind[0].n, 2);
    assert_true(fabs(sum.by_kind[0].ndcg - 0.5) < EPS);
    assert_true(fabs(sum.by_kind[0].success - 0.5) < EPS);
    assert_string_equal(sum.by_kind[1].kind, "lookup");
    assert_int_equal(sum.by_kind[1].n, 1);
    assert_true(fabs(sum.by_kind[1].mrr - 1.0 / 3) < EPS);
    assert_string_equal(sum.by_kind[2].kind, "none");
    assert_true(fabs(sum.by_kind[2].recall - 0.5) < EPS);
    kb_eval_summary_release(&sum);
    kb_eval_qrels_release(&q);
}

/* ------------------------------------------------------------ qrels files */

static void test_parse_fields(void **state)
{
    (void)state;
    kb_eval_qrels q;
    parse_ok("[{\"id\":\"d01\",\"query\":\"loop counters\",\"kind\":\"concept\","
             "\"relevant\":[{\"source\":\"s\",\"heading\":\"  18.2.3  Foo BAR \"}]},"
             "{\"query\":\"second\",\"relevant\":[{\"source\":\"t\",\"path\":\"a/b.cu\"}],"
             "\"note\":\"ignored\"}]", &q);
    assert_int_equal(q.n, 2);
    assert_string_equal(q.queries[0].id, "d01");
    assert_string_equal(q.queries[0].text, "loop counters");
    assert_string_equal(q.queries[0].kind, "concept");
    assert_int_equal(q.queries[0].nrel, 1);
    assert_string_equal(q.queries[0].rel[0].heading, "  18.2.3  Foo BAR ");
    assert_string_equal(q.queries[0].rel[0].norm, "foo bar");
    assert_null(q.queries[0].rel[0].path);
    assert_string_equal(q.queries[1].id, "#2");
    assert_string_equal(q.queries[1].kind, "none");
    assert_string_equal(q.queries[1].rel[0].path, "a/b.cu");
    assert_null(q.queries[1].rel[0].heading);
    kb_eval_qrels_release(&q);
}

static void test_parse_errors(void **state)
{
    (void)state;
    parse_fails("{\"queries\": [\n {\"id\": \"a\",, }]}", KB_ERR_PARSE,
                "not valid JSON (line 2,");
    parse_fails("", KB_ERR_PARSE, "not valid JSON");
    parse_fails("{\"about\":\"x\"}", KB_ERR_PARSE, "no 'queries' list");
    parse_fails("{\"queries\":[]}", KB_ERR_PARSE, "'queries' list is empty");
    parse_fails("{\"queries\":[7]}", KB_ERR_PARSE, "query 1 is not an object");
    parse_fails("{\"queries\":[{\"id\":\"d07\",\"relevant\":[{\"source\":\"s\",\"path\":\"p\"}]}]}",
                KB_ERR_PARSE, "query 1 ('d07') has no 'query' text");
    parse_fails("{\"queries\":[{\"id\":\"d07\",\"query\":\"\",\"relevant\":[]}]}",
                KB_ERR_PARSE, "has no 'query' text");
    parse_fails("{\"queries\":[{\"id\":\"ok\",\"query\":\"x\",\"relevant\":[{\"source\":\"s\",\"path\":\"p\"}]},"
                "{\"id\":\"d08\",\"query\":\"x\"}]}",
                KB_ERR_PARSE, "query 2 ('d08') has no 'relevant' list");
    parse_fails("{\"queries\":[{\"id\":\"d08\",\"query\":\"x\",\"relevant\":{}}]}",
                KB_ERR_PARSE, "has no 'relevant' list");
    parse_fails("{\"queries\":[{\"id\":\"d08\",\"query\":\"x\",\"relevant\":[]}]}",
                KB_ERR_PARSE, "('d08') has an empty 'relevant' list");
    parse_fails("{\"queries\":[{\"id\":\"d09\",\"query\":\"x\",\"relevant\":["
                "{\"source\":\"s\",\"path\":\"p\"},{\"heading\":\"H\"}]}]}",
                KB_ERR_PARSE, "judgment 2 of query 'd09' has no 'source'");
    parse_fails("{\"queries\":[{\"id\":\"d09\",\"query\":\"x\",\"relevant\":["
                "{\"source\":\"s\"}]}]}",
                KB_ERR_PARSE, "judgment 1 of query 'd09' has neither 'heading' nor 'path'");
    parse_fails("{\"queries\":[{\"id\":\"d09\",\"query\":\"x\",\"relevant\":["
                "{\"source\":\"s\",\"heading\":\"\"}]}]}",
                KB_ERR_PARSE, "neither 'heading' nor 'path'");
    parse_fails("{\"queries\":[{\"id\":\"d09\",\"query\":\"x\",\"relevant\":["
                "{\"source\":\"s\",\"heading\":\" \\t \"}]}]}",
                KB_ERR_PARSE, "has a blank 'heading'");
    parse_fails("{\"queries\":[{\"id\":\"d09\",\"query\":\"x\",\"relevant\":["
                "{\"source\":\"s\",\"heading\":\"H\",\"path\":\"p\"}]}]}",
                KB_ERR_PARSE, "has both 'heading' and 'path'");
    parse_fails("{\"queries\":[{\"id\":\"d09\",\"query\":\"x\",\"relevant\":[\"s\"]}]}",
                KB_ERR_PARSE, "judgment 1 of query 'd09' is not an object");
}

static void test_load_files(void **state)
{
    (void)state;
    kb_eval_qrels q;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_eval_qrels_load("/nonexistent/qrels.json", &q, &err),
                     KB_ERR_IO);
    assert_string_equal(err.msg, "cannot open '/nonexistent/qrels.json': "
                                 "No such file or directory");

    char tmpl[] = "/tmp/kb-test-eval-XXXXXX";
    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    const char *bad = "{\"queries\":[{\"id\":\"x\"}";
    assert_int_equal(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
    close(fd);
    kb_err_clear(&err);
    assert_int_equal(kb_eval_qrels_load(tmpl, &q, &err), KB_ERR_PARSE);
    assert_non_null(strstr(err.msg, "cannot parse '"));
    assert_non_null(strstr(err.msg, tmpl));
    unlink(tmpl);

    /* the shared development set, when it is there */
    const char *mirror = getenv("KB_MIRROR");
    if (!mirror)
        return;
    char *dev = NULL;
    size_t cap = strlen(mirror) + 64;
    dev = malloc(cap);
    assert_non_null(dev);
    snprintf(dev, cap, "%s/../eval/retrieval-dev.json", mirror);
    if (access(dev, R_OK) == 0) {
        kb_err_clear(&err);
        assert_int_equal(kb_eval_qrels_load(dev, &q, &err), KB_OK);
        assert_true(q.n >= 30);
        for (size_t i = 0; i < q.n; i++) {
            assert_true(q.queries[i].nrel >= 1);
            assert_true(strcmp(q.queries[i].kind, "none") != 0);
        }
        kb_eval_qrels_release(&q);
    }
    free(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalize_section_numbers),
        cmocka_unit_test(test_normalize_space_and_case),
        cmocka_unit_test(test_match_heading),
        cmocka_unit_test(test_match_path),
        cmocka_unit_test(test_one_judgment),
        cmocka_unit_test(test_two_judgments),
        cmocka_unit_test(test_result_matching_two_judgments),
        cmocka_unit_test(test_three_judgments),
        cmocka_unit_test(test_nothing_in_top_k),
        cmocka_unit_test(test_means_by_kind),
        cmocka_unit_test(test_parse_fields),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_load_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
