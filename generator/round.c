/* round.c - one round of the generate-verify loop (gen.h, "round.c"):
 * the attempts ranked, the feedback on the last round with passages for
 * its failures, a prompt per parent, the samples requested at once (one
 * thread each), each reply's kernel extracted, deduplicated and verified
 * in sample order as it comes, the round's time by step recorded. */
#include "generator/gen.h"
#include "verify/verify.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FEEDBACK_MAX 6        /* attempts a refine prompt is told of */

/* ------------------------------------------------------------------ ranking */

/* How good an attempt is, for choosing parents and the best: faster >
 * correct > compiled > incorrect > crash, timeout > refused >
 * compile_error > suspicious > error > no kernel > no reply. */
static double score(const kb_gen_attempt *a)
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

const kb_gen_attempt *kb_gen_verdict_of(const kb_gen_state *R, const kb_gen_attempt *a)
{
    if (a->dup_of >= 0)
        return &R->at[a->dup_of];
    return a->verified ? a : NULL;
}

/* A kernel the loop keeps (as a parent, for population): correct or
 * faster; compiled when only compiling. */
static int kept(const kb_gen_state *R, const kb_gen_attempt *a)
{
    const kb_gen_attempt *v = kb_gen_verdict_of(R, a);
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

/* ------------------------------------------------------------------ requests */

static void *slot_main(void *p)
{
    kb_gen_slot *s = p;
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
static kb_rc record_reply(kb_gen_state *R, kb_gen_attempt *a, kb_gen_slot *s)
{
    kb_llm_reply_release(&a->reply);
    a->reply = s->reply;
    kb_llm_reply_init(&s->reply);
    a->llm_rc = s->rc;
    if (s->rc != KB_OK && !(a->llm_error = kb_strdup(s->err.msg)))
        return KB_ERR_NOMEM;
    R->tokens_prompt += a->reply.prompt_tokens;
    R->tokens_completion += a->reply.completion_tokens;
    return kb_gen_exchange_events(R, a->key, a, &a->reply, s->rc == KB_OK, a->llm_error);
}

/* ------------------------------------------------------------------ one attempt */

/* The first attempt verified with a's normalised source, for a
 * duplicate: its index into a->dup_of. */
static void find_duplicate(const kb_gen_state *R, kb_gen_attempt *a)
{
    for (size_t i = 0; i < R->nat && a->dup_of < 0; i++)
        if (&R->at[i] != a && R->at[i].x.status == KB_EXTRACT_OK && !R->at[i].llm_error &&
            R->at[i].dup_of < 0 && strcmp(R->at[i].hash, a->hash) == 0 &&
            (R->at[i].verified || R->at[i].job[0]))   /* or in flight */
            a->dup_of = (long)i;
}

/* Writes a's kernel to kernels/KEY.cu (a->file, relative; *abs, the
 * caller frees). */
static kb_rc write_kernel(const kb_gen_state *R, kb_gen_attempt *a, char **abs, kb_err *err)
{
    kb_buf p;
    kb_buf_init(&p, 0);
    kb_rc rc = kb_buf_printf(&p, "kernels/%s.cu", a->key);
    *abs = rc == KB_OK ? kb_path_join(R->dir, p.data) : NULL;
    if (rc == KB_OK && (!*abs || !(a->file = kb_strdup(p.data))))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK)
        rc = kb_write_file_atomic(*abs, a->x.source, strlen(a->x.source), err);
    kb_buf_release(&p);
    return rc;
}

/* The candidate event of a kernel that was found. */
static kb_rc candidate_event(kb_gen_state *R, const kb_gen_attempt *a, kb_err *err)
{
    int ok;
    cJSON *e = kb_gen_event("candidate", a->key, &ok);
    kb_json_put_str(e, "status", "ok", &ok);
    kb_json_put_str(e, "hash", a->hash, &ok);
    kb_json_put_str(e, "file", a->file, &ok);
    kb_json_put_str(e, "technique", a->technique, &ok);
    kb_json_put_str(e, "parent", *a->parent_key ? a->parent_key : NULL, &ok);
    kb_json_put_str(e, "parent_skill", a->parent_skill, &ok);
    kb_json_put_str(e, "duplicate_of", a->dup_of >= 0 ? R->at[a->dup_of].key : NULL, &ok);
    if (kb_gen_tr_write(R, e, ok) != KB_OK)
        return kb_gen_tr_error(R, err);
    return KB_OK;
}

/* 1 when candidates go to the queue's workers several at a time. */
static int pipelined(const kb_gen_state *R)
{
    return R->eff.workers > 1 && kb_verifier_queue(R->eff.verifier);
}

/* Verifies a's kernel (at abs) and writes its verdict event; pipelined,
 * it is only submitted (its job in a->job): verdict_of finishes it. */
static kb_rc verdict_of(kb_gen_state *R, kb_gen_attempt *a, double *verify_ms,
                        kb_err *err);

static kb_rc verify_attempt(kb_gen_state *R, kb_gen_attempt *a, const char *abs,
                            double *verify_ms, kb_err *err)
{
    a->submitted_ms = kb_now_ms();
    if (pipelined(R)) {
        kb_job_state st;
        return kb_jobq_verify_submit(R->eff.verifier, R->eff.task_dir, abs, a->job,
                                     &st, err);
    }
    kb_rc rc = kb_jobq_verify(R->eff.verifier, R->eff.task_dir, abs, &a->r, err);
    *verify_ms += kb_now_ms() - a->submitted_ms;
    return rc == KB_OK ? verdict_of(R, a, verify_ms, err) : rc;
}

/* a's verdict event, its result waited for first when it is in flight. */
static kb_rc verdict_of(kb_gen_state *R, kb_gen_attempt *a, double *verify_ms,
                        kb_err *err)
{
    double tv = a->submitted_ms;
    if (a->job[0]) {
        double w = kb_now_ms();
        kb_rc rc = kb_jobq_verify_wait(R->eff.verifier, a->job, &a->r, err);
        a->job[0] = '\0';
        *verify_ms += kb_now_ms() - w;
        if (rc != KB_OK)
            return rc;
    }
    a->verified = 1;
    int ok;
    cJSON *e = kb_gen_event("verdict", a->key, &ok);
    kb_json_put_str(e, "hash", a->hash, &ok);
    kb_json_put_str(e, "verdict", a->r.verdict_name, &ok);
    kb_json_put_str(e, "reason", a->r.reason, &ok);
    if (a->r.has_speedup)
        kb_json_put_num(e, "speedup", a->r.speedup_geomean, &ok);
    else
        kb_json_put_null(e, "speedup", &ok);
    kb_json_put_num(e, "ms", kb_now_ms() - tv, &ok);
    kb_json_put_item(e, "result", a->r.json ? cJSON_Duplicate(a->r.json, 1) : NULL, &ok);
    if (kb_gen_tr_write(R, e, ok) != KB_OK)
        return kb_gen_tr_error(R, err);
    return KB_OK;
}

/* Extracts a's kernel, writes it to kernels/KEY.cu and verifies it
 * unless an earlier attempt had the same normalised source. */
static kb_rc extract_verify(kb_gen_state *R, kb_gen_attempt *a, double *extract_ms,
                            double *verify_ms, kb_err *err)
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
        find_duplicate(R, a);
        char *abs = NULL;
        rc = write_kernel(R, a, &abs, err);
        *extract_ms += kb_now_ms() - t;
        if (rc == KB_OK)
            rc = candidate_event(R, a, err);
        if (rc == KB_OK && a->dup_of < 0)
            rc = verify_attempt(R, a, abs, verify_ms, err);
        free(abs);
        return rc;
    }
    *extract_ms += kb_now_ms() - t;
    static const char *const st[] = { "ok", "no_code", "no_kernel", "host_code" };
    int ok;
    cJSON *e = kb_gen_event("candidate", a->key, &ok);
    kb_json_put_str(e, "status", a->llm_error ? "no_reply" : st[a->x.status], &ok);
    kb_json_put_str(e, "message", a->llm_error ? a->llm_error : a->x.message, &ok);
    if (kb_gen_tr_write(R, e, ok) != KB_OK)
        rc = kb_gen_tr_error(R, err);
    return rc;
}

