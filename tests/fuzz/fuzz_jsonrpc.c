/* fuzz_jsonrpc.c - JSON-RPC lines of `kb mcp` into the MCP core
 * (kb_mcp_handle), one session per input, over a small real KB (the
 * Markdown fixtures, lexical) and the skill library as resources. Every
 * reply is one line of valid UTF-8 JSON, an object with jsonrpc "2.0" and
 * a result or an error, and its HTTP status one the transport knows. */
#include "serve/serve.h"
#include "kb/kb_int.h"
#include "tests/fuzz/fuzz.h"

#include <ftw.h>
#include <utf8proc.h>

static char kb_path[64];
static kb_store *store;
static kb_config config;
static kb_mcp *server;

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

static void cleanup(void)
{
    kb_mcp_free(server);
    kb_store_close(store);
    kb_config_release(&config);
    if (kb_path[0])
        nftw(kb_path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The KB and the server, once: the fixtures ingested without vectors. */
static void setup(void)
{
    kb_err err;
    kb_err_clear(&err);
    kb_log_set_level(KB_LOG_QUIET);
    snprintf(kb_path, sizeof kb_path, "/tmp/kb-fuzz-jsonrpc.XXXXXX");
    fuzz_check(mkdtemp(kb_path) != NULL);
    atexit(cleanup);
    fuzz_check(kb_store_open(kb_path, KB_STORE_CREATE, &store, &err) == KB_OK);
    fuzz_check(kb_config_load(&config, &err) == KB_OK);
    const char *top = getenv("KB_TOP") ? getenv("KB_TOP") : ".";
    char md[1024], skills[1024];
    snprintf(md, sizeof md, "%s/tests/fixtures/md", top);
    snprintf(skills, sizeof skills, "%s/corpus/skills", top);
    char *targets[] = { md };
    kb_ingest_opts io = { .config = &config };   /* embed off: lexical */
    kb_ingest_stats stats;
    fuzz_check(kb_ingest_run(store, &io, targets, 1, &stats, &err) == KB_OK);
    kb_mcp_opts o;
    kb_mcp_opts_init(&o);
    o.skills_dir = skills;
    fuzz_check(kb_mcp_open(&o, &server, &err) == KB_OK);
}

static int utf8_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i,
                                              (utf8proc_ssize_t)(n - i), &c);
        if (k <= 0)
            return 0;
        i += (size_t)k;
    }
    return 1;
}

static void check_reply(const kb_mcp_reply *r)
{
    static const int statuses[] = { 200, 202, 400, 404 };
    int known = 0;
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
        known |= r->http_status == statuses[i];
    fuzz_check(known);
    if (!r->text) {
        fuzz_check(r->http_status == 202);
        return;
    }
    size_t n = strlen(r->text);
    fuzz_check(!memchr(r->text, '\n', n) && utf8_ok(r->text, n));
    cJSON *j = cJSON_Parse(r->text);
    fuzz_check(cJSON_IsObject(j));
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "jsonrpc");
    fuzz_check(cJSON_IsString(v) && strcmp(v->valuestring, "2.0") == 0);
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "result");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    fuzz_check((res != NULL) != (e != NULL));
    if (e)
        fuzz_check(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(e, "code")) &&
                   cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "message")));
    cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!server)
        setup();
    kb_mcp_session *s = NULL;
    kb_err err;
    kb_err_clear(&err);
    fuzz_check(kb_mcp_session_open(&s, &err) == KB_OK);
    kb_tool_ctx ctx = { .store = store, .config = &config,
                        .budget_tokens = KB_TOOL_BUDGET_DEFAULT };
    /* each line a message, as kb mcp reads them; the bytes copied so that
     * a read past a line's end is ASan's to see */
    for (size_t at = 0; at < size;) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t len = (size_t)((nl ? nl : data + size) - (data + at));
        char *line = malloc(len ? len : 1);
        fuzz_check(line != NULL);
        memcpy(line, data + at, len);
        kb_mcp_reply r;
        fuzz_check(kb_mcp_handle(server, s, &ctx, line, len, NULL, &r, &err) == KB_OK);
        check_reply(&r);
        free(r.text);
        free(line);
        at += len + 1;
    }
    kb_mcp_session_free(s);
    return 0;
}
