/* test_index.c - the chunker, the FTS5 query builder and identifier forms,
 * the store's schema, and the FAISS C API link (faiss_index_factory). */
#include "ingest/ingest_int.h"
#include "tests/unit/test_util.h"

#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/index_factory_c.h>
#include <faiss/c_api/index_io_c.h>

/* ------------------------------------------------------------ chunker */

static void repeat_words(kb_buf *b, const char *word, int n)
{
    for (int i = 0; i < n; i++) {
        tu_puts(b, i ? " " : "");
        tu_puts(b, word);
    }
}

static void test_chunk_budget_and_code(void **state)
{
    (void)state;
    kb_doc doc;
    kb_doc_init(&doc);
    kb_buf t;
    kb_buf_init(&t, 0);
    kb_doc_heading(&doc, 1, "Guide", "guide");
    kb_doc_heading(&doc, 2, "Memory", "memory");
    repeat_words(&t, "coalescing", 600);           /* must be split */
    kb_doc_add(&doc, KB_KIND_TEXT, t.data, t.len);
    kb_buf_reset(&t);
    for (int i = 0; i < 8; i++)                     /* a large code block */
        tu_printf(&t, "    out[i + %d] = in[i * stride + %d] * scale;\n", i, i);
    kb_doc_add(&doc, KB_KIND_CODE, t.data, t.len);
    kb_doc_add(&doc, KB_KIND_CODE, "x = 1;", 6);   /* a small one */
    kb_doc_add(&doc, KB_KIND_TEXT, "After the code.", 15);

    kb_chunks c;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_chunk_doc(&doc, NULL, 256, &c, &err), KB_OK);
    assert_true(c.n >= 4);
    int code_chunks = 0, whole_code = 0;
    for (size_t i = 0; i < c.n; i++) {
        assert_true(c.items[i].tokens <= 256);
        assert_string_equal(c.items[i].heading_json, "[\"Guide\",\"Memory\"]");
        assert_string_equal(c.items[i].anchor, "memory");
        if (c.items[i].kind == KB_KIND_CODE) {
            code_chunks++;
            whole_code += strcmp(c.items[i].text, t.data) == 0;
        }
    }
    /* the big code block is one chunk, intact; the small one joined text */
    assert_int_equal(code_chunks, 1);
    assert_int_equal(whole_code, 1);
    assert_non_null(strstr(c.items[c.n - 1].text, "x = 1;"));
    assert_non_null(strstr(c.items[c.n - 1].text, "After the code."));
    kb_chunks_release(&c);
    kb_doc_release(&doc);
    kb_buf_release(&t);
}

static void test_chunk_tiny_section_and_papers(void **state)
{
    (void)state;
    kb_doc doc;
    kb_doc_init(&doc);
    kb_doc_heading(&doc, 1, "Parent", "parent");
    kb_doc_add(&doc, KB_KIND_TEXT, "Short intro.", 12);
    kb_doc_heading(&doc, 2, "Child", "child");
    kb_doc_add(&doc, KB_KIND_TEXT, "The child's own text, long enough to stand.", 43);
    kb_doc_heading(&doc, 1, "Papers", "papers");
    kb_link links[] = { { "paper", "https://arxiv.org/abs/1" }, { "code", "https://x/y" } };
    kb_paper p = { "2025-06", "A Paper About Kernels", links, 2 };
    kb_doc_add_paper(&doc, &p);
    kb_paper q = { "2024-01", "Another One", links, 1 };
    kb_doc_add_paper(&doc, &q);

    kb_chunks c;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_chunk_doc(&doc, NULL, 256, &c, &err), KB_OK);
    assert_int_equal(c.n, 3);
    /* the tiny intro went into its subsection's chunk */
    assert_string_equal(c.items[0].heading_json, "[\"Parent\",\"Child\"]");
    assert_non_null(strstr(c.items[0].text, "Short intro."));
    assert_non_null(strstr(c.items[0].text, "child's own text"));
    /* one chunk per paper, its title ending the heading path */
    assert_int_equal(c.items[1].kind, KB_KIND_PAPER);
    assert_string_equal(c.items[1].heading_json, "[\"Papers\",\"A Paper About Kernels\"]");
    assert_non_null(c.items[1].paper);
    assert_string_equal(c.items[1].paper->date, "2025-06");
    assert_int_equal(c.items[2].kind, KB_KIND_PAPER);
    kb_chunks_release(&c);
    kb_doc_release(&doc);
}

