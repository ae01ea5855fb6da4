/* generate.c - the generate-verify loop (gen.h, "generate.c"): a run's
 * options settled, its rounds (round.c) until the rounds, the token
 * budget, the roofline or the LLM stop it, the best kernel verified
 * faster handed to writeback.c, and the run's summary; its folder and
 * transcript are transcript.c's. */
#include "generator/gen.h"
#include "verify/verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ------------------------------------------------------------------ write-back */

/* The write-up of the winner: one more request (recorded, and replayed)
 * into sl. */
static void request_writeup(kb_gen_state *R, kb_gen_slot *sl, const kb_buf *sys,
                            const kb_buf *user)
{
    memset(sl, 0, sizeof *sl);
    sl->llm = R->eff.llm;
    sl->req.system = sys->data;
    sl->req.user = user->data;
    kb_llm_reply_init(&sl->reply);
    if (R->eff.replay) {
        kb_gen_replay_reply(R, "writeup", sl);
    } else {
        kb_err_clear(&sl->err);
        sl->rc = kb_llm_complete(sl->llm, &sl->req, &sl->reply, &sl->err);
    }
    R->tokens_prompt += sl->reply.prompt_tokens;
    R->tokens_completion += sl->reply.completion_tokens;
    kb_gen_exchange_events(R, "writeup", NULL, &sl->reply, sl->rc == KB_OK,
                           sl->rc == KB_OK ? NULL : sl->err.msg);
}

/* The skill event, and the summary's "skill". */
static void skill_written(kb_gen_state *R, cJSON *summary, const kb_gen_attempt *a,
                          const char *name, const char *dir, const char *error,
                          const kb_gen_slot *sl)
{
    int ok;
    cJSON *e = kb_gen_event("skill", NULL, &ok);
    kb_json_put_str(e, "name", name, &ok);
    kb_json_put_str(e, "dir", dir, &ok);
    kb_json_put_str(e, "candidate", a->key, &ok);
    kb_json_put_str(e, "parent", a->parent_skill, &ok);
    kb_json_put_str(e, "error", error, &ok);
    kb_json_put_str(e, "writeup_error", sl->rc == KB_OK ? NULL : sl->err.msg, &ok);
    kb_gen_tr_write(R, e, ok);
    cJSON *sk = cJSON_CreateObject();
    ok = sk != NULL;
    kb_json_put_str(sk, "name", name, &ok);
    kb_json_put_str(sk, "dir", dir, &ok);
    kb_json_put_str(sk, "parent", a->parent_skill, &ok);
    kb_json_put_bool(sk, "drafted_by_llm", sl->rc == KB_OK, &ok);
    kb_json_put_str(sk, "error", error, &ok);
    if (!ok || !cJSON_AddItemToObject(summary, "skill", sk))
        cJSON_Delete(sk);
}

