/* fuzz_fts_match.c - the FTS5 MATCH builder on any text: never a syntax
 * error for SQLite, and never more than 32 distinct terms, each at most
 * three times. */
#include "index/index.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sqlite3 *db;
    static sqlite3_stmt *st;
    if (!db) {
        fuzz_check(sqlite3_open(":memory:", &db) == SQLITE_OK);
        fuzz_check(sqlite3_exec(db, "CREATE VIRTUAL TABLE f USING fts5(title, heading,"
                                " body, idents, tokenize = 'porter unicode61"
                                " remove_diacritics 2'); INSERT INTO f VALUES('a',"
                                " 'b', 'shared memory', 'cpasync')", NULL, NULL,
                                NULL) == SQLITE_OK);
        fuzz_check(sqlite3_prepare_v2(db, "SELECT count(*) FROM f WHERE f MATCH ?",
                                      -1, &st, NULL) == SQLITE_OK);
    }
    char *text = malloc(size + 1);
    fuzz_check(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    kb_buf m;
    kb_buf_init(&m, 0);
    fuzz_check(kb_fts_build_match(text, &m) == KB_OK);
    if (m.len) {
        /* 32 distinct terms, 3 times each, an identifier 3 forms */
        size_t ors = 0;
        for (const char *p = m.data; (p = strstr(p, " OR ")) != NULL; p++)
            ors++;
        fuzz_check(ors < 32 * 3 * 4);
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, m.data, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        if (rc != SQLITE_ROW) {
            fprintf(stderr, "MATCH '%s': %s\n", m.data, sqlite3_errmsg(db));
            abort();
        }
        sqlite3_reset(st);
    }
    kb_buf_release(&m);
    free(text);
    return 0;
}