static void test_chunk_caption_joins_code(void **state)
{
    (void)state;
    kb_doc doc;
    kb_doc_init(&doc);
    kb_buf t;
    kb_buf_init(&t, 0);
    kb_doc_heading(&doc, 1, "Instructions", "instructions");
    kb_doc_heading(&doc, 2, "add", "add");
    kb_doc_add(&doc, KB_KIND_TEXT, "add: Add two values.\n\nSyntax", 29);
    for (int i = 0; i < 8; i++)                     /* a large code block */
        tu_printf(&t, "add.type d%d, a%d, b%d;  // .type = { .u16, .u32, .s64 };\n",
                  i, i, i);
    kb_doc_add(&doc, KB_KIND_CODE, t.data, t.len);
    kb_doc_add(&doc, KB_KIND_TEXT, "Description: performs addition and writes the "
               "result into d, in as many words as a real paragraph has.", 104);

    kb_chunks c;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_chunk_doc(&doc, NULL, 256, &c, &err), KB_OK);
    /* the caption leads the code chunk instead of standing alone */
    assert_int_equal(c.n, 2);
    assert_int_equal(c.items[0].kind, KB_KIND_CODE);
    assert_true(strncmp(c.items[0].text, "add: Add two values.", 20) == 0);
    assert_non_null(strstr(c.items[0].text, t.data));
    assert_int_equal(c.items[1].kind, KB_KIND_TEXT);
    kb_chunks_release(&c);
    kb_doc_release(&doc);
    kb_buf_release(&t);
}

/* Stubs (issue 22): a lead-in of a few words ("- Multiplicand B:") before
 * a table, "An SM consists of:" before a list that fills a chunk, a
 * figure's caption line before its code, and a code block's closing
 * braces join the chunk beside them in their section; a section that is
 * only a stub stays its own. */
static void test_chunk_stubs_join(void **state)
{
    (void)state;
    kb_doc doc;
    kb_doc_init(&doc);
    kb_buf t;
    kb_buf_init(&t, 0);
    kb_doc_heading(&doc, 1, "Fragments", "fragments");
    kb_doc_add(&doc, KB_KIND_TEXT, "- Multiplicand B:", 17);
    const char *table = ".btype | Fragment | Elements\n.u8 | a vector of four | b0, b1";
    kb_doc_add(&doc, KB_KIND_TABLE, table, strlen(table));
    kb_doc_heading(&doc, 1, "Architecture", "architecture");
    kb_doc_add(&doc, KB_KIND_TEXT, "An SM consists of:", 18);
    for (int i = 0; i < 28; i++)
        tu_printf(&t, "- %d units of some kind for operations\n", i);
    kb_doc_add(&doc, KB_KIND_TEXT, t.data, t.len);
    kb_doc_heading(&doc, 1, "References", "references");
    kb_doc_add(&doc, KB_KIND_TEXT, "whitepaper", 10);

    kb_chunks c;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_chunk_doc(&doc, NULL, 256, &c, &err), KB_OK);
    /* the list too long to join whole is cut after the lead-in's share */
    assert_int_equal(c.n, 4);
    assert_int_equal(c.items[0].kind, KB_KIND_TABLE);
    assert_true(strncmp(c.items[0].text, "- Multiplicand B:\n", 18) == 0);
    assert_non_null(strstr(c.items[0].text, table));
    assert_true(strncmp(c.items[1].text, "An SM consists of:\n\n- 0 units", 29) == 0);
    assert_non_null(strstr(c.items[2].text, "- 27 units"));
    assert_string_equal(c.items[3].text, "whitepaper");
    for (size_t i = 0; i < c.n; i++) {
        assert_true(c.items[i].tokens <= 256);
        assert_int_equal((size_t)c.items[i].tokens,
                         kb_chunk_count_tokens(NULL, c.items[i].heading_text) +
                         kb_chunk_count_tokens(NULL, c.items[i].text));
    }
    kb_chunks_release(&c);
    kb_doc_release(&doc);
    kb_buf_release(&t);
}

