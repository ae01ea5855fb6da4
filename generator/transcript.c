/* transcript.c - a run's folder and its transcript (gen.h, "transcript.c"):
 * the folder and its id, the events written one JSON line each as the
 * run goes (docs/formats.md, "Transcripts"), and a recorded run read back for its
 * replay. */
#include "generator/gen.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TRANSCRIPT_MAX_BYTES (256u << 20)

/* ------------------------------------------------------------------ names */

static const char *const strategy_names[] = { "refine", "population" };

const char *kb_gen_strategy_name(kb_gen_strategy s)
{
    return (unsigned)s < 2 ? strategy_names[s] : "refine";
}

int kb_gen_strategy_parse(const char *name, kb_gen_strategy *out)
{
    for (int i = 0; i < 2; i++)
        if (name && strcmp(name, strategy_names[i]) == 0) {
            *out = (kb_gen_strategy)i;
            return 0;
        }
    return -1;
}

/* ------------------------------------------------------------------ events */

kb_rc kb_gen_tr_write(kb_gen_state *R, cJSON *ev, int ok)
{
    if (!ev || !ok) {
        cJSON_Delete(ev);
        return R->tr_rc = KB_ERR_NOMEM;
    }
    char *line = cJSON_PrintUnformatted(ev);
    cJSON_Delete(ev);
    if (!line)
        return R->tr_rc = KB_ERR_NOMEM;
    if (R->tr && R->tr_rc == KB_OK &&
        (fputs(line, R->tr) < 0 || fputc('\n', R->tr) < 0 || fflush(R->tr) != 0))
        R->tr_rc = KB_ERR_IO;
    free(line);
    return R->tr_rc;
}

kb_rc kb_gen_tr_error(const kb_gen_state *R, kb_err *err)
{
    return kb_err_set(err, R->tr_rc ? R->tr_rc : KB_ERR_NOMEM,
                      "cannot write the transcript in '%s'", R->dir);
}

cJSON *kb_gen_event(const char *name, const char *key, int *ok)
{
    cJSON *e = cJSON_CreateObject();
    *ok = e != NULL;
    kb_json_put_str(e, "event", name, ok);
    if (key)
        kb_json_put_str(e, "key", key, ok);
    return e;
}

/* The JSON text s parsed, else s as a string. */
static cJSON *json_or_string(const char *s)
{
    if (!s || !*s)
        return cJSON_CreateNull();
    cJSON *j = cJSON_Parse(s);
    return j ? j : cJSON_CreateString(s);
}

kb_rc kb_gen_exchange_events(kb_gen_state *R, const char *key, const kb_gen_attempt *a,
                             const kb_llm_reply *reply, int replied, const char *error)
{
    int ok;
    cJSON *e = kb_gen_event("request", key, &ok);
    if (a) {
        kb_json_put_num(e, "round", a->round, &ok);
        kb_json_put_num(e, "sample", a->sample, &ok);
        kb_json_put_str(e, "prompt", R->prompts[a->prompt].hash, &ok);
    }
    kb_json_put_item(e, "body", json_or_string(reply->request_json), &ok);
    kb_gen_tr_write(R, e, ok);
    e = kb_gen_event("reply", key, &ok);
    if (a) {
        kb_json_put_num(e, "round", a->round, &ok);
        kb_json_put_num(e, "sample", a->sample, &ok);
    }
    kb_json_put_bool(e, "ok", replied, &ok);
    kb_json_put_str(e, "text", reply->text ? reply->text : "", &ok);
    kb_json_put_str(e, "finish_reason", reply->finish_reason ? reply->finish_reason : "",
                    &ok);
    kb_json_put_num(e, "prompt_tokens", (double)reply->prompt_tokens, &ok);
    kb_json_put_num(e, "completion_tokens", (double)reply->completion_tokens, &ok);
    kb_json_put_num(e, "attempts", reply->attempts, &ok);
    kb_json_put_bool(e, "streamed", reply->streamed, &ok);
    kb_json_put_num(e, "ms", reply->ms, &ok);
    kb_json_put_str(e, "error", error, &ok);
    kb_json_put_str(e, "raw", reply->raw && *reply->raw ? reply->raw : NULL, &ok);
    return kb_gen_tr_write(R, e, ok);
}

/* ------------------------------------------------------------------ replay */

/* Reads RUN's transcript: its recorded options into R->eff, its replies
 * and verdicts by key. */
