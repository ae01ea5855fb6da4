/* generate.c - the generate-verify loop (gen.h, "generate.c"): prompts
 * with the last attempts' feedback, samples requested at once, kernels
 * extracted, deduplicated and verified, the verdicts fed back, the run's
 * transcript written as it goes, a run replayed from its transcript, and
 * the best kernel verified faster handed to writeback.c. */
#include "generator/gen.h"
#include "verify/verify.h"
#include "skills/skill.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TRANSCRIPT_MAX_BYTES (256u << 20)
#define LOG_LINES 12          /* of a compile log fed back */
#define LOG_BYTES 2000
#define FEEDBACK_MAX 6        /* attempts a refine prompt is told of */

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

void kb_gen_opts_init(kb_gen_opts *o)
{
    memset(o, 0, sizeof *o);
    o->samples = 4;
    o->rounds = 3;
    o->population = 4;
    o->prompt_tokens = 12000;
    o->repair_tokens = 800;
    o->floor_fraction = 0.9;
}

/* ------------------------------------------------------------------ feedback */

static const cJSON *item(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

static double num_or(const cJSON *o, const char *k, double d)
{
    const cJSON *v = item(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : d;
}

static const char *str_or(const cJSON *o, const char *k, const char *d)
{
    const cJSON *v = item(o, k);
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : d;
}

/* The compile log's first lines (errors first: a log of warnings and
 * errors is cut to the errors when it is long), indented. */
static kb_rc put_log(kb_buf *out, const char *log, const char *path)
{
    kb_rc rc = kb_buf_puts(out, "compile log (NVRTC):\n");
    size_t n = strlen(log);
    int errors_only = n > LOG_BYTES && strstr(log, "error");
    int lines = 0;
    size_t bytes = 0;
    for (const char *p = log; *p && rc == KB_OK && lines < LOG_LINES && bytes < LOG_BYTES;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len && (!errors_only || memmem(p, len, "error", 5))) {
            size_t take = len > 400 ? 400 : len;
            /* the candidate's path is the run's business: kernel.cu */
            size_t pl = path ? strlen(path) : 0;
            rc = kb_buf_puts(out, "  ");
            for (size_t k = 0; rc == KB_OK && k < take;) {
                if (pl && k + pl <= len && memcmp(p + k, path, pl) == 0) {
                    rc = kb_buf_puts(out, "kernel.cu");
                    k += pl;
                } else {
                    rc = kb_buf_putc(out, p[k++]);
                }
            }
            if (rc == KB_OK)
                rc = kb_buf_printf(out, "%s\n", take < len ? " ..." : "");
            lines++;
            bytes += take;
        }
        p = nl ? nl + 1 : p + len;
    }
    if (rc == KB_OK && (lines >= LOG_LINES || bytes >= LOG_BYTES))
        rc = kb_buf_puts(out, "  ... (log trimmed)\n");
    return rc;
}

/* Each distinct failing shape's first failing check: the output, its
 * first mismatch. */
static kb_rc put_checks(kb_buf *out, const cJSON *checks)
{
    kb_rc rc = KB_OK;
    const char *shapes[16];
    size_t nshapes = 0;
    int header = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, checks) {
        if (rc != KB_OK)
            break;
        if (cJSON_IsTrue(item(c, "ok")) || !cJSON_IsFalse(item(c, "ok")))
            continue;
        const char *shape = str_or(c, "shape", "?");
        int seen = 0;
        for (size_t i = 0; i < nshapes; i++)
            seen |= strcmp(shapes[i], shape) == 0;
        if (seen || nshapes == 16)
            continue;
        shapes[nshapes++] = shape;
        if (!header++)
            rc = kb_buf_puts(out, "failing checks (first per shape):\n");
        if (rc == KB_OK)
            rc = kb_buf_printf(out, "  shape '%s', poison %s, inputs %s", shape,
                               str_or(c, "poison", "?"), str_or(c, "inputs", "fresh"));
        const cJSON *o;
        cJSON_ArrayForEach(o, item(c, "outputs")) {
            if (rc != KB_OK || num_or(o, "mismatches", 0) <= 0)
                continue;
            /* kb-verify writes a NaN or an infinity as null */
            char cv[32], rv[32];
            const cJSON *cj = item(o, "candidate_at_first_bad"),
                        *rj = item(o, "reference_at_first_bad");
            snprintf(cv, sizeof cv, cJSON_IsNumber(cj) ? "%g" : "non-finite",
                     cJSON_IsNumber(cj) ? cj->valuedouble : 0);
            snprintf(rv, sizeof rv, cJSON_IsNumber(rj) ? "%g" : "non-finite",
                     cJSON_IsNumber(rj) ? rj->valuedouble : 0);
            rc = kb_buf_printf(out, "; output '%s': %.0f mismatches, %.0f non-finite, "
                               "first at index %.0f: candidate %s, reference %s%s",
                               str_or(o, "name", "?"), num_or(o, "mismatches", 0),
                               num_or(o, "nonfinite", 0), num_or(o, "first_bad", -1),
                               cv, rv, cJSON_IsTrue(item(o, "stale")) ? " (a stale result)" : "");
        }
        if (rc == KB_OK && cJSON_IsFalse(item(c, "inputs_unchanged")))
            rc = kb_buf_puts(out, "; the kernel changed an input");
        if (rc == KB_OK && cJSON_IsFalse(item(c, "guards_intact")))
            rc = kb_buf_puts(out, "; it wrote outside its buffers");
        if (rc == KB_OK && item(c, "error"))
            rc = kb_buf_printf(out, "; CUDA error %s", str_or(c, "error", "?"));
        if (rc == KB_OK)
            rc = kb_buf_putc(out, '\n');
    }
    return rc;
}

kb_rc kb_gen_feedback(const char *label, const kb_extracted *x, const kb_verify_result *r,
                      kb_buf *out)
{
    kb_rc rc = kb_buf_printf(out, "### %s: ", label ? label : "attempt");
    if (rc != KB_OK)
        return rc;
    if (!r) {
        static const char *const what[] = { "ok", "no code", "no kernel", "host code" };
        return kb_buf_printf(out, "%s\n%s\n\n",
                             x ? what[x->status <= KB_EXTRACT_HOST_CODE ? x->status : 0]
                               : "no reply",
                             x && x->message ? x->message : "the request got no reply");
    }
    rc = kb_buf_printf(out, "%s\n", r->verdict_name);
    if (rc == KB_OK && *r->reason)
        rc = kb_buf_printf(out, "reason: %s\n", r->reason);
    if (rc == KB_OK && r->compile.present && *r->compile.log &&
        (r->verdict == KB_VERIFY_COMPILE_ERROR || r->compile.ok))
        rc = put_log(out, r->compile.log, r->candidate);
    for (size_t i = 0; rc == KB_OK && i < r->compile.nkernels; i++) {
        const kb_verify_kernel *k = &r->compile.kernels[i];
        rc = kb_buf_printf(out, "kernel %s: %d registers, %ld B static shared memory, %ld B "
                           "local memory, spills %ld B stored / %ld B loaded\n", k->name,
                           k->registers, k->shared_static_bytes, k->local_bytes,
                           k->spill_store_bytes, k->spill_load_bytes);
    }
    if (rc == KB_OK && r->json)
        rc = put_checks(out, item(r->json, "checks"));
    for (size_t i = 0; rc == KB_OK && i < r->ntimings; i++) {
        const kb_verify_timing *t = &r->timings[i];
        if (i == 0)
            rc = kb_buf_puts(out, "timings:\n");
        if (rc == KB_OK)
            rc = kb_buf_printf(out, "  %s: candidate %.4f ms (95%% CI %.4f-%.4f), %s %.4f ms: "
                               "%.2fx", t->shape, t->candidate_ms.median,
                               t->candidate_ms.ci95_lo, t->candidate_ms.ci95_hi, t->baseline,
                               t->baseline_ms.median, t->speedup);
        if (rc == KB_OK && t->floor_ms > 0 && t->candidate_ms.median > 0)
            rc = kb_buf_printf(out, "; roofline floor %.4f ms: the candidate is at %.0f%% "
                               "of the roofline", t->floor_ms,
                               100.0 * t->floor_ms / t->candidate_ms.median);
        if (rc == KB_OK)
            rc = kb_buf_putc(out, '\n');
    }
    if (rc == KB_OK && r->has_library)
        rc = kb_buf_printf(out, "against the library: %.3fx%s\n", r->library_ratio,
                           r->matches_library ? " (matches it)" : "");
    if (rc == KB_OK)
        rc = kb_buf_putc(out, '\n');
    return rc;
}