static void test_chunk_tiny_siblings_merge(void **state)
{
    (void)state;
    kb_doc doc;
    kb_doc_init(&doc);
    kb_doc_heading(&doc, 1, "transpose - Matrix Transpose", "top");
    kb_doc_heading(&doc, 2, "Key Concepts", "key-concepts");
    kb_doc_add(&doc, KB_KIND_TEXT, "Performance Strategies", 22);
    kb_doc_heading(&doc, 2, "Supported OSes", "supported-oses");
    kb_doc_add(&doc, KB_KIND_TEXT, "Linux, Windows", 14);
    kb_doc_heading(&doc, 2, "Description", "description");
    static const char long_text[] =
        "This sample shows several transpose kernels that improve step by step: "
        "coalesced reads and writes through shared memory, padding against bank "
        "conflicts, and a diagonal block order against partition camping.";
    kb_doc_add(&doc, KB_KIND_TEXT, long_text, sizeof long_text - 1);
    kb_doc_heading(&doc, 2, "References", "references");
    kb_doc_add(&doc, KB_KIND_TEXT, "whitepaper", 10);

    kb_chunks c;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_chunk_doc(&doc, NULL, 256, &c, &err), KB_OK);
    assert_int_equal(c.n, 3);
    /* the two tiny siblings: one chunk under their parent, titles kept */
    assert_string_equal(c.items[0].heading_json, "[\"transpose - Matrix Transpose\"]");
    assert_int_equal(c.items[0].depth, 1);
    assert_string_equal(c.items[0].text, "Key Concepts: Performance Strategies\n\n"
                                         "Supported OSes: Linux, Windows");
    assert_string_equal(c.items[1].heading_json,
                        "[\"transpose - Matrix Transpose\",\"Description\"]");
    /* a tiny section alone keeps its own heading and text */
    assert_string_equal(c.items[2].heading_json,
                        "[\"transpose - Matrix Transpose\",\"References\"]");
    assert_string_equal(c.items[2].text, "whitepaper");
    kb_chunks_release(&c);
    kb_doc_release(&doc);
}

/* The vocabulary's tokenizer when the model is installed (the chunker's
 * real counter), else NULL (its estimate). */
static kb_tokenizer *open_tokenizer(void)
{
    char *dir = tu_model_dir();
    char *vocab = dir ? kb_path_join(dir, "vocab.txt") : NULL;
    kb_tokenizer *tok = NULL;
    kb_err err;
    kb_err_clear(&err);
    if (vocab && access(vocab, R_OK) == 0 && kb_tokenizer_open(vocab, &tok, &err) != KB_OK)
        fail_msg("%s", err.msg);
    free(vocab);
    free(dir);
    return tok;
}

/* Chunks one paragraph of len bytes (a 20-word cycle, or one word when
 * word is set) and checks every chunk's size and that the text is whole;
 * returns the milliseconds it took. */
static double chunk_paragraph(const kb_tokenizer *tok, size_t len, int one_word)
{
    static const char *const words[] = {
        "the", "kernel", "warp", "shared", "memory", "occupancy", "register",
        "tile", "thread", "block", "latency", "bandwidth", "coalesced", "access",
        "pattern", "instruction", "pipeline", "tensor", "core", "async.",
    };
    kb_buf t;
    kb_buf_init(&t, 0);
    for (size_t i = 0; t.len < len; i++) {
        if (one_word)
            assert_int_equal(kb_buf_putc(&t, (char)('a' + i % 26)), KB_OK);
        else
            tu_printf(&t, "%s%s", i ? " " : "", words[i % 20]);
    }
    kb_doc doc;
    kb_doc_init(&doc);
    kb_doc_heading(&doc, 1, "Big", "big");
    assert_int_equal(kb_doc_add(&doc, KB_KIND_TEXT, t.data, t.len), KB_OK);
    kb_chunks c;
    kb_err err;
    kb_err_clear(&err);
    double t0 = tu_cpu_ms();
    assert_int_equal(kb_chunk_doc(&doc, tok, KB_CHUNK_MAX_TOKENS, &c, &err), KB_OK);
    double ms = tu_cpu_ms() - t0;
    size_t total = 0;
    for (size_t i = 0; i < c.n; i++) {
        size_t n = strlen(c.items[i].text);
        assert_true(c.items[i].tokens <= KB_CHUNK_MAX_TOKENS);
        assert_true(n <= KB_CHUNK_MAX_BYTES);
        /* in order, nothing dropped but the space at a cut */
        assert_memory_equal(c.items[i].text, t.data + total, n);
        total += n;
        total += total < t.len && t.data[total] == ' ';
    }
    assert_int_equal(total, t.len);
    kb_chunks_release(&c);
    kb_doc_release(&doc);
    kb_buf_release(&t);
    return ms;
}