const char *kb_gen_outcome(const kb_gen_state *R, const kb_gen_attempt *a)
{
    static const char *const st[] = { "ok", "no_code", "no_kernel", "host_code" };
    if (a->llm_error)
        return "no_reply";
    if (a->x.status != KB_EXTRACT_OK)
        return st[a->x.status];
    const kb_gen_attempt *v = kb_gen_verdict_of(R, a);
    return v ? v->r.verdict_name : "error";
}

static int all_checks_ok(const kb_verify_result *r);

static void count(kb_gen_state *R, const kb_gen_attempt *a)
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
    cJSON_ArrayForEach(c, kb_gen_jget(r->json, "checks")) {
        if (!cJSON_IsTrue(kb_gen_jget(c, "ok")))
            return 0;
        n++;
    }
    return n > 0;
}

/* 1 when a's kernel reaches floor_fraction of the roofline on the first
 * timed shape. */
static int at_floor(const kb_gen_state *R, const kb_gen_attempt *a)
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
    const kb_gen_state *R = ctx;
    double a = score(&R->at[*(const size_t *)x]), b = score(&R->at[*(const size_t *)y]);
    return a < b ? 1 : a > b ? -1 : (*(const size_t *)x > *(const size_t *)y) -
                                    (*(const size_t *)x < *(const size_t *)y);
}

