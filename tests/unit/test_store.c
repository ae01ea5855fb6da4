/* test_store.c - the store's named slots (caches of the modules above it,
 * freed on close), the filter's SQL and bindings, and the growth helper. */
#include "kb/kb_int.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ fixtures */

static char kb_dir[64];

static int open_store(void **state)
{
    snprintf(kb_dir, sizeof kb_dir, "/tmp/kb-test-store.XXXXXX");
    if (!mkdtemp(kb_dir))
        return -1;
    kb_store *s = NULL;
    kb_err err;
    kb_err_clear(&err);
    if (kb_store_open(kb_dir, KB_STORE_CREATE, &s, &err) != KB_OK)
        return -1;
    *state = s;
    return 0;
}

static int close_store(void **state)
{
    kb_store_close(*state);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", kb_dir);
    return system(cmd) == 0 ? 0 : -1;
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
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/kb-test-store2.XXXXXX");
    assert_non_null(mkdtemp(dir));
    kb_store *s = NULL;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_store_open(dir, KB_STORE_CREATE, &s, &err), KB_OK);
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
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_slots_park_replace_clear, open_store,
                                        close_store),
        cmocka_unit_test(test_slots_freed_on_close),
        cmocka_unit_test_setup_teardown(test_filter_sql_and_bind, open_store,
                                        close_store),
        cmocka_unit_test(test_kinds_round_trip),
        cmocka_unit_test(test_grow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