/* The chunker re-counted the rest of a block after every piece: a 4 MB
 * paragraph took 48 s (issue 15 item 2). Now the cost grows with the
 * length, not its square; and a 4 MB "word", one [UNK] piece, is cut
 * into pieces of at most KB_CHUNK_MAX_BYTES, not stored as one chunk. */
static void test_chunk_linear_and_bounded(void **state)
{
    (void)state;
    kb_tokenizer *tok = open_tokenizer();
    double t1 = chunk_paragraph(tok, 1u << 20, 0);
    double t4 = chunk_paragraph(tok, 4u << 20, 0);
    printf("1 MB paragraph: %.0f ms, 4 MB: %.0f ms (%s)\n", t1, t4,
           tok ? "vocabulary" : "estimate");
    /* linear is 4x; quadratic was 16x: allow noise, not the square */
    assert_true(t4 < 8 * t1 + 500);
    assert_true(t4 < 20000);
    double tw = chunk_paragraph(tok, 4u << 20, 1);
    printf("4 MB word: %.0f ms\n", tw);
    kb_tokenizer_free(tok);
}

/* ------------------------------------------------------------ FTS5 */

static void test_fts_match_identifiers(void **state)
{
    (void)state;
    kb_buf m;
    kb_buf_init(&m, 0);
    assert_int_equal(kb_fts_build_match("cp.async.bulk.tensor", &m), KB_OK);
    /* the phrase or the joined form, and each part of 3+ letters alone */
    assert_string_equal(m.data, "(\"cp async bulk tensor\" OR idents : \"cpasyncbulktensor\")"
                                " OR \"async\" OR \"bulk\" OR \"tensor\"");
    kb_buf_reset(&m);
    assert_int_equal(kb_fts_build_match("cudaFuncSetAttribute", &m), KB_OK);
    assert_string_equal(m.data, "(\"cudafuncsetattribute\" OR idents : \"cudafuncsetattribute\""
                                " OR idents : \"cuda func set attribute\")");
    kb_buf_reset(&m);
    assert_int_equal(kb_fts_build_match("why is __shfl_down_sync slow?", &m), KB_OK);
    assert_string_equal(m.data, "(\"shfl down sync\" OR idents : \"shfldownsync\") OR \"shfl\""
                                " OR \"down\" OR \"sync\" OR \"slow\"");
    kb_buf_reset(&m);
    assert_int_equal(kb_fts_build_match("mma.sync.aligned.m16n8k16", &m), KB_OK);
    assert_non_null(strstr(m.data, " OR \"m16n8k16\""));
    kb_buf_reset(&m);
    /* only stop words: they are kept rather than nothing */
    assert_int_equal(kb_fts_build_match("what is it", &m), KB_OK);
    assert_string_equal(m.data, "\"what\" OR \"is\" OR \"it\"");
    kb_buf_reset(&m);
    assert_int_equal(kb_fts_build_match("\"*():-^", &m), KB_OK);
    assert_int_equal(m.len, 0);
    kb_buf_release(&m);
}

static void test_fts_idents(void **state)
{
    (void)state;
    kb_buf b;
    kb_buf_init(&b, 0);
    assert_int_equal(kb_fts_idents("Use cp.async.bulk.tensor.2d and cudaMemcpyAsync, "
                                   "not plain words.", &b), KB_OK);
    assert_non_null(strstr(b.data, "cpasync "));
    assert_non_null(strstr(b.data, "cpasyncbulktensor "));
    assert_non_null(strstr(b.data, "cpasyncbulktensor2d "));
    assert_non_null(strstr(b.data, "cudamemcpyasync "));
    assert_non_null(strstr(b.data, "cuda memcpy async "));
    assert_null(strstr(b.data, "plain"));
    kb_buf_release(&b);
}

/* Every user text runs as a MATCH without an FTS5 syntax error. */
static size_t count_or(const char *m)
{
    size_t n = 0;
    for (const char *p = m; (p = strstr(p, " OR \"")) != NULL; p++)
        n++;
    return n;
}