/* The population: the best kept kernels, one per technique first, then
 * the next best, at most eff.population. Indices into R->at, best first;
 * caller frees. */
static size_t *population(kb_gen_state *R, size_t *n)
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
static kb_rc feedback_on(kb_gen_state *R, const kb_gen_attempt *a, kb_buf *fb, int with_source,
                         unsigned *repaired, double *retrieval_ms, kb_err *err)
{
    kb_buf label;
    kb_buf_init(&label, 0);
    const kb_gen_attempt *v = kb_gen_verdict_of(R, a);
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
static kb_rc build_prompt(kb_gen_state *R, const char *feedback, const char *parent,
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
        .choose = !R->eff.replay && kb_gen_can_choose(R->eff.config),
    };
    kb_gen_prompt *p = &R->prompts[R->nprompts];
    memset(p, 0, sizeof *p);
    double t = kb_now_ms();
    kb_rc rc = kb_gen_prompt_build(&po, p, err);
    *ms += kb_now_ms() - t;
    if (rc != KB_OK)
        return rc;
    if (!parent_skill)
        parent_skill = p->seed_skill;
    R->prompt_parent_skill[R->nprompts] = parent_skill ? kb_strdup(parent_skill) : NULL;
    *ix = R->nprompts++;
    int cok = 1;
    cJSON *cites = kb_gen_cites_json(p, 1, &cok);   /* NULL: written as null */
    char key[24];
    snprintf(key, sizeof key, "p%zu", *ix);
    int ok;
    cJSON *e = kb_gen_event("prompt", key, &ok);
    kb_json_put_str(e, "hash", p->hash, &ok);
    kb_json_put_num(e, "tokens", (double)p->tokens, &ok);
    kb_json_put_str(e, "parent_skill", parent_skill, &ok);
    kb_json_put_item(e, "cites", cites, &ok);
    kb_json_put_str(e, "system", p->system, &ok);
    kb_json_put_str(e, "user", p->user, &ok);
    if (kb_gen_tr_write(R, e, ok) != KB_OK)
        return kb_gen_tr_error(R, err);
    return KB_OK;
}

/* ------------------------------------------------------------------ rounds */

/* One round's requests, threads and time by step. */
typedef struct {
    int round, n;
    size_t first;             /* the round's first attempt */
    kb_gen_slot *slots;
    pthread_t *th;
    int *started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    kb_buf fb;                /* the feedback on the last round */
    size_t *pop, npop;        /* population's parents */
    long refine_parent;       /* refine's parent, or -1 */
    double t_round, retrieval_ms, prompt_ms, extract_ms, verify_ms;
    double llm_first, llm_last, llm_sum;
} round_ctx;

/* The feedback: refine tells of the last round's attempts (the best
 * first) and refines the best kernel so far; population draws a parent
 * per sample from the best kept kernels, one per technique. */