kb_rc kb_gen_load_replay(kb_gen_state *R, kb_err *err)
{
    const char *rp = R->o->replay;
    /* a path to a run's folder, else a run id in runs_dir */
    struct stat st;
    char *dir = strchr(rp, '/') || !R->o->runs_dir ||
                (stat(rp, &st) == 0 && S_ISDIR(st.st_mode))
                ? kb_strdup(rp) : kb_path_join(R->o->runs_dir, rp);
    char *path = dir ? kb_path_join(dir, "transcript.jsonl") : NULL;
    if (!path) {
        free(dir);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_read_file(path, TRANSCRIPT_MAX_BYTES, &b, err);
    if (rc != KB_OK) {
        kb_err_clear(err);
        rc = kb_err_set(err, KB_ERR_NOTFOUND, "no run '%s' to replay: cannot read '%s'", rp,
                        path);
    }
    R->replies = cJSON_CreateObject();
    R->recorded = cJSON_CreateObject();
    if (rc == KB_OK && (!R->replies || !R->recorded))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    int have_run = 0, lineno = 0;
    char *save = NULL;
    for (char *line = rc == KB_OK && b.data ? strtok_r(b.data, "\n", &save) : NULL;
         line && rc == KB_OK; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        cJSON *e = cJSON_Parse(line);
        const char *ev = kb_gen_jstr(e, "event", "");
        const char *key = kb_gen_jstr(e, "key", "");
        if (!e) {
            rc = kb_err_set(err, KB_ERR_PARSE, "'%s' line %d is not JSON", path, lineno);
        } else if (strcmp(ev, "run") == 0 && !have_run) {
            have_run = 1;
            free(R->replay_of);
            if (!(R->replay_of = kb_strdup(kb_gen_jstr(e, "id", ""))))
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            free(R->replay_model);
            free(R->replay_task);
            if (!(R->replay_model = kb_strdup(kb_gen_jstr(e, "model", ""))) ||
                !(R->replay_task = kb_strdup(kb_gen_jstr(e, "task", ""))))
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            R->eff.samples = (int)kb_gen_jnum(e, "samples", R->eff.samples);
            R->eff.rounds = (int)kb_gen_jnum(e, "rounds", R->eff.rounds);
            R->eff.population = (int)kb_gen_jnum(e, "population", R->eff.population);
            R->eff.budget_tokens = (long)kb_gen_jnum(e, "budget_tokens", R->eff.budget_tokens);
            R->eff.floor_fraction = kb_gen_jnum(e, "floor_fraction", R->eff.floor_fraction);
            R->eff.compile_only = cJSON_IsTrue(kb_gen_jget(e, "compile_only"));
            kb_gen_strategy_parse(kb_gen_jstr(e, "strategy", "refine"), &R->eff.strategy);
        } else if ((strcmp(ev, "reply") == 0 || strcmp(ev, "verdict") == 0 ||
                    strcmp(ev, "candidate") == 0) && *key) {
            cJSON *into = strcmp(ev, "reply") == 0 ? R->replies : R->recorded;
            if (strcmp(ev, "candidate") == 0) {
                /* a candidate without a kernel is its own verdict */
                const char *s = kb_gen_jstr(e, "status", "ok");
                if (strcmp(s, "ok") != 0 && !kb_gen_jget(into, key)) {
                    int ok = 1;
                    kb_json_put_str(kb_json_put_obj(into, key, &ok), "verdict", s, &ok);
                    if (!ok)
                        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
                }
            } else if (!kb_gen_jget(into, key)) {
                cJSON *v = cJSON_Duplicate(e, 1);
                if (!v || !cJSON_AddItemToObject(into, key, v)) {
                    cJSON_Delete(v);
                    rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
                }
            }
        }
        cJSON_Delete(e);
    }
    if (rc == KB_OK && !have_run)
        rc = kb_err_set(err, KB_ERR_PARSE, "'%s' has no run event: not a kb generate "
                        "transcript", path);
    kb_buf_release(&b);
    free(path);
    free(dir);
    return rc;
}

/* A recorded reply as if it had come: key's reply event into s. */
void kb_gen_replay_reply(kb_gen_state *R, const char *key, kb_gen_slot *s)
{
    const cJSON *e = kb_gen_jget(R->replies, key);
    kb_llm_reply_init(&s->reply);
    kb_err_clear(&s->err);
    s->done = 1;
    s->done_ms = kb_now_ms();
    if (!e) {
        s->rc = kb_err_set(&s->err, KB_ERR_NOTFOUND, "the transcript holds no reply for %s",
                           key);
        return;
    }
    free(s->reply.text);
    free(s->reply.finish_reason);
    s->reply.text = kb_strdup(kb_gen_jstr(e, "text", ""));
    s->reply.finish_reason = kb_strdup(kb_gen_jstr(e, "finish_reason", ""));
    s->reply.prompt_tokens = (long)kb_gen_jnum(e, "prompt_tokens", 0);
    s->reply.completion_tokens = (long)kb_gen_jnum(e, "completion_tokens", 0);
    s->reply.attempts = 0;
    s->reply.streamed = cJSON_IsTrue(kb_gen_jget(e, "streamed"));
    s->reply.ms = 0;
    if (!s->reply.text || !s->reply.finish_reason)
        s->rc = kb_err_set(&s->err, KB_ERR_NOMEM, "out of memory");
    else if (cJSON_IsString(kb_gen_jget(e, "error")))
        s->rc = kb_err_set(&s->err, KB_ERR_NET, "%s", kb_gen_jstr(e, "error", ""));
    else
        s->rc = KB_OK;
}

/* ------------------------------------------------------------------ run folder */

kb_rc kb_gen_make_run_dir(kb_gen_state *R, kb_err *err)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    unsigned char rnd[4] = { 0 };
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, rnd, sizeof rnd) != (ssize_t)sizeof rnd)
            memset(rnd, 0, sizeof rnd);
        close(fd);
    }
    unsigned v = ((unsigned)rnd[0] << 16 | (unsigned)rnd[1] << 8 | rnd[2]) ^ (unsigned)getpid();
    snprintf(R->id, sizeof R->id, "%s-%06x", stamp, v & 0xffffffu);
    kb_rc rc = kb_mkdirs(R->eff.runs_dir, err);
    if (rc == KB_OK && !(R->dir = kb_path_join(R->eff.runs_dir, R->id)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && mkdir(R->dir, 0755) != 0)
        rc = kb_err_set(err, KB_ERR_IO, "cannot create '%s': %s", R->dir, strerror(errno));
    if (rc == KB_OK && !(R->kdir = kb_path_join(R->dir, "kernels")))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && mkdir(R->kdir, 0755) != 0)
        rc = kb_err_set(err, KB_ERR_IO, "cannot create '%s': %s", R->kdir, strerror(errno));
    char *tp = rc == KB_OK ? kb_path_join(R->dir, "transcript.jsonl") : NULL;
    if (rc == KB_OK && !tp)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && !(R->tr = fopen(tp, "wx")))
        rc = kb_err_set(err, KB_ERR_IO, "cannot create '%s': %s", tp, strerror(errno));
    free(tp);
    return rc;
}

