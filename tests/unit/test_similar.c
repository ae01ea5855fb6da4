/* test_similar.c - near-identical texts (query/similar.c) and what a
 * query does with them: word pairs compared case-blind, a wrapper's two
 * variants near-identical and two different sections not; through a real
 * store, a file copied into two documents shown once with the copy
 * listed, and a lexical section with two matching chunks ranked above a
 * section whose one chunk matches a little better; skills ranked apart
 * from the documentation, one a skill, and known as skills at once when
 * this or another connection adds one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb/kb.h"
#include "query/query_int.h"
#include "test_util.h"

static double jaccard(const char *a, const char *b)
{
    kb_shingles x, y;
    assert_int_equal(kb_shingles_make(a, &x), KB_OK);
    assert_int_equal(kb_shingles_make(b, &y), KB_OK);
    double j = kb_shingles_jaccard(&x, &y);
    kb_shingles_release(&x);
    kb_shingles_release(&y);
    return j;
}

/* Two variants of one generated wrapper, differing in one qualifier. */
static const char *const WRAP_A =
    "// red.async.op.space.u32 [dst], value, [bar]; // PTX 81, SM_90\n"
    "// .op    = { .add }\n// .space = { .shared::cluster }\n"
    "template <typename = void>\n__device__ static inline void red_async(\n"
    "  op_add_t, space_cluster_t, uint32_t* dst, const uint32_t& value,\n"
    "  uint64_t* remote_bar, int flags, int stride, int lane, int warp);";
static const char *const WRAP_B =
    "// red.async.op.space.u32 [dst], value, [bar]; // PTX 81, SM_90\n"
    "// .op    = { .min }\n// .space = { .shared::cluster }\n"
    "template <typename = void>\n__device__ static inline void red_async(\n"
    "  op_min_t, space_cluster_t, uint32_t* dst, const uint32_t& value,\n"
    "  uint64_t* remote_bar, int flags, int stride, int lane, int warp);";

static void test_jaccard(void **state)
{
    (void)state;
    assert_true(jaccard("Stage the tile in shared memory.",
                        "stage THE tile in shared   memory") == 1.0);
    double v = jaccard(WRAP_A, WRAP_B);
    assert_true(v >= 0.8 && v < 1.0);
    assert_true(jaccard("Stage the tile in shared memory to coalesce the reads.",
                        "Pad the tile by one column so that a column's words "
                        "fall in different banks.") < 0.2);
    /* word order counts: the same words in another order share no pair */
    assert_true(jaccard("tile transpose", "transpose tile") == 0.0);
    assert_true(jaccard("", "anything") == 0.0);
    assert_true(jaccard("...", "...") == 0.0);
    assert_true(jaccard("occupancy", "Occupancy") == 1.0);
}

/* A chunk of its own section in document doc, indexed. */
static void add_chunk(kb_store *s, int64_t id, int doc, const char *heading,
                      const char *text)
{
    kb_err err;
    kb_err_clear(&err);
    sqlite3_stmt *st = NULL;
    assert_int_equal(kb_store_prepare(s,
        "INSERT INTO chunks(id, document_id, ord, kind, heading_path, text, tokens)"
        " VALUES(?, ?, ?, 'text', ?, ?, 10)", &st, &err), KB_OK);
    char hp[128];
    snprintf(hp, sizeof hp, "[\"%s\"]", heading);
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, doc);
    sqlite3_bind_int64(st, 3, id);
    sqlite3_bind_text(st, 4, hp, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 5, text, -1, SQLITE_STATIC);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    assert_int_equal(kb_fts_add(s, id, heading, hp, text, &err), KB_OK);
}

static kb_store *open_store(char **dir)
{
    *dir = tu_tmpdir("similar");
    kb_store *s = NULL;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_store_open(*dir, KB_STORE_CREATE, &s, &err), KB_OK);
    assert_int_equal(kb_store_exec(s, "INSERT INTO sources(id) VALUES('s');"
        "INSERT INTO documents(id, source_id, key, title, content_hash) VALUES"
        " (1, 's', 'a', 'Doc', 'h'), (2, 's', 'b', 'Doc', 'h'),"
        " (3, 's', 'c', 'Doc', 'h');", &err), KB_OK);
    return s;
}

static void lexical(kb_store *s, const char *q, kb_results *res)
{
    kb_query_opts o;
    kb_query_opts_init(&o);
    o.text = q;
    o.mode = KB_MODE_LEXICAL;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_query_run(s, NULL, &o, res, &err), KB_OK);
}

static void test_copies_listed(void **state)
{
    (void)state;
    char *dir;
    kb_store *s = open_store(&dir);
    add_chunk(s, 10, 1, "red_async", WRAP_A);
    add_chunk(s, 20, 2, "red_async", WRAP_B);   /* the other variant */
    add_chunk(s, 30, 3, "Reductions", "A red_async reduction adds a value "
              "into another block's shared memory and signals its barrier.");
    kb_results res;
    lexical(s, "red_async", &res);
    assert_int_equal(res.n, 2);
    const kb_result *wrap = res.items[0].chunk_id == 30 ? &res.items[1] : &res.items[0];
    const kb_result *other = wrap == &res.items[0] ? &res.items[1] : &res.items[0];
    assert_int_equal(other->chunk_id, 30);
    assert_int_equal(other->nsimilar, 0);
    assert_int_equal(wrap->nsimilar, 1);
    assert_int_equal(wrap->similar[0].chunk_id, wrap->chunk_id == 10 ? 20 : 10);
    assert_string_equal(wrap->similar[0].heading_path[0], "red_async");
    assert_string_equal(wrap->similar[0].text, "");
    kb_results_release(&res);
    kb_store_close(s);
    tu_rmtree(dir);
    free(dir);
}