static kb_rc round_feedback(kb_gen_state *R, round_ctx *c, kb_err *err)
{
    kb_rc rc = KB_OK;
    double tp = kb_now_ms();
    if (R->eff.strategy == KB_GEN_POPULATION)
        c->pop = population(R, &c->npop);
    if (R->nat) {
        size_t last_first = R->nat;
        while (last_first > 0 && R->at[last_first - 1].round == c->round - 1)
            last_first--;
        size_t *ord = malloc((R->nat - last_first + 1) * sizeof *ord), no = 0;
        if (!ord)
            return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        for (size_t i = last_first; i < R->nat; i++)
            ord[no++] = i;
        qsort_r(ord, no, sizeof *ord, cmp_score_desc, R);
        /* the kernel to refine: the best kept so far; without one, the
         * best attempt of the last round that has a kernel is shown with
         * its feedback (the prompt's parent is a kernel that holds) */
        for (size_t i = 0; i < R->nat; i++)
            if (kept(R, &R->at[i]) && (c->refine_parent < 0 ||
                                       score(&R->at[i]) > score(&R->at[c->refine_parent])))
                c->refine_parent = (long)i;
        long shown = -1;
        for (size_t i = 0; c->refine_parent < 0 && shown < 0 && i < no; i++)
            if (R->at[ord[i]].x.status == KB_EXTRACT_OK && !R->at[ord[i]].llm_error)
                shown = (long)ord[i];
        unsigned repaired = 0;
        for (size_t i = 0; i < no && i < FEEDBACK_MAX && rc == KB_OK; i++)
            rc = feedback_on(R, &R->at[ord[i]], &c->fb, (long)ord[i] == shown, &repaired,
                             &c->retrieval_ms, err);
        free(ord);
        if (R->eff.strategy != KB_GEN_REFINE)
            c->refine_parent = -1;
    }
    c->prompt_ms += kb_now_ms() - tp - c->retrieval_ms;
    return rc;
}

/* The prompt of sample a (its parent's, or the round's feedback with the
 * kernel to refine) into *shared_prompt. */
static kb_rc sample_prompt(kb_gen_state *R, round_ctx *c, const kb_gen_attempt *parent,
                           size_t *shared_prompt, kb_err *err)
{
    kb_rc rc = KB_OK;
    const char *fbtext = c->fb.len ? c->fb.data : NULL;
    kb_buf pfb;
    kb_buf_init(&pfb, 0);
    if (R->eff.strategy == KB_GEN_POPULATION && parent) {
        double tp = kb_now_ms();
        double rms = 0;
        rc = feedback_on(R, parent, &pfb, 0, NULL, &rms, err);
        c->retrieval_ms += rms;
        c->prompt_ms += kb_now_ms() - tp - rms;
        fbtext = pfb.len ? pfb.data : NULL;
    }
    /* without a kernel of its own to refine, the prompt refines the
     * kernel of the skill retrieved for this task, if there is one (the
     * prompt's seed: kb prompt shows the same) */
    const char *psrc = parent ? parent->x.source : NULL;
    const char *pskill = parent ? parent->parent_skill : NULL;
    if (rc == KB_OK)
        rc = build_prompt(R, fbtext, psrc, pskill, shared_prompt, &c->retrieval_ms, err);
    kb_buf_release(&pfb);
    return rc;
}

/* Sample s's attempt, its prompt, and its request sent (a thread; or the
 * recorded reply of a replay). */