/* The URL without its query string (a key may travel there). */
static cJSON *url_json(const char *url)
{
    if (!url)
        return cJSON_CreateNull();
    const char *q = strpbrk(url, "?#");
    char *u = q ? kb_strndup(url, (size_t)(q - url)) : kb_strdup(url);
    cJSON *j = u ? cJSON_CreateString(u) : NULL;
    free(u);
    return j;
}

kb_rc kb_gen_write_run_event(kb_gen_state *R, kb_err *err)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const kb_llm_opts *l = R->eff.llm;
    int ok;
    cJSON *e = kb_gen_event("run", NULL, &ok);
    kb_json_put_num(e, "kb_generate", 1, &ok);
    kb_json_put_str(e, "id", R->id, &ok);
    kb_json_put_str(e, "task", R->task->name, &ok);
    kb_json_put_str(e, "task_dir", R->eff.task_dir, &ok);
    kb_json_put_str(e, "model", R->model, &ok);
    kb_json_put_str(e, "api", l ? (l->api == KB_LLM_ANTHROPIC ? "anthropic" : "openai")
                              : NULL, &ok);
    kb_json_put_item(e, "url", url_json(l ? l->url : NULL), &ok);
    kb_json_put_str(e, "strategy", kb_gen_strategy_name(R->eff.strategy), &ok);
    kb_json_put_num(e, "samples", R->eff.samples, &ok);
    kb_json_put_num(e, "rounds", R->eff.rounds, &ok);
    kb_json_put_num(e, "population", R->eff.population, &ok);
    kb_json_put_bool(e, "compile_only", R->eff.compile_only, &ok);
    kb_json_put_num(e, "budget_tokens", (double)R->eff.budget_tokens, &ok);
    kb_json_put_num(e, "prompt_tokens", (double)R->eff.prompt_tokens, &ok);
    kb_json_put_num(e, "floor_fraction", R->eff.floor_fraction, &ok);
    kb_json_put_str(e, "started", date, &ok);
    kb_json_put_str(e, "replay_of", R->replay_of, &ok);
    kb_json_put_item(e, "device", R->eff.device ? cJSON_Duplicate(R->eff.device, 1) : NULL,
                     &ok);
    if (kb_gen_tr_write(R, e, ok) != KB_OK)
        return kb_gen_tr_error(R, err);
    return KB_OK;
}