/* Every word was OR-ed into the MATCH, however often: 10 KiB of words
 * took 7 s, 60 KiB over two minutes (issue 15 item 4). A term now comes
 * at most 3 times (a repeat is weight, as BM25 sums over terms), and at
 * most 32 distinct terms, in the order typed. */
static void test_fts_match_dedup_and_cap(void **state)
{
    (void)state;
    kb_buf m, q;
    kb_buf_init(&m, 0);
    kb_buf_init(&q, 0);
    assert_int_equal(kb_fts_build_match("shared memory, shared Memory and SHARED "
                                        "cp.async cp.async shared", &m), KB_OK);
    assert_string_equal(m.data, "\"shared\" OR \"memory\" OR \"shared\" OR \"memory\" OR "
                                "\"shared\" OR (\"cp async\" OR idents : \"cpasync\") OR "
                                "\"async\" OR (\"cp async\" OR idents : \"cpasync\") OR "
                                "\"async\"");
    kb_buf_reset(&m);
    /* stop words alone: the same rule */
    assert_int_equal(kb_fts_build_match("is it is it is it is", &m), KB_OK);
    assert_string_equal(m.data, "\"is\" OR \"it\" OR \"is\" OR \"it\" OR \"is\" OR \"it\"");

    /* 60 KiB of one word is three terms */
    while (q.len < 60 * 1024)
        tu_puts(&q, "occupancy ");
    kb_buf_reset(&m);
    assert_int_equal(kb_fts_build_match(q.data, &m), KB_OK);
    assert_string_equal(m.data, "\"occupancy\" OR \"occupancy\" OR \"occupancy\"");

    /* 2,000 distinct words: the first 32 */
    kb_buf_reset(&q);
    for (int i = 0; i < 2000; i++)
        tu_printf(&q, "w%c%c%c ", 'a' + i % 26, 'a' + i / 26 % 26, 'a' + i / 676);
    kb_buf_reset(&m);
    assert_int_equal(kb_fts_build_match(q.data, &m), KB_OK);
    assert_int_equal(count_or(m.data), 31);
    assert_true(strncmp(m.data, "\"waaa\" OR \"wbaa\" OR ", 20) == 0);
    assert_null(strstr(m.data, "\"wgba\""));   /* word 32 (0-based) */
    kb_buf_release(&m);
    kb_buf_release(&q);
}

static void test_fts_never_syntax_error(void **state)
{
    (void)state;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE VIRTUAL TABLE f USING fts5(title, heading,"
                                  " body, idents); INSERT INTO f VALUES('a','b','c d','e');",
                                  NULL, NULL, NULL), SQLITE_OK);
    static const char *const texts[] = {
        "\"", "\"\"", "a\"b", "(", ")", "*", "a*", "NEAR(a b)", "AND", "OR NOT",
        "col:umn", "idents:x", "-x", "^x", "a.b.c", "__x__", "x::y", "ü", "共享",
        "{a}", "a+b", "'quoted'", "x -- y", "%s", "\\", "$(rm -rf)", "",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        kb_buf m;
        kb_buf_init(&m, 0);
        assert_int_equal(kb_fts_build_match(texts[i], &m), KB_OK);
        if (m.len) {
            sqlite3_stmt *st;
            assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM f WHERE f MATCH ?",
                                                -1, &st, NULL), SQLITE_OK);
            sqlite3_bind_text(st, 1, m.data, -1, SQLITE_STATIC);
            int rc = sqlite3_step(st);
            if (rc != SQLITE_ROW)
                fail_msg("'%s' -> '%s': %s", texts[i], m.data, sqlite3_errmsg(db));
            sqlite3_finalize(st);
        }
        kb_buf_release(&m);
    }
    sqlite3_close(db);
}

/* ------------------------------------------------------------ store */