static kb_rc request_sample(kb_gen_state *R, round_ctx *c, int s, size_t *shared_prompt,
                            kb_err *err)
{
    kb_gen_attempt *a = &R->at[R->nat++];
    memset(a, 0, sizeof *a);
    a->round = c->round;
    a->sample = s;
    a->dup_of = -1;
    kb_verify_result_init(&a->r);
    snprintf(a->key, sizeof a->key, "r%ds%d", c->round, s);
    const kb_gen_attempt *parent = NULL;
    if (R->eff.strategy == KB_GEN_POPULATION && c->npop)
        parent = &R->at[c->pop[((size_t)s + (size_t)c->round) % c->npop]];
    else if (R->eff.strategy == KB_GEN_REFINE && c->refine_parent >= 0)
        parent = &R->at[c->refine_parent];
    if (s == 0 || (R->eff.strategy == KB_GEN_POPULATION && parent)) {
        kb_rc rc = sample_prompt(R, c, parent, shared_prompt, err);
        if (rc != KB_OK)
            return rc;
    }
    a->prompt = *shared_prompt;
    if (parent)
        memcpy(a->parent_key, parent->key, sizeof a->parent_key);
    const char *ps = R->prompt_parent_skill[*shared_prompt];
    if (ps && !(a->parent_skill = kb_strdup(ps)))
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_gen_slot *sl = &c->slots[s];
    sl->llm = R->eff.llm;
    sl->req.system = R->prompts[*shared_prompt].system;
    sl->req.user = R->prompts[*shared_prompt].user;
    sl->mu = &c->mu;
    sl->cv = &c->cv;
    kb_llm_reply_init(&sl->reply);
    if (s == 0)
        c->llm_first = kb_now_ms();
    if (R->eff.replay) {
        kb_gen_replay_reply(R, a->key, sl);
    } else if (pthread_create(&c->th[s], NULL, slot_main, sl) == 0) {
        c->started[s] = 1;
    } else {
        sl->rc = kb_err_set(&sl->err, KB_ERR_INTERNAL, "cannot start a thread");
        sl->done = 1;
        sl->done_ms = kb_now_ms();
    }
    return KB_OK;
}

/* Sends the round's samples' requests, then says so. */
static kb_rc round_requests(kb_gen_state *R, round_ctx *c, kb_err *err)
{
    kb_rc rc = KB_OK;
    size_t shared_prompt = 0;
    for (int s = 0; s < c->n && rc == KB_OK; s++)
        rc = request_sample(R, c, s, &shared_prompt, err);
    if (R->eff.progress && rc == KB_OK) {
        R->pg.event = "request";
        R->pg.round = c->round + 1;
        R->pg.sample = 0;
        R->eff.progress(&R->pg, R->eff.progress_ctx);
    }
    return rc;
}

/* The reply of attempt a, once it has come (its thread joined). */
static kb_gen_slot *await_reply(round_ctx *c, const kb_gen_attempt *a)
{
    kb_gen_slot *sl = &c->slots[a->sample];
    pthread_mutex_lock(&c->mu);
    while (!sl->done && c->started[a->sample])
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    if (c->started[a->sample]) {
        pthread_join(c->th[a->sample], NULL);
        c->started[a->sample] = 0;
    }
    /* the LLM's wall time: from the first request to the last reply's
     * arrival (replies taken later wait on verification, not on it) */
    if (sl->done_ms > c->llm_last)
        c->llm_last = sl->done_ms;
    c->llm_sum += sl->reply.ms;
    return sl;
}

/* The replies in sample order, each verified as it comes; *failed: the
 * requests that failed. On a failure the rest are only awaited. */
/* What follows a's verdict: the counts, the floor, the progress line. */
static void after_verdict(kb_gen_state *R, kb_gen_attempt *a, int *stop_floor)
{
    count(R, a);
    if (at_floor(R, a))
        *stop_floor = 1;
    if (R->eff.progress) {
        R->pg.event = "verdict";
        R->pg.sample = a->sample + 1;
        R->pg.verdict = kb_gen_outcome(R, a);
        R->eff.progress(&R->pg, R->eff.progress_ctx);
    }
}

/* The replies in sample order, each verified as it comes; *failed: the
 * requests that failed. On a failure the rest are only awaited. With a
 * queue and workers > 1 a reply's kernel is submitted as it comes and up
 * to workers are in flight; their verdicts follow in sample order. */
static kb_rc round_replies(kb_gen_state *R, round_ctx *c, int *stop_floor, int *failed,
                           kb_rc rc, kb_err *err)
{
    size_t next = c->first;   /* the first attempt whose verdict is not in */
    int inflight = 0;
    for (size_t i = c->first; i < R->nat; i++) {
        kb_gen_attempt *a = &R->at[i];
        kb_gen_slot *sl = await_reply(c, a);
        if (rc != KB_OK) {
            kb_llm_reply_release(&sl->reply);
            continue;
        }
        if (record_reply(R, a, sl) != KB_OK) {
            rc = kb_gen_tr_error(R, err);
            continue;
        }
        *failed += a->llm_error != NULL;
        rc = extract_verify(R, a, &c->extract_ms, &c->verify_ms, err);
        inflight += a->job[0] != '\0';
        for (; rc == KB_OK && next <= i && (inflight >= R->eff.workers || !pipelined(R) ||
                                             i + 1 == R->nat); next++) {
            kb_gen_attempt *b = &R->at[next];
            if (b->job[0]) {
                inflight--;
                rc = verdict_of(R, b, &c->verify_ms, err);
            }
            if (rc == KB_OK)
                after_verdict(R, b, stop_floor);
        }
    }
    return rc;
}

