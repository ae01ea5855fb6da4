/* test_scripted_llm.h - the scripted LLM server (tests/llm/scripted_llm.py)
 * on 127.0.0.1 for the unit tests of kb's LLM clients (test_llm,
 * test_rerank_llm): one server a test binary, started by the group's
 * setup; each case loads its script (POST /_scripted/load, which also
 * empties the request log) and reads the log back. Include after
 * test_util.h. */
#ifndef KB_TEST_SCRIPTED_LLM_H
#define KB_TEST_SCRIPTED_LLM_H

#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    pid_t pid;
    unsigned port;
    char *dir;        /* scratch: the log, scripts written by a test */
    char *log;        /* the request log, one JSON line a request */
    char base[64];    /* http://127.0.0.1:PORT */
    int nscripts;
} tu_llm_server;

/* Starts the server with an empty script in a scratch folder named
 * after name. */
static inline void tu_llm_server_up(tu_llm_server *s, const char *name)
{
    memset(s, 0, sizeof *s);
    s->dir = tu_tmpdir(name);
    s->log = kb_path_join(s->dir, "requests.jsonl");
    char *empty = tu_write_fixture(s->dir, "empty.json", "[]");
    char *py = kb_path_join(tu_top(), "tests/llm/scripted_llm.py");
    if (!s->log || !py)
        fail_msg("out of memory");
    char *argv[] = { "python3", py, "--script", empty, "--log", s->log, NULL };
    s->port = tu_spawn_port(argv, &s->pid);
    snprintf(s->base, sizeof s->base, "http://127.0.0.1:%u", s->port);
    free(py);
    free(empty);
}

/* Stops it and removes its folder. */
static inline void tu_llm_server_down(tu_llm_server *s)
{
    kill(s->pid, SIGTERM);
    int st;
    while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR)
        ;
    tu_rmtree(s->dir);
    free(s->dir);
    free(s->log);
}

/* Loads the script at path, with key (NULL: none asked for). */
static inline void tu_llm_server_load(const tu_llm_server *s, const char *path,
                                      const char *key)
{
    char *abs = realpath(path, NULL);
    if (!abs)
        fail_msg("no script '%s': %s", path, strerror(errno));
    cJSON *q = cJSON_CreateObject();
    cJSON_AddStringToObject(q, "script", abs);
    if (key)
        cJSON_AddStringToObject(q, "key", key);
    char *body = cJSON_PrintUnformatted(q);
    char url[96];
    snprintf(url, sizeof url, "%s/_scripted/load", s->base);
    kb_http_request req = { .method = KB_HTTP_POST, .url = url, .body = body,
                            .body_len = strlen(body) };
    kb_http_response resp;
    kb_http_response_init(&resp);
    kb_err err;
    kb_err_clear(&err);
    if (kb_http_perform(&req, NULL, &resp, &err) != KB_OK)
        fail_msg("cannot load '%s': %s", abs, err.msg);
    kb_http_response_release(&resp);
    free(body);
    cJSON_Delete(q);
    free(abs);
}

/* ... a script written from text into the server's folder. */
static inline void tu_llm_server_load_text(tu_llm_server *s, const char *text,
                                           const char *key)
{
    char name[32];
    snprintf(name, sizeof name, "script-%d.json", ++s->nscripts);
    char *script = tu_write_fixture(s->dir, name, text);
    tu_llm_server_load(s, script, key);
    free(script);
}

/* The request log so far (caller frees; "" when nothing was logged). */
static inline char *tu_llm_server_log(const tu_llm_server *s)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    if (access(s->log, R_OK) == 0)
        tu_read_file(s->log, 0, &b);
    if (!b.data)
        tu_puts(&b, "");
    return kb_buf_detach(&b);
}

/* The log's lines parsed (caller deletes); *n gets their count. */
static inline cJSON *tu_llm_server_requests(const tu_llm_server *s, int *n)
{
    char *log = tu_llm_server_log(s);
    cJSON *all = cJSON_CreateArray();
    *n = 0;
    char *save = NULL;
    for (char *line = strtok_r(log, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(line);
        if (!j)
            fail_msg("a request log line is not JSON: %s", line);
        cJSON_AddItemToArray(all, j);
        (*n)++;
    }
    free(log);
    return all;
}

#endif