static void test_second_chunk_counts(void **state)
{
    (void)state;
    char *dir;
    kb_store *s = open_store(&dir);
    /* section X: two chunks that say "transpose tile" among 20 other
     * words; section Y: one that says it among 19, a little better alone */
    add_chunk(s, 10, 1, "X", "alpha beta gamma delta epsilon zeta eta theta iota "
              "kappa lambda mu nu xi omicron pi rho sigma tau upsilon transpose tile");
    add_chunk(s, 11, 1, "X", "one two three four five six seven eight nine ten "
              "eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen "
              "nineteen twenty transpose tile");
    add_chunk(s, 20, 2, "Y", "red orange yellow green blue indigo violet black "
              "white grey brown pink cyan magenta olive navy teal maroon lime "
              "tile transpose");
    kb_results res;
    lexical(s, "transpose tile", &res);
    assert_int_equal(res.n, 2);
    assert_string_equal(res.items[0].heading_path[0], "X");
    assert_string_equal(res.items[1].heading_path[0], "Y");
    /* Y's one chunk is the better single match */
    assert_true(res.items[1].lexical_score > res.items[0].lexical_score);
    kb_results_release(&res);
    kb_store_close(s);
    tu_rmtree(dir);
    free(dir);
}

/* A document of source s with this key, through store w. */
static void add_document(kb_store *w, int id, const char *key)
{
    kb_err err;
    kb_err_clear(&err);
    char sql[256];
    snprintf(sql, sizeof sql, "INSERT INTO documents(id, source_id, key, title, content_hash)"
             " VALUES (%d, 's', '%s', 'Doc', 'h')", id, key);
    assert_int_equal(kb_store_exec(w, sql, &err), KB_OK);
}

static void test_skills_apart(void **state)
{
    (void)state;
    char *dir;
    kb_store *s = open_store(&dir);   /* documents a, b, c: not skills' */
    add_document(s, 4, "sk/pad/SKILL.md");
    add_document(s, 5, "sk/pad/kernel.cu");
    add_document(s, 6, "sk/tile/SKILL.md");
    add_document(s, 7, "notes/kernel.cu");   /* no SKILL.md beside it */
    add_chunk(s, 10, 1, "Shared Memory", "Bank conflicts serialise a warp's shared loads.");
    add_chunk(s, 11, 7, "notes", "A kernel that avoids bank conflicts by padding rows.");
    add_chunk(s, 20, 4, "pad", "Pad each row by one word: bank conflicts vanish.");
    add_chunk(s, 21, 4, "Pitfalls", "Padding the wrong dimension keeps the bank conflicts.");
    add_chunk(s, 30, 5, "transpose", "float tile[32][33]; // against bank conflicts");
    kb_results res;
    lexical(s, "bank conflicts", &res);
    /* the documentation alone in the results; the pad skill once, apart */
    assert_int_equal(res.n, 2);
    for (size_t i = 0; i < res.n; i++)
        assert_true(res.items[i].chunk_id == 10 || res.items[i].chunk_id == 11);
    assert_int_equal(res.nskills, 1);
    assert_int_equal(res.skills[0].rank, 1);
    assert_true(res.skills[0].chunk_id == 20 || res.skills[0].chunk_id == 21 ||
                res.skills[0].chunk_id == 30);
    kb_results_release(&res);

    /* a skill added by this connection is known as one at once */
    add_chunk(s, 40, 6, "tile", "Stage a tile; mind the bank conflicts of its columns.");
    lexical(s, "bank conflicts", &res);
    assert_int_equal(res.n, 2);
    assert_int_equal(res.nskills, 2);
    assert_true(res.skills[0].chunk_id == 40 || res.skills[1].chunk_id == 40);
    assert_int_equal(res.skills[1].rank, 2);
    kb_results_release(&res);

    /* and one added by another connection (an ingest beside a server) */
    kb_store *w = NULL;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_store_open(dir, 0, &w, &err), KB_OK);
    add_document(w, 8, "sk/swz/SKILL.md");
    add_chunk(w, 50, 8, "swizzle", "Swizzle the columns' addresses: no bank conflicts.");
    kb_store_close(w);
    lexical(s, "bank conflicts", &res);
    assert_int_equal(res.n, 2);
    assert_int_equal(res.nskills, 3);
    int seen50 = 0;
    for (size_t i = 0; i < res.nskills; i++)
        seen50 |= res.skills[i].chunk_id == 50;
    assert_true(seen50);
    kb_results_release(&res);

    /* a filter ranks skills with the rest: nothing apart */
    kb_query_opts o;
    kb_query_opts_init(&o);
    o.text = "bank conflicts";
    o.mode = KB_MODE_LEXICAL;
    o.filter.kinds = 1u << KB_KIND_TEXT;
    assert_int_equal(kb_query_run(s, NULL, &o, &res, &err), KB_OK);
    assert_int_equal(res.nskills, 0);
    int skill_ranked = 0;
    for (size_t i = 0; i < res.n; i++)
        skill_ranked |= res.items[i].chunk_id == 20 || res.items[i].chunk_id == 50;
    assert_true(skill_ranked);
    kb_results_release(&res);
    kb_store_close(s);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jaccard),
        cmocka_unit_test(test_copies_listed),
        cmocka_unit_test(test_second_chunk_counts),
        cmocka_unit_test(test_skills_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