static kb_rc write_back(kb_gen_state *R, cJSON *summary, kb_err *err)
{
    const kb_gen_attempt *a = &R->at[R->best];
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
    kb_gen_slot sl;
    request_writeup(R, &sl, &sys, &user);
    /* a write-up that did not come leaves placeholders for the reviewer */
    w.writeup = sl.rc == KB_OK ? sl.reply.text : NULL;
    char *name = NULL, *dir = NULL;
    rc = kb_gen_write_skill(&w, &name, &dir, err);
    skill_written(R, summary, a, name, dir, rc == KB_OK ? NULL : err->msg, &sl);
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

/* The run's counts: verdicts by kind, and the time. */
static void put_counts(const kb_gen_state *R, cJSON *s, int *ok)
{
    size_t verified = 0;
    for (size_t i = 0; i < R->nat; i++)
        verified += R->at[i].verified;
    kb_json_put_num(s, "verified", (double)verified, ok);
    kb_json_put_num(s, "duplicates", (double)R->pg.duplicates, ok);
    kb_json_put_num(s, "no_kernel", (double)R->pg.no_kernel, ok);
    kb_json_put_num(s, "llm_errors", (double)R->pg.llm_errors, ok);
    double wall = kb_now_ms() - R->t0;
    kb_json_put_num(s, "ms", wall, ok);
    kb_json_put_num(s, "verified_per_minute", wall > 0 ? verified * 60000.0 / wall : 0, ok);
    cJSON *verdicts = kb_json_put_obj(s, "verdicts", ok);
    for (int v = 0; *ok && v <= KB_VERIFY_UNKNOWN; v++)
        if (R->pg.nverdicts[v])
            kb_json_put_num(verdicts, kb_verify_verdict_name((kb_verify_verdict)v),
                            (double)R->pg.nverdicts[v], ok);
}

/* Every candidate with its verdict. */
static void put_candidates(const kb_gen_state *R, cJSON *s, int *ok)
{
    cJSON *cands = kb_json_put_arr(s, "candidates", ok);
    for (size_t i = 0; *ok && i < R->nat; i++) {
        const kb_gen_attempt *a = &R->at[i];
        const kb_gen_attempt *v = kb_gen_verdict_of(R, a);
        cJSON *c = kb_json_push_obj(cands, ok);
        kb_json_put_str(c, "key", a->key, ok);
        kb_json_put_num(c, "round", a->round, ok);
        kb_json_put_num(c, "sample", a->sample, ok);
        kb_json_put_str(c, "verdict", kb_gen_outcome(R, a), ok);
        kb_json_put_str(c, "hash", a->x.status == KB_EXTRACT_OK && !a->llm_error ? a->hash
                                                                                 : NULL, ok);
        kb_json_put_str(c, "file", a->file, ok);
        kb_json_put_str(c, "duplicate_of", a->dup_of >= 0 ? R->at[a->dup_of].key : NULL, ok);
        kb_json_put_str(c, "technique", a->x.status == KB_EXTRACT_OK ? a->technique : NULL,
                        ok);
        if (v && v->r.has_speedup)
            kb_json_put_num(c, "speedup", v->r.speedup_geomean, ok);
        else
            kb_json_put_null(c, "speedup", ok);
        kb_json_put_str(c, "reason", a->llm_error ? a->llm_error
                                     : a->x.status != KB_EXTRACT_OK ? a->x.message
                                     : v ? v->r.reason : NULL, ok);
    }
}

/* The best, and the credit: the skills in the winner's prompt, and in
 * any prompt. */
static void put_best_credit(const kb_gen_state *R, cJSON *s, int *ok)
{
    kb_json_put_str(s, "best", R->best >= 0 ? R->at[R->best].key : NULL, ok);
    if (R->best >= 0)
        kb_json_put_num(s, "best_speedup", R->at[R->best].r.speedup_geomean, ok);
    else
        kb_json_put_null(s, "best_speedup", ok);
    cJSON *credit = kb_json_put_obj(s, "credit", ok);
    kb_json_put_str(credit, "winner", R->best >= 0 ? R->at[R->best].key : NULL, ok);
    cJSON *used = kb_json_put_arr(credit, "used", ok);
    cJSON *won = kb_json_put_arr(credit, "won", ok);
    for (size_t i = 0; *ok && i < R->nprompts; i++)
        add_skills(used, &R->prompts[i]);
    if (*ok && R->best >= 0)
        add_skills(won, &R->prompts[R->at[R->best].prompt]);
}

/* A replay's verdicts against the recorded ones. */
static void put_replay(const kb_gen_state *R, cJSON *s, int *ok)
{
    cJSON *rp = kb_json_put_obj(s, "replay", ok);
    kb_json_put_str(rp, "of", R->replay_of, ok);
    cJSON *diff = cJSON_CreateArray();
    int same = 1;
    for (size_t i = 0; i < R->nat && diff; i++) {
        const cJSON *rec = kb_gen_jget(R->recorded, R->at[i].key);
        const char *was = kb_gen_jstr(rec, "verdict", "");
        const char *now = kb_gen_outcome(R, &R->at[i]);
        /* a duplicate's verdict is its first's: recorded once */
        if (!rec && R->at[i].dup_of >= 0)
            continue;
        if (strcmp(was, now) != 0) {
            same = 0;
            int dok = 1;
            cJSON *d = kb_json_push_obj(diff, &dok);
            kb_json_put_str(d, "key", R->at[i].key, &dok);
            kb_json_put_str(d, "recorded", *was ? was : NULL, &dok);
            kb_json_put_str(d, "now", now, &dok);
        }
    }
    kb_json_put_bool(rp, "same_verdicts", same, ok);
    kb_json_put_item(rp, "differences", diff, ok);
}

static cJSON *make_summary(kb_gen_state *R, const char *stop)
{
    cJSON *s = cJSON_CreateObject();
    int ok = s != NULL;
    kb_json_put_num(s, "kb_generate", 1, &ok);
    kb_json_put_str(s, "id", R->id, &ok);
    kb_json_put_str(s, "dir", R->dir, &ok);
    kb_json_put_str(s, "task", R->task->name, &ok);
    kb_json_put_str(s, "model", R->model, &ok);
    kb_json_put_str(s, "strategy", kb_gen_strategy_name(R->eff.strategy), &ok);
    kb_json_put_num(s, "samples", R->eff.samples, &ok);
    kb_json_put_num(s, "rounds", R->eff.rounds, &ok);
    kb_json_put_bool(s, "compile_only", R->eff.compile_only, &ok);
    int rounds_run = R->nat ? R->at[R->nat - 1].round + 1 : 0;
    kb_json_put_num(s, "rounds_run", rounds_run, &ok);
    kb_json_put_str(s, "stop", stop, &ok);
    kb_json_put_num(s, "requests", (double)R->nat, &ok);
    kb_json_put_num(s, "prompt_tokens", (double)R->tokens_prompt, &ok);
    kb_json_put_num(s, "completion_tokens", (double)R->tokens_completion, &ok);
    kb_json_put_num(s, "tokens", (double)(R->tokens_prompt + R->tokens_completion), &ok);
    put_counts(R, s, &ok);
    put_candidates(R, s, &ok);
    put_best_credit(R, s, &ok);
    kb_json_put_item(s, "round_ms", cJSON_Duplicate(R->rounds, 1), &ok);
    if (R->eff.replay)
        put_replay(R, s, &ok);
    if (!ok) {
        cJSON_Delete(s);
        return NULL;
    }
    return s;
}

/* ------------------------------------------------------------------ kb_gen_run */

/* The run's options settled: a replay's recorded ones (verified alike:
 * its own verifier when it compiled only and this one does not, or the
 * other way), the defaults, the task loaded. */
static kb_rc run_setup(kb_gen_state *R, kb_verifier **own_verifier, kb_err *err)
{
    const kb_gen_opts *o = R->o;
    kb_rc rc;
    if (o->replay && (rc = kb_gen_load_replay(R, err)) != KB_OK)
        return rc;
    if (o->replay && R->eff.compile_only != o->compile_only) {
        /* the run compiled only (or did not): its replay verifies alike */
        kb_verifier_opts vo;
        kb_verifier_opts_init(&vo);
        vo.kb_verify = kb_verifier_path(o->verifier);
        vo.queue = kb_verifier_queue(o->verifier);
        vo.serve = 1;
        vo.compile_only = R->eff.compile_only;
        if ((rc = kb_verifier_open(&vo, own_verifier, err)) != KB_OK)
            return rc;
        R->eff.verifier = *own_verifier;
    }
    if (R->eff.samples <= 0)
        R->eff.samples = 4;
    if (R->eff.samples > 64)
        R->eff.samples = 64;
    if (R->eff.rounds <= 0)
        R->eff.rounds = 3;
    if (R->eff.population <= 0)
        R->eff.population = 4;
    if (R->eff.prompt_tokens <= 0)
        R->eff.prompt_tokens = 12000;
    if (R->eff.repair_tokens <= 0)
        R->eff.repair_tokens = 800;
    if (R->eff.floor_fraction <= 0)
        R->eff.floor_fraction = 0.9;
    R->model = o->llm && o->llm->model ? o->llm->model : "";
    if ((rc = kb_task_load(o->task_dir, &R->task, err)) != KB_OK)
        return rc;
    if (o->replay && strcmp(R->replay_task, R->task->name) != 0)
        return kb_err_set(err, KB_ERR_USAGE, "run '%s' is for task '%s', not '%s'",
                          o->replay, R->replay_task, R->task->name);
    if (!(R->rounds = cJSON_CreateArray()))
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return KB_OK;
}

/* The run's folder and its run event. */
static kb_rc run_open(kb_gen_state *R, kb_err *err)
{
    kb_rc rc;
    if ((rc = kb_gen_make_run_dir(R, err)) != KB_OK)
        return rc;
    if (R->o->replay)   /* the recorded model stands for this run's */
        R->model = R->replay_model ? R->replay_model : "";
    if ((rc = kb_gen_write_run_event(R, err)) != KB_OK)
        return rc;
    R->pg.rounds = R->eff.rounds;
    R->pg.samples = R->eff.samples;
    return KB_OK;
}

/* The rounds until one of them stops the run (*stop says why). */
static kb_rc run_rounds(kb_gen_state *R, const char **stop, kb_err *err)
{
    kb_rc rc = KB_OK;
    *stop = "rounds";
    for (int round = 0; round < R->eff.rounds; round++) {
        if (R->eff.budget_tokens > 0 &&
            R->tokens_prompt + R->tokens_completion >= R->eff.budget_tokens) {
            *stop = "budget";
            break;
        }
        int at_floor_now = 0, all_failed = 0;
        if ((rc = kb_gen_round(R, round, &at_floor_now, &all_failed, R->rounds, err)) != KB_OK)
            break;
        if (at_floor_now) {
            *stop = "floor";
            break;
        }
        if (all_failed) {
            *stop = "llm";
            break;
        }
    }
    return rc;
}

/* The summary of a run that went to its end (*rcp: how it ended), the
 * winner written back first when there is one to write; a winner that
 * could not be written back fails the run (*rcp), its summary kept. */
static cJSON *run_summary(kb_gen_state *R, kb_rc *rcp, const char *stop, kb_err *err)
{
    kb_rc rc = *rcp;
    cJSON *summary;
    if (rc == KB_OK && R->best >= 0 && R->eff.skills_dir && !R->eff.compile_only &&
        !R->eff.replay) {   /* a replay checks verdicts; its run wrote the skill */
        cJSON *tmp = cJSON_CreateObject();
        kb_err werr;
        kb_err_clear(&werr);
        if (tmp && write_back(R, tmp, &werr) != KB_OK)
            *rcp = kb_err_set(err, werr.rc, "the winning kernel was not written back: %s",
                              werr.msg);
        summary = make_summary(R, stop);
        if (summary && tmp) {
            cJSON *sk = cJSON_DetachItemFromObject(tmp, "skill");
            if (sk)
                cJSON_AddItemToObject(summary, "skill", sk);
        }
        cJSON_Delete(tmp);
    } else {
        summary = make_summary(R, rc == KB_OK ? stop : "error");
    }
    if (summary && rc != KB_OK)
        cJSON_AddStringToObject(summary, "error", err->msg);
    if (summary && !kb_gen_jget(summary, "skill"))
        cJSON_AddNullToObject(summary, "skill");
    return summary;
}

/* The summary as the transcript's last event and as summary.json. */
static kb_rc write_summary(kb_gen_state *R, const cJSON *summary, kb_rc rc, kb_err *err)
{
    cJSON *e = cJSON_Duplicate(summary, 1);
    int ok = e != NULL;
    kb_json_put_str(e, "event", "summary", &ok);
    if (ok)
        kb_gen_tr_write(R, e, ok);
    else
        cJSON_Delete(e);
    char *txt = cJSON_Print(summary);
    char *sp = kb_path_join(R->dir, "summary.json");
    kb_err serr;
    kb_err_clear(&serr);
    if (!txt || !sp || kb_write_file_atomic(sp, txt, strlen(txt), &serr) != KB_OK) {
        if (rc == KB_OK)
            rc = kb_err_set(err, KB_ERR_IO, "cannot write the run's summary: %s",
                            serr.msg[0] ? serr.msg : "out of memory");
    }
    free(txt);
    free(sp);
    return rc;
}

/* Frees what the run holds. */
static void run_release(kb_gen_state *R)
{
    if (R->tr)
        fclose(R->tr);
    for (size_t i = 0; i < R->nat; i++) {
        kb_gen_attempt *a = &R->at[i];
        kb_llm_reply_release(&a->reply);
        kb_extracted_release(&a->x);
        kb_verify_result_release(&a->r);
        free(a->llm_error);
        free(a->file);
        free(a->parent_skill);
    }
    free(R->at);
    for (size_t i = 0; i < R->nprompts; i++) {
        kb_gen_prompt_release(&R->prompts[i]);
        free(R->prompt_parent_skill[i]);
    }
    free(R->prompts);
    free(R->prompt_parent_skill);
    cJSON_Delete(R->replies);
    cJSON_Delete(R->recorded);
    cJSON_Delete(R->rounds);
    free(R->replay_of);
    free(R->replay_model);
    free(R->replay_task);
    kb_task_free(R->task);
    free(R->dir);
    free(R->kdir);
}

kb_rc kb_gen_run(const kb_gen_opts *o, cJSON **summary, kb_err *err)
{
    *summary = NULL;
    if (!o->task_dir || !o->verifier || !o->runs_dir || (!o->llm && !o->replay))
        return kb_err_set(err, KB_ERR_USAGE, "kb_gen_run: a task, a verifier, a runs "
                          "folder and an LLM (or a run to replay) are needed");
    kb_gen_state R;
    memset(&R, 0, sizeof R);
    kb_verifier *own_verifier = NULL;
    R.o = o;
    R.eff = *o;
    R.best = -1;
    R.t0 = kb_now_ms();
    const char *stop = "rounds";
    kb_rc rc = run_setup(&R, &own_verifier, err);
    if (rc == KB_OK)
        rc = run_open(&R, err);
    if (rc != KB_OK)
        goto out;
    rc = run_rounds(&R, &stop, err);
    if ((*summary = run_summary(&R, &rc, stop, err)) != NULL)
        rc = write_summary(&R, *summary, rc, err);
    else if (rc == KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && R.tr_rc != KB_OK)
        rc = kb_gen_tr_error(&R, err);
out:
    run_release(&R);
    kb_verifier_free(own_verifier);
    return rc;
}
