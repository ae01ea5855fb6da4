/* test_store.c - the store's named slots (caches of the modules above it,
 * freed on close), a reader upgrading an older KB, the filter's SQL and
 * bindings, the growth helper, the buffer's cap and the executable's
 * directory. */
#include "kb/kb_int.h"
#include "tests/unit/test_util.h"

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ fixtures */

static char *kb_dir;

static int open_store(void **state)
{
    kb_dir = tu_tmpdir("store");
    *state = tu_open_kb(kb_dir);
    return 0;
}

static int close_store(void **state)
{
    kb_store_close(*state);
    tu_rmtree(kb_dir);
    free(kb_dir);
    kb_dir = NULL;
    return 0;
}

/* A cache that records its own destruction. */
typedef struct {
    int *freed;
    int id;
} cache;

static void cache_free(void *p)
{
    cache *c = p;
    *c->freed += c->id;
    free(c);
}

static cache *new_cache(int *freed, int id)
{
    cache *c = malloc(sizeof *c);
    assert_non_null(c);
    *c = (cache){ freed, id };
    return c;
}

/* ------------------------------------------------------------ slots */

static void test_slots_park_replace_clear(void **state)
{
    kb_store *s = *state;
    kb_err err;
    kb_err_clear(&err);
    int freed = 0;
    assert_null(kb_store_slot_get(s, "a"));
    cache *a = new_cache(&freed, 1), *b = new_cache(&freed, 10);
    assert_int_equal(kb_store_slot_set(s, "a", a, cache_free, &err), KB_OK);
    assert_int_equal(kb_store_slot_set(s, "b", b, cache_free, &err), KB_OK);
    assert_ptr_equal(kb_store_slot_get(s, "a"), a);
    assert_ptr_equal(kb_store_slot_get(s, "b"), b);
    assert_int_equal(freed, 0);

    /* replacing frees the old value, not the new */
    cache *a2 = new_cache(&freed, 100);
    assert_int_equal(kb_store_slot_set(s, "a", a2, cache_free, &err), KB_OK);
    assert_int_equal(freed, 1);
    assert_ptr_equal(kb_store_slot_get(s, "a"), a2);
    /* setting the same value again frees nothing */
    assert_int_equal(kb_store_slot_set(s, "a", a2, cache_free, &err), KB_OK);
    assert_int_equal(freed, 1);

    /* clearing frees and empties; clearing an empty slot is nothing */
    kb_store_slot_clear(s, "b");
    assert_int_equal(freed, 11);
    assert_null(kb_store_slot_get(s, "b"));
    kb_store_slot_clear(s, "b");
    assert_int_equal(kb_store_slot_set(s, "b", NULL, cache_free, &err), KB_OK);
    assert_int_equal(freed, 11);
    kb_store_slot_clear(s, "a");
    assert_int_equal(freed, 111);
    assert_int_equal(err.rc, KB_OK);
}

static void test_slots_freed_on_close(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("store2");
    kb_store *s = tu_open_kb(dir);
    kb_err err;
    kb_err_clear(&err);
    int freed = 0;
    static char names[20][16];   /* names are not copied: they outlive the store */
    for (int i = 0; i < 20; i++) {   /* past the first growth */
        char *name = names[i];
        snprintf(name, sizeof names[i], "slot%d", i);
        assert_int_equal(kb_store_slot_set(s, name, new_cache(&freed, 1),
                                           cache_free, &err), KB_OK);
        if (i == 19) {
            assert_non_null(kb_store_slot_get(s, "slot7"));
            kb_store_close(s);
            assert_int_equal(freed, 20);
        }
    }
    tu_rmtree(dir);
    free(dir);
}

/* ------------------------------------------------------------ upgrades */

/* A KB of the schema before the last: a reader upgrades it when it may
 * write it, and says to ingest when it may not. */
static void test_reader_upgrades(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("store3");
    kb_store *s = tu_open_kb(dir);
    int latest = kb_store_schema_version(s);
    assert_true(latest > 1);
    kb_err err;
    kb_err_clear(&err);
    /* undo the last migration (4: the expansions' cache) by hand */
    assert_int_equal(latest, 4);
    assert_int_equal(kb_store_exec(s, "DROP TABLE query_expansions", &err), KB_OK);
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", latest - 1);
    assert_int_equal(kb_store_exec(s, sql, &err), KB_OK);
    kb_store_close(s);

    char *db = kb_path_join(dir, "kb.sqlite");
    assert_non_null(db);
    assert_int_equal(chmod(db, 0444), 0);   /* may not be written: refused */
    if (access(db, W_OK) != 0) {            /* (root may write it anyway) */
        assert_int_equal(kb_store_open(dir, KB_STORE_READONLY, &s, &err), KB_ERR_MISMATCH);
        assert_non_null(strstr(err.msg, "run 'kb ingest' once"));
    }
    assert_int_equal(chmod(db, 0644), 0);
    kb_err_clear(&err);
    assert_int_equal(kb_store_open(dir, KB_STORE_READONLY, &s, &err), KB_OK);
    assert_int_equal(kb_store_schema_version(s), latest);
    kb_store_close(s);
    free(db);
    tu_rmtree(dir);
    free(dir);
}

/* ------------------------------------------------------------ filters */