/* ------------------------------------------------------------------ the run */

/* One request's reply, filled by its thread (or from a transcript). */
typedef struct {
    const kb_llm_opts *llm;
    kb_llm_request req;
    kb_llm_reply reply;
    kb_rc rc;
    kb_err err;
    int done;
    double done_ms;           /* when the reply had come */
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
} slot;

/* One sample of one round. */
typedef struct {
    int round, sample;
    char key[24];             /* "r1s2" */
    size_t prompt;            /* index into the run's prompts */
    kb_llm_reply reply;
    kb_rc llm_rc;
    char *llm_error;          /* NULL: the request succeeded */
    kb_extracted x;
    char hash[65];
    char *file;               /* the kernel, relative to the run's folder */
    long dup_of;              /* the attempt first verified with this hash */
    int verified;
    kb_verify_result r;
    char technique[96];
    char *parent_skill;       /* the retrieved skill its line refines */
    char parent_key[24];      /* the attempt it refined, or "" */
} attempt;

typedef struct {
    const kb_gen_opts *o;
    kb_gen_opts eff;          /* o with a replay's recorded options */
    kb_task *task;
    char id[48];
    char *dir, *kdir;
    FILE *tr;
    kb_rc tr_rc;
    attempt *at;
    size_t nat, capat;
    kb_gen_prompt *prompts;
    char **prompt_parent_skill;   /* per prompt: the skill it refines */
    size_t nprompts, capprompts;
    cJSON *replies;           /* a replay's recorded replies by key */
    cJSON *recorded;          /* a replay's recorded verdicts by key */
    char *replay_of;
    long tokens_prompt, tokens_completion;
    kb_gen_progress pg;
    long best;                /* the best faster kernel (write-back) */
    cJSON *rounds;            /* per round: its time by step */
    double t0;
    const char *model;
    char *replay_model;       /* a replay's recorded model */
    char *replay_task;        /* and task */
    char *seed_skill, *seed_src;   /* the retrieved skill a run refines */
} run;