/* The round event (its time by step, its best) and its entry in rj. */
static kb_rc round_done(kb_gen_state *R, round_ctx *c, cJSON *rj, kb_err *err)
{
    kb_rc rc = KB_OK;
    const kb_gen_attempt *best = NULL;
    for (size_t i = c->first; i < R->nat; i++)
        if (!best || score(&R->at[i]) > score(best))
            best = &R->at[i];
    double total = kb_now_ms() - c->t_round;
    cJSON *ms = cJSON_CreateObject();
    int mok = ms != NULL;
    kb_json_put_num(ms, "retrieval", c->retrieval_ms, &mok);
    kb_json_put_num(ms, "prompt", c->prompt_ms, &mok);
    kb_json_put_num(ms, "llm", c->llm_last > c->llm_first ? c->llm_last - c->llm_first : 0,
                    &mok);
    kb_json_put_num(ms, "llm_requests", c->llm_sum, &mok);
    kb_json_put_num(ms, "extraction", c->extract_ms, &mok);
    kb_json_put_num(ms, "verification", c->verify_ms, &mok);
    kb_json_put_num(ms, "total", total, &mok);
    if (!mok) {
        cJSON_Delete(ms);
        ms = NULL;
    }
    int ok;
    cJSON *e = kb_gen_event("round", NULL, &ok);
    kb_json_put_num(e, "round", c->round, &ok);
    kb_json_put_item(e, "ms", ms ? cJSON_Duplicate(ms, 1) : NULL, &ok);
    kb_json_put_str(e, "best", best ? best->key : NULL, &ok);
    kb_json_put_str(e, "best_verdict", best ? kb_gen_outcome(R, best) : NULL, &ok);
    int rok = 1;
    cJSON *rr = kb_json_push_obj(rj, &rok);
    kb_json_put_num(rr, "round", c->round, &rok);
    kb_json_put_item(rr, "ms", ms, &rok);
    if (!rok)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (kb_gen_tr_write(R, e, ok) != KB_OK && rc == KB_OK)
        rc = kb_gen_tr_error(R, err);
    if (R->eff.progress) {
        R->pg.event = "round";
        R->pg.sample = 0;
        R->eff.progress(&R->pg, R->eff.progress_ctx);
    }
    return rc;
}

kb_rc kb_gen_round(kb_gen_state *R, int round, int *stop_floor, int *all_failed, cJSON *rj,
                   kb_err *err)
{
    round_ctx c = { .round = round, .n = R->eff.samples, .first = R->nat,
                    .refine_parent = -1, .t_round = kb_now_ms(),
                    .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
    if (KB_GROW(R->at, R->nat + (size_t)c.n, R->capat) != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_buf_init(&c.fb, 0);
    kb_rc rc = KB_OK;
    c.slots = calloc((size_t)c.n, sizeof *c.slots);
    c.th = calloc((size_t)c.n, sizeof *c.th);
    c.started = calloc((size_t)c.n, sizeof *c.started);
    if (!c.slots || !c.th || !c.started) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    R->pg.round = round + 1;
    if ((rc = round_feedback(R, &c, err)) != KB_OK)
        goto out;
    rc = round_requests(R, &c, err);
    int failed = 0;
    rc = round_replies(R, &c, stop_floor, &failed, rc, err);
    *all_failed = rc == KB_OK && c.n > 0 && failed == c.n;
    if (rc == KB_OK)
        rc = round_done(R, &c, rj, err);
out:
    for (int s = 0; c.slots && c.started && s < c.n; s++) {
        if (c.started[s])
            pthread_join(c.th[s], NULL);
        kb_llm_reply_release(&c.slots[s].reply);
    }
    free(c.slots);
    free(c.th);
    free(c.started);
    free(c.pop);
    kb_buf_release(&c.fb);
    return rc;
}