static void test_filter_sql_and_bind(void **state)
{
    kb_store *s = *state;
    kb_err err;
    kb_err_clear(&err);
    kb_filter f = { .sources = { "ptx-isa", "cuda-guide" }, .nsources = 2,
                    .kinds = (1u << KB_KIND_CODE) | (1u << KB_KIND_SKILL) };
    assert_false(kb_filter_is_empty(&f));
    kb_filter none = { .nsources = 0 };
    assert_true(kb_filter_is_empty(&none));

    kb_buf sql;
    kb_buf_init(&sql, 0);
    assert_int_equal(kb_filter_sql(&f, &sql), KB_OK);
    assert_string_equal(sql.data, " AND d.source_id IN (?,?) AND c.kind IN (?,?)");
    kb_buf_reset(&sql);
    assert_int_equal(kb_filter_sql(&none, &sql), KB_OK);
    assert_int_equal(sql.len, 0);

    /* the bindings follow the SQL's order, and the SQL runs on the schema */
    kb_buf_reset(&sql);
    assert_int_equal(kb_buf_puts(&sql, "SELECT count(*) FROM chunks c JOIN documents"
                                       " d ON d.id = c.document_id WHERE c.id > ?"),
                     KB_OK);
    assert_int_equal(kb_filter_sql(&f, &sql), KB_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(kb_store_prepare(s, sql.data, &st, &err), KB_OK);
    sqlite3_bind_int(st, 1, 0);
    assert_int_equal(kb_filter_bind(st, &f, 2), 6);
    assert_string_equal(sqlite3_sql(st), sql.data);
    char *expanded = sqlite3_expanded_sql(st);
    assert_non_null(strstr(expanded, "IN ('ptx-isa','cuda-guide') AND c.kind IN ('code','skill')"));
    sqlite3_free(expanded);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    sqlite3_finalize(st);
    kb_buf_release(&sql);
}

static void test_kinds_round_trip(void **state)
{
    (void)state;
    const char *names[] = { "text", "code", "table", "paper", "skill" };
    for (int i = 0; i < 5; i++) {
        kb_kind k;
        assert_int_equal(kb_kind_parse(names[i], &k), 0);
        assert_int_equal((int)k, i);
        assert_string_equal(kb_kind_name(k), names[i]);
    }
    kb_kind k = KB_KIND_CODE;
    assert_int_equal(kb_kind_parse("prose", &k), -1);
    assert_int_equal((int)k, KB_KIND_CODE);
}

/* ------------------------------------------------------------ growth */

static void test_grow(void **state)
{
    (void)state;
    int64_t *items = NULL;
    size_t n = 0, cap = 0;
    for (int64_t i = 0; i < 1000; i++) {
        assert_int_equal(KB_GROW(items, n + 1, cap), KB_OK);
        assert_true(cap >= n + 1);
        items[n++] = i * 3;
    }
    assert_int_equal(cap, 1024);   /* 8, doubled */
    for (size_t i = 0; i < n; i++)
        assert_int_equal(items[i], (int64_t)i * 3);
    /* a size that cannot be allocated fails and leaves the array whole */
    int64_t *before = items;
    assert_int_equal(KB_GROW(items, SIZE_MAX / 4, cap), KB_ERR_NOMEM);
    assert_ptr_equal(items, before);
    assert_int_equal(cap, 1024);
    assert_int_equal(items[999], 2997);
    /* enough room already: nothing moves */
    assert_int_equal(KB_GROW(items, 10, cap), KB_OK);
    assert_ptr_equal(items, before);
    free(items);
}

/* ------------------------------------------------------------ buffers */

static void test_buf_cap_and_finish(void **state)
{
    (void)state;
    kb_buf b;
    kb_buf_init(&b, 4);
    assert_int_equal(kb_buf_puts(&b, "abc"), KB_OK);
    /* past the cap: fails, the buffer as it was */
    assert_int_equal(kb_buf_puts(&b, "de"), KB_ERR_NOMEM);
    assert_string_equal(b.data, "abc");
    assert_int_equal(kb_buf_putc(&b, 'd'), KB_OK);
    assert_int_equal(kb_buf_printf(&b, "%d", 5), KB_ERR_NOMEM);
    assert_string_equal(b.data, "abcd");
    /* a failed chain gives NULL, never the cut string */
    assert_null(kb_buf_finish(&b, KB_ERR_NOMEM));
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    /* a good one gives the data, "" for nothing appended */
    kb_buf_init(&b, 0);
    char *s = kb_buf_finish(&b, KB_OK);
    assert_string_equal(s, "");
    free(s);
    assert_int_equal(kb_buf_printf(&b, "%s-%d", "x", 1), KB_OK);
    s = kb_buf_finish(&b, KB_OK);
    assert_string_equal(s, "x-1");
    free(s);
}

/* ------------------------------------------------------------ files */

static void test_exe_dir(void **state)
{
    (void)state;
    char *dir = kb_exe_dir();
    assert_non_null(dir);
    assert_int_equal(dir[0], '/');
    assert_int_not_equal(dir[strlen(dir) - 1], '/');
    /* this very test binary lies in it */
    char *self = kb_path_join(dir, "test_store");
    assert_int_equal(access(self, X_OK), 0);
    free(self);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_slots_park_replace_clear, open_store,
                                        close_store),
        cmocka_unit_test(test_slots_freed_on_close),
        cmocka_unit_test(test_reader_upgrades),
        cmocka_unit_test_setup_teardown(test_filter_sql_and_bind, open_store,
                                        close_store),
        cmocka_unit_test(test_kinds_round_trip),
        cmocka_unit_test(test_grow),
        cmocka_unit_test(test_buf_cap_and_finish),
        cmocka_unit_test(test_exe_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