static void test_store_schema(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("schema");
    char *sub = kb_path_join(dir, "a/b/kb");
    kb_store *s = NULL;
    kb_err err;
    kb_err_clear(&err);
    /* read-only open of a missing KB is a clear error */
    assert_int_equal(kb_store_open(sub, KB_STORE_READONLY, &s, &err), KB_ERR_NOTFOUND);
    assert_non_null(strstr(err.msg, "run 'kb ingest' first"));
    kb_err_clear(&err);
    assert_int_equal(kb_store_open(sub, KB_STORE_CREATE, &s, &err), KB_OK);
    sqlite3_stmt *st;
    assert_int_equal(kb_store_prepare(s, "PRAGMA journal_mode", &st, &err), KB_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    assert_int_equal(kb_store_prepare(s, "PRAGMA foreign_keys", &st, &err), KB_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 1);
    sqlite3_finalize(st);
    assert_int_equal(kb_store_prepare(s, "PRAGMA user_version", &st, &err), KB_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_true(sqlite3_column_int(st, 0) >= 2);
    sqlite3_finalize(st);
    /* the cascade removes chunks, their FTS rows and vectors with a document */
    assert_int_equal(kb_store_exec(s,
        "INSERT INTO sources(id) VALUES('s');"
        "INSERT INTO documents(id, source_id, key, content_hash) VALUES(1, 's', 'k', 'h');"
        "INSERT INTO chunks(id, document_id, ord, kind, heading_path, text, tokens)"
        " VALUES(7, 1, 0, 'text', '[\"A\"]', 'hello', 1);"
        "INSERT INTO chunks_fts(rowid, title, heading, body, idents) VALUES(7, 'A', 'A', 'hello', '');"
        "INSERT INTO embeddings(chunk_id, vec) VALUES(7, x'00000000');"
        "DELETE FROM documents WHERE id = 1;", &err), KB_OK);
    assert_int_equal(kb_store_prepare(s, "SELECT (SELECT count(*) FROM chunks) +"
                     " (SELECT count(*) FROM chunks_fts) + (SELECT count(*) FROM embeddings)",
                     &st, &err), KB_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 0);
    sqlite3_finalize(st);
    /* every change of the vectors moved the generation */
    char *gen = kb_store_meta_get(s, "vec_generation");
    assert_string_equal(gen, "2");
    free(gen);
    kb_store_close(s);
    /* reopening an existing KB read-only works */
    assert_int_equal(kb_store_open(sub, KB_STORE_READONLY, &s, &err), KB_OK);
    kb_store_close(s);
    free(sub);
    tu_rmtree(dir);
    free(dir);
}

/* ------------------------------------------------------------ FAISS */

static void test_faiss_links(void **state)
{
    (void)state;
    FaissIndex *index = NULL;
    assert_int_equal(faiss_index_factory(&index, 4, "IDMap2,Flat", METRIC_INNER_PRODUCT), 0);
    float x[8] = { 1, 0, 0, 0, 0, 1, 0, 0 };
    idx_t ids[2] = { 42, 7 };
    assert_int_equal(faiss_Index_add_with_ids(index, 2, x, ids), 0);
    float q[4] = { 0, 0.9f, 0.1f, 0 };
    float d[2];
    idx_t l[2];
    assert_int_equal(faiss_Index_search(index, 1, q, 2, d, l), 0);
    assert_int_equal(l[0], 7);
    assert_int_equal(l[1], 42);
    assert_float_equal(d[0], 0.9f, 1e-6);
    faiss_Index_free(index);
}

/* ------------------------------------------------------------ vec_file.c */

/* FAISS's bytes of an index of kind ("IDMap2,Flat", ...) over n random
 * unit vectors of dim d, ids 1000 + 7 i in a shuffled order. */
static char *faiss_bytes(const char *kind, int d, size_t n, size_t *len,
                         FaissIndex **out)
{
    float *x = malloc(n * (size_t)d * sizeof *x);
    idx_t *ids = malloc(n * sizeof *ids);
    assert_non_null(x);
    assert_non_null(ids);
    for (size_t i = 0; i < n; i++) {
        double norm = 0;
        for (int j = 0; j < d; j++) {
            x[i * (size_t)d + (size_t)j] = (float)(rand() % 2001 - 1000) / 1000.0f;
            norm += (double)x[i * (size_t)d + (size_t)j] * x[i * (size_t)d + (size_t)j];
        }
        for (int j = 0; j < d; j++)
            x[i * (size_t)d + (size_t)j] /= (float)sqrt(norm);
        ids[i] = 1000 + 7 * (idx_t)((i * 37) % n);
    }
    assert_int_equal(faiss_index_factory(out, d, kind, METRIC_INNER_PRODUCT), 0);
    if (!faiss_Index_is_trained(*out))
        assert_int_equal(faiss_Index_train(*out, (idx_t)n, x), 0);
    assert_int_equal(faiss_Index_add_with_ids(*out, (idx_t)n, x, ids), 0);
    char *data = NULL;
    FILE *f = open_memstream(&data, len);
    assert_non_null(f);
    assert_int_equal(faiss_write_index(*out, f), 0);
    assert_int_equal(fclose(f), 0);
    free(x);
    free(ids);
    return data;
}

/* An index file as vector.c writes it (kb_vec_file_wrap) into a buffer
 * aligned as a mapping is: a flat index's vectors on a 64-byte boundary,
 * searched where they lie with FAISS's results (the same ids in the same
 * order, the same scores), whatever the depth; any other index, or FAISS's
 * bytes alone (an older kb's file, the vectors at 82), is left to FAISS;
 * a damaged pad, length or vector is caught. */
static void test_vec_file_flat(void **state)
{
    (void)state;
    srand(27);
    size_t len = 0, off = 0, flen = 0, n = 300;
    int d = 24;
    FaissIndex *index = NULL;
    char *raw = faiss_bytes("IDMap2,Flat", d, n, &len, &index);
    kb_buf b;
    kb_buf_init(&b, 0);
    assert_int_equal(kb_vec_file_wrap(raw, len, &b), KB_OK);
    assert_true(memcmp(b.data + b.len - 95, "kbfaiss2 ", 9) == 0);
    char *file = NULL;
    assert_int_equal(posix_memalign((void **)&file, 4096, b.len), 0);
    memcpy(file, b.data, b.len);
    assert_null(kb_vec_file_read(file, b.len, 1, &off, &flen));
    assert_int_equal(flen, len);
    assert_int_equal((off + 82) % 64, 0);
    assert_memory_equal(file + off, raw, len);
    kb_vec_flat f;
    assert_int_equal(kb_vec_flat_open(file + off, flen, &f), 1);
    assert_int_equal(f.n, n);
    assert_int_equal(f.dim, d);
    float q[24], fd[300], kd[300];
    idx_t fl[300];
    int64_t kl[300];
    for (int round = 0; round < 5; round++) {
        for (int j = 0; j < d; j++)
            q[j] = (float)(rand() % 2001 - 1000) / 1000.0f;
        const size_t wants[] = { 1, 10, 240, 300 };
        for (size_t w = 0; w < 4; w++) {
            size_t want = wants[w];
            assert_int_equal(faiss_Index_search(index, 1, q, (idx_t)want, fd, fl), 0);
            assert_int_equal(kb_vec_flat_search(&f, q, want, kd, kl), KB_OK);
            for (size_t i = 0; i < want; i++) {
                assert_int_equal(kl[i], fl[i]);
                assert_float_equal(kd[i], fd[i], 1e-5);
            }
        }
    }
    /* FAISS's bytes alone: the vectors at 82, not where a float is read */
    memcpy(file, raw, len);
    assert_int_equal(kb_vec_flat_open(file, len, &f), 0);
    /* a header that does not fill the bytes exactly: not flat */
    assert_int_equal(kb_vec_flat_open(file + off, flen - 8, &f), 0);
    /* damage: a byte of the pad, the trailer's length, a vector */
    memcpy(file, b.data, b.len);
    file[3] = 1;
    assert_string_equal(kb_vec_file_read(file, b.len, 0, &off, &flen),
                        "is not the size it was written with");
    file[3] = 0;
    file[b.len - 95 + 9 + 19]--;
    assert_non_null(kb_vec_file_read(file, b.len, 1, &off, &flen));
    file[b.len - 95 + 9 + 19]++;
    file[off + 82 + 5] ^= 1;
    assert_string_equal(kb_vec_file_read(file, b.len, 1, &off, &flen),
                        "does not match its checksum (damaged)");
    free(file);
    free(raw);
    faiss_Index_free(index);
    /* another kind: no pad, kbfaiss1, never searched here */
    raw = faiss_bytes("IDMap2,HNSW8", d, 100, &len, &index);
    kb_buf_reset(&b);
    assert_int_equal(kb_vec_file_wrap(raw, len, &b), KB_OK);
    assert_int_equal(b.len, len + 95);
    assert_true(memcmp(b.data + len, "kbfaiss1 ", 9) == 0);
    assert_null(kb_vec_file_read(b.data, b.len, 1, &off, &flen));
    assert_int_equal(off, 0);
    assert_int_equal(kb_vec_flat_open(b.data, flen, &f), 0);
    kb_buf_release(&b);
    free(raw);
    faiss_Index_free(index);
}

/* ------------------------------------------------------------ vec_stamp.c */

/* The vector index file's stamp (issue 27) is trusted for the file it was
 * made of alone: its generation, device, inode, size and both times, and
 * its first block and one other still hashing as recorded. Any of those
 * changed, the first block damaged, a stamp cut short or counting no
 * vectors: checked whole (0), never trusted. */
static void test_vec_stamp(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("stamp");
    kb_store *s = tu_open_kb(dir);
    size_t size = 3 * (256u << 10) + 1000, n = 0;   /* four blocks, the last short */
    unsigned char *data = malloc(size);
    assert_non_null(data);
    for (size_t i = 0; i < size; i++)
        data[i] = (unsigned char)(i * 131 + (i >> 9));
    struct stat st, o;
    memset(&st, 0, sizeof st);
    st.st_dev = 5;
    st.st_ino = 77;
    st.st_size = (off_t)size;
    st.st_mtim = (struct timespec){ 1700000000, 123 };
    st.st_ctim = (struct timespec){ 1700000001, 456 };
    assert_int_equal(kb_vec_stamp_check(s, &st, 9, data, &n), 0);   /* none yet */
    char *stamp = kb_vec_stamp_make(&st, 9, data, size, 42);
    assert_non_null(stamp);
    kb_vec_stamp_save(s, stamp);
    for (int k = 0; k < 8; k++) {
        n = 0;
        assert_int_equal(kb_vec_stamp_check(s, &st, 9, data, &n), 1);
        assert_int_equal(n, 42);
    }
    assert_int_equal(kb_vec_stamp_check(s, &st, 10, data, &n), 0);
    o = st, o.st_dev++;
    assert_int_equal(kb_vec_stamp_check(s, &o, 9, data, &n), 0);
    o = st, o.st_ino++;
    assert_int_equal(kb_vec_stamp_check(s, &o, 9, data, &n), 0);
    o = st, o.st_size--;
    assert_int_equal(kb_vec_stamp_check(s, &o, 9, data, &n), 0);
    o = st, o.st_mtim.tv_nsec++;
    assert_int_equal(kb_vec_stamp_check(s, &o, 9, data, &n), 0);
    o = st, o.st_ctim.tv_nsec++;
    assert_int_equal(kb_vec_stamp_check(s, &o, 9, data, &n), 0);
    o = st, o.st_ctim.tv_sec--;
    assert_int_equal(kb_vec_stamp_check(s, &o, 9, data, &n), 0);
    data[100] ^= 1;   /* the first block is always checked */
    for (int k = 0; k < 8; k++)
        assert_int_equal(kb_vec_stamp_check(s, &st, 9, data, &n), 0);
    data[100] ^= 1;
    assert_int_equal(kb_vec_stamp_check(s, &st, 9, data, &n), 1);
    /* a stamp missing its last block's hash, or counting no vectors */
    kb_err err;
    kb_err_clear(&err);
    char *cut = kb_strndup(stamp, strlen(stamp) - 65);
    assert_int_equal(kb_store_meta_set(s, "vec_stamp", cut, &err), KB_OK);
    assert_int_equal(kb_vec_stamp_check(s, &st, 9, data, &n), 0);
    char *zero = kb_vec_stamp_make(&st, 9, data, size, 0);
    kb_vec_stamp_save(s, zero);
    assert_int_equal(kb_vec_stamp_check(s, &st, 9, data, &n), 0);
    free(zero);
    free(cut);
    free(stamp);
    free(data);
    kb_store_close(s);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunk_budget_and_code),
        cmocka_unit_test(test_chunk_tiny_section_and_papers),
        cmocka_unit_test(test_chunk_caption_joins_code),
        cmocka_unit_test(test_chunk_stubs_join),
        cmocka_unit_test(test_chunk_tiny_siblings_merge),
        cmocka_unit_test(test_chunk_linear_and_bounded),
        cmocka_unit_test(test_fts_match_identifiers),
        cmocka_unit_test(test_fts_idents),
        cmocka_unit_test(test_fts_match_dedup_and_cap),
        cmocka_unit_test(test_fts_never_syntax_error),
        cmocka_unit_test(test_store_schema),
        cmocka_unit_test(test_faiss_links),
        cmocka_unit_test(test_vec_file_flat),
        cmocka_unit_test(test_vec_stamp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