static kb_rc tr_write(run *R, cJSON *ev)
{
    if (!ev) {
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

/* A new event object {"event": name, "key": key}. */
static cJSON *event(const char *name, const char *key)
{
    cJSON *e = cJSON_CreateObject();
    if (e && (!cJSON_AddStringToObject(e, "event", name) ||
              (key && !cJSON_AddStringToObject(e, "key", key)))) {
        cJSON_Delete(e);
        return NULL;
    }
    return e;
}

/* Adds a string (NULL: null) to e; on failure deletes e and returns NULL. */
static cJSON *add_s(cJSON *e, const char *k, const char *v)
{
    if (e && !(v ? cJSON_AddStringToObject(e, k, v) : cJSON_AddNullToObject(e, k))) {
        cJSON_Delete(e);
        return NULL;
    }
    return e;
}

static cJSON *add_n(cJSON *e, const char *k, double v)
{
    if (e && !cJSON_AddNumberToObject(e, k, v)) {
        cJSON_Delete(e);
        return NULL;
    }
    return e;
}

static cJSON *add_b(cJSON *e, const char *k, int v)
{
    if (e && !cJSON_AddBoolToObject(e, k, v)) {
        cJSON_Delete(e);
        return NULL;
    }
    return e;
}

/* Adds item (taken; NULL: null) to e. */
static cJSON *add_j(cJSON *e, const char *k, cJSON *v)
{
    if (!e) {
        cJSON_Delete(v);
        return NULL;
    }
    if (!v)
        v = cJSON_CreateNull();
    if (!v || !cJSON_AddItemToObject(e, k, v)) {
        cJSON_Delete(v);
        cJSON_Delete(e);
        return NULL;
    }
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

/* ------------------------------------------------------------------ ranking */

/* How good an attempt is, for choosing parents and the best: faster >
 * correct > compiled > incorrect > crash, timeout > refused >
 * compile_error > suspicious > error > no kernel > no reply. */
static double score(const attempt *a)
{
    if (a->llm_error)
        return 0;
    if (a->x.status != KB_EXTRACT_OK)
        return 1;
    if (!a->verified)
        return 1.5;
    double sp = a->r.has_speedup ? a->r.speedup_geomean : 0;
    if (sp > 50)
        sp = 50;
    switch (a->r.verdict) {
    case KB_VERIFY_FASTER: return 200 + sp;
    case KB_VERIFY_CORRECT: return 100 + sp;
    case KB_VERIFY_COMPILED: return 60;
    case KB_VERIFY_INCORRECT: return 40;
    case KB_VERIFY_CRASH: case KB_VERIFY_TIMEOUT: return 30;
    case KB_VERIFY_REFUSED: return 20;
    case KB_VERIFY_COMPILE_ERROR: return 10;
    case KB_VERIFY_SUSPICIOUS: return 5;
    default: return 2;
    }
}

/* The result that stands for a (its own, or the one of the attempt it
 * duplicates); NULL when nothing was verified. */
static const attempt *verdict_of(const run *R, const attempt *a)
{
    if (a->dup_of >= 0)
        return &R->at[a->dup_of];
    return a->verified ? a : NULL;
}

/* A kernel the loop keeps (as a parent, for population): correct or
 * faster; compiled when only compiling. */
static int kept(const run *R, const attempt *a)
{
    const attempt *v = verdict_of(R, a);
    if (!v || a->dup_of >= 0)
        return 0;
    return kb_verify_verdict_ok(v->r.verdict) ||
           (R->eff.compile_only && v->r.verdict == KB_VERIFY_COMPILED);
}

/* The techniques a kernel's source shows, as a signature for diversity. */
static void technique_of(const char *src, char out[96])
{
    static const struct { const char *needle, *tag; } t[] = {
        { "__shared__", "smem" }, { "__shfl", "shuffle" }, { "float4", "vector" },
        { "float2", "vector" }, { "__nv_bfloat162", "vector" }, { "__half2", "vector" },
        { "int4", "vector" }, { "wmma", "mma" }, { "mma.sync", "mma" }, { "wgmma", "mma" },
        { "cp.async", "async" }, { "memcpy_async", "async" }, { "atomic", "atomics" },
        { "#pragma unroll", "unroll" }, { "__ldg", "ldg" }, { "cooperative_groups", "cg" },
    };
    out[0] = '\0';
    size_t len = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (!strstr(src, t[i].needle) || strstr(out, t[i].tag))
            continue;
        int w = snprintf(out + len, 96 - len, "%s%s", len ? "+" : "", t[i].tag);
        if (w < 0 || (size_t)w >= 96 - len)
            break;
        len += (size_t)w;
    }
    if (!len)
        snprintf(out, 96, "plain");
}

/* ------------------------------------------------------------------ replay */

/* Reads RUN's transcript: its recorded options into R->eff, its replies
 * and verdicts by key. */
static kb_rc load_replay(run *R, kb_err *err)
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
        const char *ev = str_or(e, "event", "");
        const char *key = str_or(e, "key", "");
        if (!e) {
            rc = kb_err_set(err, KB_ERR_PARSE, "'%s' line %d is not JSON", path, lineno);
        } else if (strcmp(ev, "run") == 0 && !have_run) {
            have_run = 1;
            free(R->replay_of);
            if (!(R->replay_of = kb_strdup(str_or(e, "id", ""))))
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            free(R->replay_model);
            free(R->replay_task);
            if (!(R->replay_model = kb_strdup(str_or(e, "model", ""))) ||
                !(R->replay_task = kb_strdup(str_or(e, "task", ""))))
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            R->eff.samples = (int)num_or(e, "samples", R->eff.samples);
            R->eff.rounds = (int)num_or(e, "rounds", R->eff.rounds);
            R->eff.population = (int)num_or(e, "population", R->eff.population);
            R->eff.budget_tokens = (long)num_or(e, "budget_tokens", R->eff.budget_tokens);
            R->eff.floor_fraction = num_or(e, "floor_fraction", R->eff.floor_fraction);
            R->eff.compile_only = cJSON_IsTrue(item(e, "compile_only"));
            kb_gen_strategy_parse(str_or(e, "strategy", "refine"), &R->eff.strategy);
        } else if ((strcmp(ev, "reply") == 0 || strcmp(ev, "verdict") == 0 ||
                    strcmp(ev, "candidate") == 0) && *key) {
            cJSON *into = strcmp(ev, "reply") == 0 ? R->replies : R->recorded;
            if (strcmp(ev, "candidate") == 0) {
                /* a candidate without a kernel is its own verdict */
                const char *s = str_or(e, "status", "ok");
                if (strcmp(s, "ok") != 0 && !item(into, key)) {
                    cJSON *v = cJSON_CreateObject();
                    if (!add_s(v, "verdict", s) || !cJSON_AddItemToObject(into, key, v))
                        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
                }
            } else if (!item(into, key)) {
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
static void replay_reply(run *R, const char *key, slot *s)
{
    const cJSON *e = item(R->replies, key);
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
    s->reply.text = kb_strdup(str_or(e, "text", ""));
    s->reply.finish_reason = kb_strdup(str_or(e, "finish_reason", ""));
    s->reply.prompt_tokens = (long)num_or(e, "prompt_tokens", 0);
    s->reply.completion_tokens = (long)num_or(e, "completion_tokens", 0);
    s->reply.attempts = 0;
    s->reply.streamed = cJSON_IsTrue(item(e, "streamed"));
    s->reply.ms = 0;
    if (!s->reply.text || !s->reply.finish_reason)
        s->rc = kb_err_set(&s->err, KB_ERR_NOMEM, "out of memory");
    else if (cJSON_IsString(item(e, "error")))
        s->rc = kb_err_set(&s->err, KB_ERR_NET, "%s", str_or(e, "error", ""));
    else
        s->rc = KB_OK;
}

/* ------------------------------------------------------------------ requests */

static void *slot_main(void *p)
{
    slot *s = p;
    kb_err_clear(&s->err);
    kb_rc rc = kb_llm_complete(s->llm, &s->req, &s->reply, &s->err);
    double now = kb_now_ms();
    pthread_mutex_lock(s->mu);
    s->rc = rc;
    s->done_ms = now;
    s->done = 1;
    pthread_cond_broadcast(s->cv);
    pthread_mutex_unlock(s->mu);
    return NULL;
}

/* The request and reply events of attempt a (its reply moved in from s). */
static kb_rc record_reply(run *R, attempt *a, slot *s)
{
    kb_llm_reply_release(&a->reply);
    a->reply = s->reply;
    kb_llm_reply_init(&s->reply);
    a->llm_rc = s->rc;
    if (s->rc != KB_OK && !(a->llm_error = kb_strdup(s->err.msg)))
        return KB_ERR_NOMEM;
    R->tokens_prompt += a->reply.prompt_tokens;
    R->tokens_completion += a->reply.completion_tokens;
    cJSON *e = event("request", a->key);
    e = add_n(e, "round", a->round);
    e = add_n(e, "sample", a->sample);
    e = add_s(e, "prompt", R->prompts[a->prompt].hash);
    e = add_j(e, "body", json_or_string(a->reply.request_json));
    kb_rc rc = tr_write(R, e);
    e = event("reply", a->key);
    e = add_n(e, "round", a->round);
    e = add_n(e, "sample", a->sample);
    e = add_b(e, "ok", s->rc == KB_OK);
    e = add_s(e, "text", a->reply.text ? a->reply.text : "");
    e = add_s(e, "finish_reason", a->reply.finish_reason ? a->reply.finish_reason : "");
    e = add_n(e, "prompt_tokens", (double)a->reply.prompt_tokens);
    e = add_n(e, "completion_tokens", (double)a->reply.completion_tokens);
    e = add_n(e, "attempts", a->reply.attempts);
    e = add_b(e, "streamed", a->reply.streamed);
    e = add_n(e, "ms", a->reply.ms);
    e = add_s(e, "error", a->llm_error);
    e = add_s(e, "raw", a->reply.raw && *a->reply.raw ? a->reply.raw : NULL);
    if (rc == KB_OK)
        rc = tr_write(R, e);
    else
        cJSON_Delete(e);
    return rc;
}

/* ------------------------------------------------------------------ one attempt */

/* Extracts a's kernel, writes it to kernels/KEY.cu and verifies it
 * unless an earlier attempt had the same normalised source. */
static kb_rc extract_verify(run *R, attempt *a, double *extract_ms, double *verify_ms,
                            kb_err *err)
{
    double t = kb_now_ms();
    kb_rc rc = KB_OK;
    if (!a->llm_error)
        rc = kb_gen_extract(a->reply.text, R->task->kernel, &a->x, err);
    else
        a->x.status = KB_EXTRACT_NO_CODE;
    if (rc != KB_OK)
        return rc;
    if (!a->llm_error && a->x.status == KB_EXTRACT_OK) {
        kb_gen_source_hash(a->x.source, a->hash);
        technique_of(a->x.source, a->technique);
        for (size_t i = 0; i < R->nat && a->dup_of < 0; i++)
            if (&R->at[i] != a && R->at[i].x.status == KB_EXTRACT_OK && !R->at[i].llm_error &&
                R->at[i].dup_of < 0 && strcmp(R->at[i].hash, a->hash) == 0 &&
                R->at[i].verified)
                a->dup_of = (long)i;
        kb_buf p;
        kb_buf_init(&p, 0);
        rc = kb_buf_printf(&p, "kernels/%s.cu", a->key);
        char *abs = rc == KB_OK ? kb_path_join(R->dir, p.data) : NULL;
        if (rc == KB_OK && (!abs || !(a->file = kb_strdup(p.data))))
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        if (rc == KB_OK)
            rc = kb_write_file_atomic(abs, a->x.source, strlen(a->x.source), err);
        kb_buf_release(&p);
        *extract_ms += kb_now_ms() - t;
        cJSON *e = event("candidate", a->key);
        e = add_s(e, "status", "ok");
        e = add_s(e, "hash", a->hash);
        e = add_s(e, "file", a->file);
        e = add_s(e, "technique", a->technique);
        e = add_s(e, "parent", *a->parent_key ? a->parent_key : NULL);
        e = add_s(e, "parent_skill", a->parent_skill);
        e = add_s(e, "duplicate_of", a->dup_of >= 0 ? R->at[a->dup_of].key : NULL);
        if (rc == KB_OK && tr_write(R, e) != KB_OK)
            rc = kb_err_set(err, R->tr_rc, "cannot write the transcript in '%s'", R->dir);
        else if (rc != KB_OK)
            cJSON_Delete(e);
        if (rc == KB_OK && a->dup_of < 0) {
            double tv = kb_now_ms();
            rc = kb_verifier_run(R->eff.verifier, R->eff.task_dir, abs, &a->r, err);
            *verify_ms += kb_now_ms() - tv;
            if (rc == KB_OK) {
                a->verified = 1;
                e = event("verdict", a->key);
                e = add_s(e, "hash", a->hash);
                e = add_s(e, "verdict", a->r.verdict_name);
                e = add_s(e, "reason", a->r.reason);
                e = a->r.has_speedup ? add_n(e, "speedup", a->r.speedup_geomean)
                                     : add_j(e, "speedup", NULL);
                e = add_n(e, "ms", kb_now_ms() - tv);
                e = add_j(e, "result", a->r.json ? cJSON_Duplicate(a->r.json, 1) : NULL);
                if (tr_write(R, e) != KB_OK)
                    rc = kb_err_set(err, R->tr_rc, "cannot write the transcript in '%s'",
                                    R->dir);
            }
        }
        free(abs);
        return rc;
    }
    *extract_ms += kb_now_ms() - t;
    static const char *const st[] = { "ok", "no_code", "no_kernel", "host_code" };
    cJSON *e = event("candidate", a->key);
    e = add_s(e, "status", a->llm_error ? "no_reply" : st[a->x.status]);
    e = add_s(e, "message", a->llm_error ? a->llm_error : a->x.message);
    if (tr_write(R, e) != KB_OK)
        rc = kb_err_set(err, R->tr_rc, "cannot write the transcript in '%s'", R->dir);
    return rc;
}

/* The verdict an attempt ends with, as the summary and a replay name it. */
static const char *outcome(const run *R, const attempt *a)
{
    static const char *const st[] = { "ok", "no_code", "no_kernel", "host_code" };
    if (a->llm_error)
        return "no_reply";
    if (a->x.status != KB_EXTRACT_OK)
        return st[a->x.status];
    const attempt *v = verdict_of(R, a);
    return v ? v->r.verdict_name : "error";
}

static int all_checks_ok(const kb_verify_result *r);

static void count(run *R, const attempt *a)
{
    if (a->llm_error)
        R->pg.llm_errors++;
    else if (a->x.status != KB_EXTRACT_OK)
        R->pg.no_kernel++;
    else if (a->dup_of >= 0)
        R->pg.duplicates++;
    else if (a->verified) {
        kb_verify_verdict v = a->r.verdict <= KB_VERIFY_UNKNOWN ? a->r.verdict
                                                                : KB_VERIFY_UNKNOWN;
        R->pg.nverdicts[v]++;
        if (v == KB_VERIFY_FASTER && all_checks_ok(&a->r) &&
            (R->best < 0 || a->r.speedup_geomean > R->at[R->best].r.speedup_geomean))
            R->best = a - R->at;
        if ((v == KB_VERIFY_FASTER || v == KB_VERIFY_CORRECT) && a->r.has_speedup &&
            a->r.speedup_geomean > R->pg.best_speedup)
            R->pg.best_speedup = a->r.speedup_geomean;
    }
    R->pg.tokens = R->tokens_prompt + R->tokens_completion;
}

/* Every check of r passed (a faster verdict says so; the write-back
 * asks the JSON too). */
static int all_checks_ok(const kb_verify_result *r)
{
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, item(r->json, "checks")) {
        if (!cJSON_IsTrue(item(c, "ok")))
            return 0;
        n++;
    }
    return n > 0;
}

/* 1 when a's kernel reaches floor_fraction of the roofline on the first
 * timed shape. */
static int at_floor(const run *R, const attempt *a)
{
    if (!a->verified || !kb_verify_verdict_ok(a->r.verdict) || !a->r.ntimings)
        return 0;
    const kb_verify_timing *t = &a->r.timings[0];
    return t->floor_ms > 0 && t->candidate_ms.median > 0 &&
           t->floor_ms / t->candidate_ms.median >= R->eff.floor_fraction;
}

/* ------------------------------------------------------------------ prompts */

static int cmp_score_desc(const void *x, const void *y, void *ctx)
{
    const run *R = ctx;
    double a = score(&R->at[*(const size_t *)x]), b = score(&R->at[*(const size_t *)y]);
    return a < b ? 1 : a > b ? -1 : (*(const size_t *)x > *(const size_t *)y) -
                                    (*(const size_t *)x < *(const size_t *)y);
}

/* The population: the best kept kernels, one per technique first, then
 * the next best, at most eff.population. Indices into R->at, best first;
 * caller frees. */
static size_t *population(run *R, size_t *n)
{
    size_t *all = malloc((R->nat + 1) * sizeof *all), na = 0;
    size_t *pop = malloc((R->nat + 1) * sizeof *pop), np = 0;
    if (!all || !pop) {
        free(all);
        free(pop);
        *n = 0;
        return NULL;
    }
    for (size_t i = 0; i < R->nat; i++)
        if (kept(R, &R->at[i]))
            all[na++] = i;
    qsort_r(all, na, sizeof *all, cmp_score_desc, R);
    size_t cap = (size_t)(R->eff.population > 0 ? R->eff.population : 4);
    for (size_t i = 0; i < na && np < cap; i++) {
        int dup = 0;
        for (size_t k = 0; k < np; k++)
            dup |= strcmp(R->at[pop[k]].technique, R->at[all[i]].technique) == 0;
        if (!dup)
            pop[np++] = all[i];
    }
    for (size_t i = 0; i < na && np < cap; i++) {
        int in = 0;
        for (size_t k = 0; k < np; k++)
            in |= pop[k] == all[i];
        if (!in)
            pop[np++] = all[i];
    }
    free(all);
    *n = np;
    return pop;
}

/* Appends the feedback on attempt a, with cited passages for a failure. */
/* Appends the feedback on attempt a, its kernel too with with_source
 * (the one the errors are about, when no kept kernel is the parent), and
 * with repaired (the failure classes already given passages) the cited
 * passages for its failure. */
static kb_rc feedback_on(run *R, const attempt *a, kb_buf *fb, int with_source,
                         unsigned *repaired, double *retrieval_ms, kb_err *err)
{
    kb_buf label;
    kb_buf_init(&label, 0);
    const attempt *v = verdict_of(R, a);
    kb_rc rc = kb_buf_printf(&label, "attempt %s (round %d, sample %d)", a->key, a->round + 1,
                             a->sample + 1);
    if (rc == KB_OK && a->dup_of >= 0)
        rc = kb_buf_printf(&label, ", the same kernel as %s", R->at[a->dup_of].key);
    if (rc == KB_OK)
        rc = kb_gen_feedback(label.data, &a->x, a->llm_error || a->x.status != KB_EXTRACT_OK
                             ? NULL : v ? &v->r : NULL, fb);
    kb_buf_release(&label);
    if (rc == KB_OK && with_source && a->x.status == KB_EXTRACT_OK && a->x.source)
        rc = kb_buf_printf(fb, "Its kernel (what the verdict is about):\n```cuda\n%s```\n\n",
                           a->x.source);
    if (rc != KB_OK)
        return kb_err_set(err, rc, "out of memory");
    /* passages once per failure class of a prompt: the budget is for
     * kernels, not for the same passages again */
    if (repaired && v && R->eff.store && !kb_verify_verdict_ok(v->r.verdict) &&
        v->r.verdict != KB_VERIFY_COMPILED && v->r.verdict != KB_VERIFY_ERROR &&
        !(*repaired & (1u << v->r.verdict))) {
        *repaired |= 1u << v->r.verdict;
        double t = kb_now_ms();
        size_t before = fb->len;
        rc = kb_gen_repair_context(R->eff.store, R->eff.config, &v->r, R->eff.repair_tokens,
                                   fb, err);
        if (rc == KB_OK && fb->len > before)
            rc = kb_buf_putc(fb, '\n');
        *retrieval_ms += kb_now_ms() - t;
    }
    return rc;
}

/* Builds one prompt with feedback and parent (a kernel source, may be
 * NULL); its index in R->prompts into *ix. */
static kb_rc build_prompt(run *R, const char *feedback, const char *parent,
                          const char *parent_skill, size_t *ix, double *ms, kb_err *err)
{
    if (KB_GROW(R->prompts, R->nprompts + 1, R->capprompts) != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    size_t cap2 = R->capprompts;
    char **pps = realloc(R->prompt_parent_skill, cap2 * sizeof *pps);
    if (!pps)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    R->prompt_parent_skill = pps;
    kb_gen_prompt_opts po = {
        .store = R->eff.store, .config = R->eff.config, .tasks_dir = R->eff.tasks_dir,
        .task = R->task->name, .device = R->eff.device,
        .budget_tokens = R->eff.prompt_tokens, .feedback = feedback, .parent = parent,
    };
    kb_gen_prompt *p = &R->prompts[R->nprompts];
    memset(p, 0, sizeof *p);
    double t = kb_now_ms();
    kb_rc rc = kb_gen_prompt_build(&po, p, err);
    *ms += kb_now_ms() - t;
    if (rc != KB_OK)
        return rc;
    R->prompt_parent_skill[R->nprompts] = parent_skill ? kb_strdup(parent_skill) : NULL;
    *ix = R->nprompts++;
    cJSON *cites = cJSON_CreateArray();
    for (size_t i = 0; cites && i < p->ncites; i++) {
        const kb_gen_cite *c = &p->cites[i];
        cJSON *o = cJSON_CreateObject();
        o = add_n(o, "chunk_id", (double)c->chunk_id);
        o = add_s(o, "kind", c->kind);
        o = add_s(o, "source", c->source);
        o = add_s(o, "title", c->title);
        o = add_s(o, "heading", c->heading);
        o = add_s(o, "url", c->url);
        o = add_s(o, "skill", c->skill && *c->skill ? c->skill : NULL);
        if (!o || !cJSON_AddItemToArray(cites, o)) {
            cJSON_Delete(o);
            cJSON_Delete(cites);
            cites = NULL;
        }
    }
    char key[24];
    snprintf(key, sizeof key, "p%zu", *ix);
    cJSON *e = event("prompt", key);
    e = add_s(e, "hash", p->hash);
    e = add_n(e, "tokens", (double)p->tokens);
    e = add_s(e, "parent_skill", parent_skill);
    e = add_j(e, "cites", cites);
    e = add_s(e, "system", p->system);
    e = add_s(e, "user", p->user);
    if (tr_write(R, e) != KB_OK)
        return kb_err_set(err, R->tr_rc, "cannot write the transcript in '%s'", R->dir);
    return KB_OK;
}

/* The skill a prompt retrieved for this very task, whose kernel a first
 * round refines: its name and kernel.cu (*src, caller frees). */
static kb_rc retrieved_skill_kernel(run *R, const kb_gen_prompt *p, char **name, char **src)
{
    *name = *src = NULL;
    if (!R->eff.skills_dir)
        return KB_OK;
    for (size_t i = 0; i < p->ncites; i++) {
        const kb_gen_cite *c = &p->cites[i];
        if (!c->skill || !*c->skill || !kb_skill_name_ok(c->skill))
            continue;
        char *dir = kb_path_join(R->eff.skills_dir, c->skill);
        char *cu = dir ? kb_path_join(dir, "kernel.cu") : NULL;
        kb_skill s;
        kb_skill_init(&s);
        kb_err e;
        kb_err_clear(&e);
        kb_buf b;
        kb_buf_init(&b, 0);
        int ok = cu && kb_skill_load(dir, &s, NULL, &e) == KB_OK &&
                 kb_skill_get(&s, "kb-task") &&
                 strcmp(kb_skill_get(&s, "kb-task"), R->task->name) == 0 &&
                 kb_skill_status_of(&s) != KB_SKILL_RETIRED &&
                 kb_read_file(cu, 1u << 20, &b, &e) == KB_OK && b.len;
        kb_skill_release(&s);
        free(dir);
        free(cu);
        if (ok) {
            *src = kb_buf_detach(&b);
            *name = kb_strdup(c->skill);
            if (!*src || !*name) {
                free(*src);
                free(*name);
                *name = *src = NULL;
                return KB_ERR_NOMEM;
            }
            return KB_OK;
        }
        kb_buf_release(&b);
    }
    return KB_OK;
}

/* The skill retrieved for this task whose kernel the run refines while
 * it has no kernel of its own: a plain prompt's retrieval tells it. */
static kb_rc find_seed(run *R, kb_err *err)
{
    if (!R->eff.skills_dir)
        return KB_OK;
    kb_gen_prompt_opts po = {
        .store = R->eff.store, .config = R->eff.config, .tasks_dir = R->eff.tasks_dir,
        .task = R->task->name, .device = R->eff.device,
        .budget_tokens = R->eff.prompt_tokens,
    };
    kb_gen_prompt p;
    memset(&p, 0, sizeof p);
    kb_rc rc = kb_gen_prompt_build(&po, &p, err);
    if (rc == KB_OK && retrieved_skill_kernel(R, &p, &R->seed_skill, &R->seed_src) != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_gen_prompt_release(&p);
    return rc;
}

/* ------------------------------------------------------------------ rounds */

/* One round: its prompts, its samples requested at once, each reply
 * extracted and verified in sample order as it comes. */
static kb_rc do_round(run *R, int round, int *stop_floor, int *all_failed, cJSON *rj,
                      kb_err *err)
{
    int n = R->eff.samples;
    double t_round = kb_now_ms(), retrieval_ms = 0, prompt_ms = 0, extract_ms = 0,
           verify_ms = 0, llm_first = 0, llm_last = 0, llm_sum = 0;
    size_t first = R->nat;
    if (KB_GROW(R->at, R->nat + (size_t)n, R->capat) != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_buf fb;
    kb_buf_init(&fb, 0);
    kb_rc rc = KB_OK;
    size_t *pop = NULL, npop = 0;
    slot *slots = calloc((size_t)n, sizeof *slots);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    int *started = calloc((size_t)n, sizeof *started);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    if (!slots || !th || !started) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* the feedback: refine tells of the last round's attempts (the best
     * first) and refines the best kernel so far; population draws a
     * parent per sample from the best kept kernels, one per technique */
    R->pg.round = round + 1;
    double tp = kb_now_ms();
    long refine_parent = -1;
    if (R->eff.strategy == KB_GEN_POPULATION)
        pop = population(R, &npop);
    if (R->nat) {
        size_t last_first = R->nat;
        while (last_first > 0 && R->at[last_first - 1].round == round - 1)
            last_first--;
        size_t *ord = malloc((R->nat - last_first + 1) * sizeof *ord), no = 0;
        if (!ord) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (size_t i = last_first; i < R->nat; i++)
            ord[no++] = i;
        qsort_r(ord, no, sizeof *ord, cmp_score_desc, R);
        /* the kernel to refine: the best kept so far; without one, the
         * best attempt of the last round that has a kernel is shown with
         * its feedback (the prompt's parent is a kernel that holds) */
        for (size_t i = 0; i < R->nat; i++)
            if (kept(R, &R->at[i]) &&
                (refine_parent < 0 || score(&R->at[i]) > score(&R->at[refine_parent])))
                refine_parent = (long)i;
        long shown = -1;
        for (size_t i = 0; refine_parent < 0 && shown < 0 && i < no; i++)
            if (R->at[ord[i]].x.status == KB_EXTRACT_OK && !R->at[ord[i]].llm_error)
                shown = (long)ord[i];
        unsigned repaired = 0;
        for (size_t i = 0; i < no && i < FEEDBACK_MAX && rc == KB_OK; i++)
            rc = feedback_on(R, &R->at[ord[i]], &fb, (long)ord[i] == shown, &repaired,
                             &retrieval_ms, err);
        free(ord);
        if (R->eff.strategy != KB_GEN_REFINE)
            refine_parent = -1;
    }
    prompt_ms += kb_now_ms() - tp - retrieval_ms;
    if (rc != KB_OK)
        goto out;

    size_t shared_prompt = 0;
    for (int s = 0; s < n && rc == KB_OK; s++) {
        attempt *a = &R->at[R->nat++];
        memset(a, 0, sizeof *a);
        a->round = round;
        a->sample = s;
        a->dup_of = -1;
        kb_verify_result_init(&a->r);
        snprintf(a->key, sizeof a->key, "r%ds%d", round, s);
        const attempt *parent = NULL;
        if (R->eff.strategy == KB_GEN_POPULATION && npop)
            parent = &R->at[pop[((size_t)s + (size_t)round) % npop]];
        else if (R->eff.strategy == KB_GEN_REFINE && refine_parent >= 0)
            parent = &R->at[refine_parent];
        if (s == 0 || (R->eff.strategy == KB_GEN_POPULATION && parent)) {
            const char *fbtext = fb.len ? fb.data : NULL;
            kb_buf pfb;
            kb_buf_init(&pfb, 0);
            if (R->eff.strategy == KB_GEN_POPULATION && parent) {
                tp = kb_now_ms();
                double rms = 0;
                rc = feedback_on(R, parent, &pfb, 0, NULL, &rms, err);
                retrieval_ms += rms;
                prompt_ms += kb_now_ms() - tp - rms;
                fbtext = pfb.len ? pfb.data : NULL;
            }
            /* without a kernel of its own to refine, the run refines the
             * skill retrieved for this task, if there is one */
            const char *psrc = parent ? parent->x.source : R->seed_src;
            const char *pskill = parent ? parent->parent_skill : R->seed_skill;
            if (rc == KB_OK)
                rc = build_prompt(R, fbtext, psrc, pskill, &shared_prompt, &retrieval_ms, err);
            kb_buf_release(&pfb);
        }
        if (rc != KB_OK)
            break;
        a->prompt = shared_prompt;
        if (parent)
            memcpy(a->parent_key, parent->key, sizeof a->parent_key);
        const char *ps = R->prompt_parent_skill[shared_prompt];
        if (ps && !(a->parent_skill = kb_strdup(ps))) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            break;
        }
        slot *sl = &slots[s];
        sl->llm = R->eff.llm;
        sl->req.system = R->prompts[shared_prompt].system;
        sl->req.user = R->prompts[shared_prompt].user;
        sl->mu = &mu;
        sl->cv = &cv;
        kb_llm_reply_init(&sl->reply);
        if (s == 0)
            llm_first = kb_now_ms();
        if (R->eff.replay) {
            replay_reply(R, a->key, sl);
        } else if (pthread_create(&th[s], NULL, slot_main, sl) == 0) {
            started[s] = 1;
        } else {
            sl->rc = kb_err_set(&sl->err, KB_ERR_INTERNAL, "cannot start a thread");
            sl->done = 1;
            sl->done_ms = kb_now_ms();
        }
    }
    if (R->eff.progress && rc == KB_OK) {
        R->pg.event = "request";
        R->pg.round = round + 1;
        R->pg.sample = 0;
        R->eff.progress(&R->pg, R->eff.progress_ctx);
    }
    /* the replies in sample order, each verified as it comes */
    int failed = 0;
    for (size_t i = first; i < R->nat; i++) {
        attempt *a = &R->at[i];
        slot *sl = &slots[a->sample];
        pthread_mutex_lock(&mu);
        while (!sl->done && started[a->sample])
            pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
        if (started[a->sample]) {
            pthread_join(th[a->sample], NULL);
            started[a->sample] = 0;
        }
        /* the LLM's wall time: from the first request to the last reply's
         * arrival (replies taken later wait on verification, not on it) */
        if (sl->done_ms > llm_last)
            llm_last = sl->done_ms;
        llm_sum += sl->reply.ms;
        if (rc != KB_OK) {
            kb_llm_reply_release(&sl->reply);
            continue;
        }
        if (record_reply(R, a, sl) != KB_OK) {
            rc = kb_err_set(err, R->tr_rc ? R->tr_rc : KB_ERR_NOMEM,
                            "cannot write the transcript in '%s'", R->dir);
            continue;
        }
        failed += a->llm_error != NULL;
        rc = extract_verify(R, a, &extract_ms, &verify_ms, err);
        if (rc != KB_OK)
            continue;
        count(R, a);
        if (at_floor(R, a))
            *stop_floor = 1;
        if (R->eff.progress) {
            R->pg.event = "verdict";
            R->pg.sample = a->sample + 1;
            R->pg.verdict = outcome(R, a);
            R->eff.progress(&R->pg, R->eff.progress_ctx);
        }
    }
    *all_failed = rc == KB_OK && n > 0 && failed == n;
    if (rc == KB_OK) {
        const attempt *best = NULL;
        for (size_t i = first; i < R->nat; i++)
            if (!best || score(&R->at[i]) > score(best))
                best = &R->at[i];
        double total = kb_now_ms() - t_round;
        cJSON *ms = cJSON_CreateObject();
        ms = add_n(ms, "retrieval", retrieval_ms);
        ms = add_n(ms, "prompt", prompt_ms);
        ms = add_n(ms, "llm", llm_last > llm_first ? llm_last - llm_first : 0);
        ms = add_n(ms, "llm_requests", llm_sum);
        ms = add_n(ms, "extraction", extract_ms);
        ms = add_n(ms, "verification", verify_ms);
        ms = add_n(ms, "total", total);
        cJSON *e = event("round", NULL);
        e = add_n(e, "round", round);
        e = add_j(e, "ms", ms ? cJSON_Duplicate(ms, 1) : NULL);
        e = add_s(e, "best", best ? best->key : NULL);
        e = add_s(e, "best_verdict", best ? outcome(R, best) : NULL);
        cJSON *rr = cJSON_CreateObject();
        rr = add_n(rr, "round", round);
        rr = add_j(rr, "ms", ms);
        if (!rr || !cJSON_AddItemToArray(rj, rr)) {
            cJSON_Delete(rr);
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        }
        if (tr_write(R, e) != KB_OK && rc == KB_OK)
            rc = kb_err_set(err, R->tr_rc, "cannot write the transcript in '%s'", R->dir);
        if (R->eff.progress) {
            R->pg.event = "round";
            R->pg.sample = 0;
            R->eff.progress(&R->pg, R->eff.progress_ctx);
        }
    }
out:
    for (int s = 0; slots && started && s < n; s++) {
        if (started[s])
            pthread_join(th[s], NULL);
        kb_llm_reply_release(&slots[s].reply);
    }
    free(slots);
    free(th);
    free(started);
    free(pop);
    kb_buf_release(&fb);
    return rc;
}

/* ------------------------------------------------------------------ run folder */

static kb_rc make_run_dir(run *R, kb_err *err)
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

static kb_rc write_run_event(run *R, kb_err *err)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const kb_llm_opts *l = R->eff.llm;
    cJSON *e = event("run", NULL);
    e = add_n(e, "kb_generate", 1);
    e = add_s(e, "id", R->id);
    e = add_s(e, "task", R->task->name);
    e = add_s(e, "task_dir", R->eff.task_dir);
    e = add_s(e, "model", R->model);
    e = add_s(e, "api", l ? (l->api == KB_LLM_ANTHROPIC ? "anthropic" : "openai") : NULL);
    e = add_j(e, "url", url_json(l ? l->url : NULL));
    e = add_s(e, "strategy", kb_gen_strategy_name(R->eff.strategy));
    e = add_n(e, "samples", R->eff.samples);
    e = add_n(e, "rounds", R->eff.rounds);
    e = add_n(e, "population", R->eff.population);
    e = add_b(e, "compile_only", R->eff.compile_only);
    e = add_n(e, "budget_tokens", (double)R->eff.budget_tokens);
    e = add_n(e, "prompt_tokens", (double)R->eff.prompt_tokens);
    e = add_n(e, "floor_fraction", R->eff.floor_fraction);
    e = add_s(e, "started", date);
    e = add_s(e, "replay_of", R->replay_of);
    e = add_j(e, "device", R->eff.device ? cJSON_Duplicate(R->eff.device, 1) : NULL);
    if (tr_write(R, e) != KB_OK)
        return kb_err_set(err, R->tr_rc, "cannot write the transcript in '%s'", R->dir);
    return KB_OK;
}

/* ------------------------------------------------------------------ write-back */

static kb_rc write_back(run *R, cJSON *summary, kb_err *err)
{
    const attempt *a = &R->at[R->best];
    const kb_gen_prompt *p = &R->prompts[a->prompt];
    kb_gen_writeback w = {
        .skills_dir = R->eff.skills_dir, .task_dir = R->eff.task_dir, .source = a->x.source,
        .result = &a->r, .device = R->eff.device, .cites = p->cites, .ncites = p->ncites,
        .parent = a->parent_skill, .model = R->model, .run_id = R->id,
        .prompt_hash = p->hash, .store = R->eff.store, .config = R->eff.config,
    };
    kb_buf sys, user;
    kb_buf_init(&sys, 0);
    kb_buf_init(&user, 0);
    kb_rc rc = kb_gen_writeup_request(&w, &sys, &user);
    if (rc != KB_OK) {
        kb_buf_release(&sys);
        kb_buf_release(&user);
        return kb_err_set(err, rc, "out of memory");
    }
    /* the write-up: one more request (recorded, and replayed) */
    slot sl;
    memset(&sl, 0, sizeof sl);
    sl.llm = R->eff.llm;
    sl.req.system = sys.data;
    sl.req.user = user.data;
    kb_llm_reply_init(&sl.reply);
    if (R->eff.replay) {
        replay_reply(R, "writeup", &sl);
    } else {
        kb_err_clear(&sl.err);
        sl.rc = kb_llm_complete(sl.llm, &sl.req, &sl.reply, &sl.err);
    }
    R->tokens_prompt += sl.reply.prompt_tokens;
    R->tokens_completion += sl.reply.completion_tokens;
    cJSON *e = event("request", "writeup");
    e = add_j(e, "body", json_or_string(sl.reply.request_json));
    tr_write(R, e);
    e = event("reply", "writeup");
    e = add_b(e, "ok", sl.rc == KB_OK);
    e = add_s(e, "text", sl.reply.text ? sl.reply.text : "");
    e = add_s(e, "finish_reason", sl.reply.finish_reason ? sl.reply.finish_reason : "");
    e = add_n(e, "prompt_tokens", (double)sl.reply.prompt_tokens);
    e = add_n(e, "completion_tokens", (double)sl.reply.completion_tokens);
    e = add_n(e, "attempts", sl.reply.attempts);
    e = add_b(e, "streamed", sl.reply.streamed);
    e = add_n(e, "ms", sl.reply.ms);
    e = add_s(e, "error", sl.rc == KB_OK ? NULL : sl.err.msg);
    e = add_s(e, "raw", sl.reply.raw && *sl.reply.raw ? sl.reply.raw : NULL);
    tr_write(R, e);
    /* a write-up that did not come leaves placeholders for the reviewer */
    w.writeup = sl.rc == KB_OK ? sl.reply.text : NULL;
    char *name = NULL, *dir = NULL;
    rc = kb_gen_write_skill(&w, &name, &dir, err);
    e = event("skill", NULL);
    e = add_s(e, "name", name);
    e = add_s(e, "dir", dir);
    e = add_s(e, "candidate", a->key);
    e = add_s(e, "parent", a->parent_skill);
    e = add_s(e, "error", rc == KB_OK ? NULL : err->msg);
    e = add_s(e, "writeup_error", sl.rc == KB_OK ? NULL : sl.err.msg);
    tr_write(R, e);
    cJSON *sk = cJSON_CreateObject();
    sk = add_s(sk, "name", name);
    sk = add_s(sk, "dir", dir);
    sk = add_s(sk, "parent", a->parent_skill);
    sk = add_b(sk, "drafted_by_llm", sl.rc == KB_OK);
    sk = add_s(sk, "error", rc == KB_OK ? NULL : err->msg);
    if (!sk || !cJSON_AddItemToObject(summary, "skill", sk))
        cJSON_Delete(sk);
    free(name);
    free(dir);
    kb_llm_reply_release(&sl.reply);
    kb_buf_release(&sys);
    kb_buf_release(&user);
    return rc;
}

/* ------------------------------------------------------------------ summary */

/* Adds the skills of prompt p to set (a JSON array of unique names). */
static void add_skills(cJSON *set, const kb_gen_prompt *p)
{
    for (size_t i = 0; set && i < p->ncites; i++) {
        const char *s = p->cites[i].skill;
        if (!s || !*s)
            continue;
        int seen = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, set)
            seen |= cJSON_IsString(x) && strcmp(x->valuestring, s) == 0;
        if (!seen)
            cJSON_AddItemToArray(set, cJSON_CreateString(s));
    }
}

static cJSON *make_summary(run *R, const char *stop)
{
    cJSON *s = cJSON_CreateObject();
    s = add_n(s, "kb_generate", 1);
    s = add_s(s, "id", R->id);
    s = add_s(s, "dir", R->dir);
    s = add_s(s, "task", R->task->name);
    s = add_s(s, "model", R->model);
    s = add_s(s, "strategy", kb_gen_strategy_name(R->eff.strategy));
    s = add_n(s, "samples", R->eff.samples);
    s = add_n(s, "rounds", R->eff.rounds);
    s = add_b(s, "compile_only", R->eff.compile_only);
    int rounds_run = R->nat ? R->at[R->nat - 1].round + 1 : 0;
    s = add_n(s, "rounds_run", rounds_run);
    s = add_s(s, "stop", stop);
    s = add_n(s, "requests", (double)R->nat);
    s = add_n(s, "prompt_tokens", (double)R->tokens_prompt);
    s = add_n(s, "completion_tokens", (double)R->tokens_completion);
    s = add_n(s, "tokens", (double)(R->tokens_prompt + R->tokens_completion));
    size_t verified = 0;
    for (size_t i = 0; i < R->nat; i++)
        verified += R->at[i].verified;
    s = add_n(s, "verified", (double)verified);
    s = add_n(s, "duplicates", (double)R->pg.duplicates);
    s = add_n(s, "no_kernel", (double)R->pg.no_kernel);
    s = add_n(s, "llm_errors", (double)R->pg.llm_errors);
    double wall = kb_now_ms() - R->t0;
    s = add_n(s, "ms", wall);
    s = add_n(s, "verified_per_minute", wall > 0 ? verified * 60000.0 / wall : 0);
    cJSON *verdicts = cJSON_CreateObject();
    for (int v = 0; verdicts && v <= KB_VERIFY_UNKNOWN; v++)
        if (R->pg.nverdicts[v])
            verdicts = add_n(verdicts, kb_verify_verdict_name((kb_verify_verdict)v),
                             (double)R->pg.nverdicts[v]);
    s = add_j(s, "verdicts", verdicts);
    cJSON *cands = cJSON_CreateArray();
    for (size_t i = 0; cands && i < R->nat; i++) {
        const attempt *a = &R->at[i];
        const attempt *v = verdict_of(R, a);
        cJSON *c = cJSON_CreateObject();
        c = add_s(c, "key", a->key);
        c = add_n(c, "round", a->round);
        c = add_n(c, "sample", a->sample);
        c = add_s(c, "verdict", outcome(R, a));
        c = add_s(c, "hash", a->x.status == KB_EXTRACT_OK && !a->llm_error ? a->hash : NULL);
        c = add_s(c, "file", a->file);
        c = add_s(c, "duplicate_of", a->dup_of >= 0 ? R->at[a->dup_of].key : NULL);
        c = add_s(c, "technique", a->x.status == KB_EXTRACT_OK ? a->technique : NULL);
        c = v && v->r.has_speedup ? add_n(c, "speedup", v->r.speedup_geomean)
                                  : add_j(c, "speedup", NULL);
        c = add_s(c, "reason", a->llm_error ? a->llm_error
                               : a->x.status != KB_EXTRACT_OK ? a->x.message
                               : v ? v->r.reason : NULL);
        if (!c || !cJSON_AddItemToArray(cands, c)) {
            cJSON_Delete(c);
            cJSON_Delete(cands);
            cands = NULL;
        }
    }
    s = add_j(s, "candidates", cands);
    s = add_s(s, "best", R->best >= 0 ? R->at[R->best].key : NULL);
    s = R->best >= 0 ? add_n(s, "best_speedup", R->at[R->best].r.speedup_geomean)
                     : add_j(s, "best_speedup", NULL);
    /* credit: the skills in the winner's prompt, and in any prompt */
    cJSON *credit = cJSON_CreateObject(), *used = cJSON_CreateArray(),
          *won = cJSON_CreateArray();
    for (size_t i = 0; i < R->nprompts; i++)
        add_skills(used, &R->prompts[i]);
    if (R->best >= 0)
        add_skills(won, &R->prompts[R->at[R->best].prompt]);
    credit = add_s(credit, "winner", R->best >= 0 ? R->at[R->best].key : NULL);
    credit = add_j(credit, "used", used);
    credit = add_j(credit, "won", won);
    s = add_j(s, "credit", credit);
    s = add_j(s, "round_ms", cJSON_Duplicate(R->rounds, 1));
    if (R->eff.replay && s) {
        cJSON *rp = cJSON_CreateObject(), *diff = cJSON_CreateArray();
        int same = 1;
        for (size_t i = 0; i < R->nat && diff; i++) {
            const cJSON *rec = item(R->recorded, R->at[i].key);
            const char *was = str_or(rec, "verdict", "");
            const char *now = outcome(R, &R->at[i]);
            /* a duplicate's verdict is its first's: recorded once */
            if (!rec && R->at[i].dup_of >= 0)
                continue;
            if (strcmp(was, now) != 0) {
                same = 0;
                cJSON *d = cJSON_CreateObject();
                d = add_s(d, "key", R->at[i].key);
                d = add_s(d, "recorded", *was ? was : NULL);
                d = add_s(d, "now", now);
                if (d)
                    cJSON_AddItemToArray(diff, d);
            }
        }
        rp = add_s(rp, "of", R->replay_of);
        rp = add_b(rp, "same_verdicts", same);
        rp = add_j(rp, "differences", diff);
        s = add_j(s, "replay", rp);
    }
    return s;
}

/* ------------------------------------------------------------------ kb_gen_run */

kb_rc kb_gen_run(const kb_gen_opts *o, cJSON **summary, kb_err *err)
{
    *summary = NULL;
    run R;
    memset(&R, 0, sizeof R);
    kb_verifier *own_verifier = NULL;
    R.o = o;
    R.eff = *o;
    R.best = -1;
    R.t0 = kb_now_ms();
    kb_rc rc = KB_OK;
    if (!o->task_dir || !o->verifier || !o->runs_dir || (!o->llm && !o->replay))
        return kb_err_set(err, KB_ERR_USAGE, "kb_gen_run: a task, a verifier, a runs "
                          "folder and an LLM (or a run to replay) are needed");
    if (o->replay && (rc = load_replay(&R, err)) != KB_OK)
        goto out;
    if (o->replay && R.eff.compile_only != o->compile_only) {
        /* the run compiled only (or did not): its replay verifies alike */
        kb_verifier_opts vo;
        kb_verifier_opts_init(&vo);
        vo.kb_verify = kb_verifier_path(o->verifier);
        vo.serve = 1;
        vo.compile_only = R.eff.compile_only;
        if ((rc = kb_verifier_open(&vo, &own_verifier, err)) != KB_OK)
            goto out;
        R.eff.verifier = own_verifier;
    }
    if (R.eff.samples <= 0)
        R.eff.samples = 4;
    if (R.eff.samples > 64)
        R.eff.samples = 64;
    if (R.eff.rounds <= 0)
        R.eff.rounds = 3;
    if (R.eff.population <= 0)
        R.eff.population = 4;
    if (R.eff.prompt_tokens <= 0)
        R.eff.prompt_tokens = 12000;
    if (R.eff.repair_tokens <= 0)
        R.eff.repair_tokens = 800;
    if (R.eff.floor_fraction <= 0)
        R.eff.floor_fraction = 0.9;
    R.model = o->llm && o->llm->model ? o->llm->model : "";
    if ((rc = kb_task_load(o->task_dir, &R.task, err)) != KB_OK)
        goto out;
    if (o->replay && strcmp(R.replay_task, R.task->name) != 0) {
        rc = kb_err_set(err, KB_ERR_USAGE, "run '%s' is for task '%s', not '%s'", o->replay,
                        R.replay_task, R.task->name);
        goto out;
    }
    if (!(R.rounds = cJSON_CreateArray())) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = make_run_dir(&R, err)) != KB_OK)
        goto out;
    if (o->replay)   /* the recorded model stands for this run's */
        R.model = R.replay_model ? R.replay_model : "";
    if ((rc = write_run_event(&R, err)) != KB_OK)
        goto out;
    R.pg.rounds = R.eff.rounds;
    R.pg.samples = R.eff.samples;
    if ((rc = find_seed(&R, err)) != KB_OK)
        goto out;
    const char *stop = "rounds";
    for (int round = 0; round < R.eff.rounds; round++) {
        if (R.eff.budget_tokens > 0 &&
            R.tokens_prompt + R.tokens_completion >= R.eff.budget_tokens) {
            stop = "budget";
            break;
        }
        int at_floor_now = 0, all_failed = 0;
        if ((rc = do_round(&R, round, &at_floor_now, &all_failed, R.rounds, err)) != KB_OK)
            break;
        if (at_floor_now) {
            stop = "floor";
            break;
        }
        if (all_failed) {
            stop = "llm";
            break;
        }
    }
    if (rc == KB_OK && R.best >= 0 && R.eff.skills_dir && !R.eff.compile_only &&
        !R.eff.replay) {   /* a replay checks verdicts; its run wrote the skill */
        cJSON *tmp = cJSON_CreateObject();
        kb_err werr;
        kb_err_clear(&werr);
        if (tmp && write_back(&R, tmp, &werr) != KB_OK)
            kb_log_warn("kb generate: the winning kernel was not written back: %s",
                        werr.msg);
        *summary = make_summary(&R, stop);
        if (*summary && tmp) {
            cJSON *sk = cJSON_DetachItemFromObject(tmp, "skill");
            if (sk)
                cJSON_AddItemToObject(*summary, "skill", sk);
        }
        cJSON_Delete(tmp);
    } else {
        *summary = make_summary(&R, rc == KB_OK ? stop : "error");
    }
    if (*summary && rc != KB_OK)
        add_s(*summary, "error", err->msg);
    if (*summary && !item(*summary, "skill"))
        cJSON_AddNullToObject(*summary, "skill");
    if (*summary) {
        cJSON *e = cJSON_Duplicate(*summary, 1);
        if (e && cJSON_AddStringToObject(e, "event", "summary"))
            tr_write(&R, e);
        else
            cJSON_Delete(e);
        char *txt = cJSON_Print(*summary);
        char *sp = kb_path_join(R.dir, "summary.json");
        kb_err serr;
        kb_err_clear(&serr);
        if (!txt || !sp || kb_write_file_atomic(sp, txt, strlen(txt), &serr) != KB_OK) {
            if (rc == KB_OK)
                rc = kb_err_set(err, KB_ERR_IO, "cannot write the run's summary: %s",
                                serr.msg[0] ? serr.msg : "out of memory");
        }
        free(txt);
        free(sp);
    } else if (rc == KB_OK) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    if (rc == KB_OK && R.tr_rc != KB_OK)
        rc = kb_err_set(err, R.tr_rc, "cannot write the transcript in '%s'", R.dir);
out:
    if (R.tr)
        fclose(R.tr);
    for (size_t i = 0; i < R.nat; i++) {
        attempt *a = &R.at[i];
        kb_llm_reply_release(&a->reply);
        kb_extracted_release(&a->x);
        kb_verify_result_release(&a->r);
        free(a->llm_error);
        free(a->file);
        free(a->parent_skill);
    }
    free(R.at);
    for (size_t i = 0; i < R.nprompts; i++) {
        kb_gen_prompt_release(&R.prompts[i]);
        free(R.prompt_parent_skill[i]);
    }
    free(R.prompts);
    free(R.prompt_parent_skill);
    cJSON_Delete(R.replies);
    cJSON_Delete(R.recorded);
    cJSON_Delete(R.rounds);
    kb_verifier_free(own_verifier);
    free(R.replay_of);
    free(R.replay_model);
    free(R.replay_task);
    free(R.seed_skill);
    free(R.seed_src);
    kb_task_free(R.task);
    free(R.dir);
    free(R.kdir);
    return rc;
}
