/* cmd_generate.c - kb generate: the generate-verify loop for a task
 * (generator/gen.h, "generate.c"): prompts from the KB, an LLM's kernels
 * verified by kb-verify, the verdicts fed back, a win written back as a
 * draft skill; --dry-run prints the first prompt, --replay re-runs a
 * transcript against its recorded replies. */
#include "cli/cli.h"
#include "generator/gen.h"
#include "verify/verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


typedef struct {
    int tty;
    int shown;
} progress_state;

/* "2 faster, 1 compile_error" from the counts so far. */
static void verdicts_text(const kb_gen_progress *p, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int v = 0; v <= KB_VERIFY_UNKNOWN && len < n; v++) {
        if (!p->nverdicts[v])
            continue;
        int w = snprintf(buf + len, n - len, "%s%zu %s", len ? ", " : "", p->nverdicts[v],
                         kb_verify_verdict_name((kb_verify_verdict)v));
        if (w < 0)
            break;
        len += (size_t)w;
    }
    const struct { size_t k; const char *what; } more[] = {
        { p->no_kernel, "no kernel" }, { p->duplicates, "duplicate" },
        { p->llm_errors, "no reply" },
    };
    for (size_t i = 0; i < 3 && len < n; i++) {
        if (!more[i].k)
            continue;
        int w = snprintf(buf + len, n - len, "%s%zu %s", len ? ", " : "", more[i].k,
                         more[i].what);
        if (w < 0)
            break;
        len += (size_t)w;
    }
    if (!len)
        snprintf(buf, n, "no verdict yet");
}

static void on_progress(const kb_gen_progress *p, void *ctx)
{
    progress_state *ps = ctx;
    char v[256], best[32] = "-";
    verdicts_text(p, v, sizeof v);
    if (p->best_speedup > 0)
        snprintf(best, sizeof best, "%.2fx", p->best_speedup);
    if (strcmp(p->event, "request") == 0)
        fprintf(stderr, "%sround %d/%d: %d sample%s requested%s", ps->tty ? "\r\033[K" : "",
                p->round, p->rounds, p->samples, p->samples == 1 ? "" : "s",
                ps->tty ? "" : "\n");
    else if (strcmp(p->event, "verdict") == 0)
        fprintf(stderr, "%sround %d/%d, sample %d/%d: %s | %s | best %s | %ld tokens%s",
                ps->tty ? "\r\033[K" : "", p->round, p->rounds, p->sample, p->samples,
                p->verdict ? p->verdict : "?", v, best, p->tokens, ps->tty ? "" : "\n");
    else if (strcmp(p->event, "round") == 0 && ps->tty)
        fprintf(stderr, "\r\033[Kround %d/%d done: %s | best %s | %ld tokens\n", p->round,
                p->rounds, v, best, p->tokens);
    ps->shown = 1;
    fflush(stderr);
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double jnum(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* The summary for a person. */
static void print_summary(const cJSON *s)
{
    printf("%s: %s, %.0f round%s of %.0f sample%s (%s), %.0f requests, %.0f verified",
           jstr(s, "task") ? jstr(s, "task") : "?", jstr(s, "strategy"),
           jnum(s, "rounds_run"), jnum(s, "rounds_run") == 1 ? "" : "s", jnum(s, "samples"),
           jnum(s, "samples") == 1 ? "" : "s",
           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "compile_only"))
           ? "compile only" : "verified on the GPU",
           jnum(s, "requests"), jnum(s, "verified"));
    if (jnum(s, "duplicates") > 0)
        printf(" (%.0f duplicate%s not verified again)", jnum(s, "duplicates"),
               jnum(s, "duplicates") == 1 ? "" : "s");
    putchar('\n');
    const cJSON *v, *verdicts = cJSON_GetObjectItemCaseSensitive(s, "verdicts");
    printf("  verdicts:");
    const char *sep = " ";
    cJSON_ArrayForEach(v, verdicts) {
        printf("%s%.0f %s", sep, v->valuedouble, v->string);
        sep = ", ";
    }
    if (jnum(s, "no_kernel") > 0)
        printf("%s%.0f without a kernel", sep, jnum(s, "no_kernel")), sep = ", ";
    if (jnum(s, "llm_errors") > 0)
        printf("%s%.0f without a reply", sep, jnum(s, "llm_errors")), sep = ", ";
    if (*sep == ' ')
        printf(" none");
    putchar('\n');
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(s, "candidates")) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(c, "speedup");
        printf("  %-6s %-14s", jstr(c, "key"), jstr(c, "verdict") ? jstr(c, "verdict") : "?");
        if (cJSON_IsNumber(sp))
            printf(" %6.2fx", sp->valuedouble);
        else
            printf("        ");
        if (jstr(c, "duplicate_of"))
            printf("  the same kernel as %s", jstr(c, "duplicate_of"));
        else if (jstr(c, "reason")) {
            const char *r = jstr(c, "reason");
            putchar(' ');
            putchar(' ');
            kb_cli_put_safe(stdout, r, strlen(r) > 100 ? 100 : strlen(r));
            if (strlen(r) > 100)
                fputs("...", stdout);
        }
        putchar('\n');
    }
    if (jstr(s, "best"))
        printf("  best: %s, %.2fx its baseline\n", jstr(s, "best"), jnum(s, "best_speedup"));
    else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "compile_only")))
        printf("  compile only: compiled %.0f of %.0f kernels; none ran, so none is known "
               "correct or faster (verify on a GPU for that)\n",
               jnum(cJSON_GetObjectItemCaseSensitive(s, "verdicts"), "compiled"),
               jnum(s, "verified"));
    else
        printf("  best: none verified faster\n");
    const cJSON *sk = cJSON_GetObjectItemCaseSensitive(s, "skill");
    if (cJSON_IsObject(sk) && jstr(sk, "dir"))
        printf("  skill: %s (a draft: review it, then 'kb skill verify %s')\n", jstr(sk, "dir"),
               jstr(sk, "name"));
    else if (cJSON_IsObject(sk) && jstr(sk, "error"))
        printf("  skill: not written: %s\n", jstr(sk, "error"));
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(s, "replay");
    if (cJSON_IsObject(rp))
        printf("  replay of %s: %s\n", jstr(rp, "of") ? jstr(rp, "of") : "?",
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rp, "same_verdicts"))
               ? "the same verdicts" : "verdicts differ (see summary.json)");
    printf("  tokens: %.0f (prompt %.0f, completion %.0f); stopped: %s\n", jnum(s, "tokens"),
           jnum(s, "prompt_tokens"), jnum(s, "completion_tokens"),
           jstr(s, "stop") ? jstr(s, "stop") : "?");
    printf("  transcript: %s/transcript.jsonl\n", jstr(s, "dir") ? jstr(s, "dir") : "?");
}

/* The exit status of a finished run: 0 when a kernel met the goal
 * (faster; compiled when only compiling), 4 when every verification ended
 * in 'error' (no GPU), 1 else. */
static int run_status(const cJSON *s)
{
    const cJSON *verdicts = cJSON_GetObjectItemCaseSensitive(s, "verdicts");
    int compile_only = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "compile_only"));
    if (!compile_only && jstr(s, "best"))
        return 0;
    if (compile_only && jnum(verdicts, "compiled") > 0)
        return 0;
    double all = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, verdicts)
        all += v->valuedouble;
    return all > 0 && jnum(verdicts, "error") == all ? 4 : 1;
}

static int dry_run(const kb_gen_opts *g, const char *task_name, int json)
{
    kb_gen_prompt_opts po = {
        .store = g->store, .config = g->config, .tasks_dir = g->tasks_dir,
        .task = task_name, .device = g->device, .budget_tokens = g->prompt_tokens,
        .choose = g->store && kb_gen_can_choose(g->config),   /* as round 1 does */
    };
    kb_gen_prompt p;
    memset(&p, 0, sizeof p);
    kb_err err;
    kb_err_clear(&err);
    if (kb_gen_prompt_build(&po, &p, &err) != KB_OK)
        return kb_cli_fail(&err);
    int status = 0;
    if (json) {
        /* kb prompt --json's object (the same prompt, kb_gen_prompt_build's)
         * with the task's name */
        cJSON *o = NULL;
        if (kb_gen_prompt_json(&p, &o, &err) == KB_OK &&
            !cJSON_AddStringToObject(o, "task", task_name)) {
            cJSON_Delete(o);
            o = NULL;
        }
        if (kb_cli_print_json(o, &err) != KB_OK)
            status = kb_cli_fail(&err);
    } else {
        printf("=== system ===\n%s\n=== user ===\n%s\n", p.system, p.user);
        fprintf(stderr, "about %ld tokens, %zu passages cited, sha256 %s; nothing was sent\n",
                p.tokens, p.ncites, p.hash);
    }
    kb_gen_prompt_release(&p);
    return status;
}

static const kb_option generate_options[] = {
    { "samples", KB_OPT_LONG('n'), "N", "candidates requested at once per round (1-64; default 4)" },
    { "rounds", KB_OPT_LONG('r'), "R", "rounds of feedback (1-100; default 3)" },
    { "workers", KB_OPT_LONG('w'), "N", "with a queue (KB_QUEUE): candidates in flight at once (1-64)" },
    { "strategy", KB_OPT_LONG('s'), "S", "refine (the best so far, with every verdict; default)\n"
      "or population (parents drawn from the best few, one per\ntechnique)" },
    { "population", KB_OPT_LONG('P'), "N", "kernels population keeps (default 4)" },
    { "budget-tokens", KB_OPT_LONG('b'), "N", "no round starts once the run has used N tokens" },
    { "prompt-tokens", KB_OPT_LONG('p'), "N", "each prompt's budget (1000-1000000; default 12000)" },
    { "max-tokens", KB_OPT_LONG('m'), "N", "each reply's cap (default 4096)" },
    { "floor-fraction", KB_OPT_LONG('f'), "F", "stop once a kernel reaches F of the roofline (the\n"
      "floor over its median; default 0.9)" },
    { "compile-only", KB_OPT_LONG('c'), NULL, "NVRTC only (no GPU): 'compiled' is the goal, nothing\n"
      "is written back" },
    { "out", KB_OPT_LONG('o'), "DIR", "the runs folder (default KB/runs)" },
    { "skills", KB_OPT_LONG('S'), "DIR", "where a win is written (default: corpus/skills where kb finds it)" },
    { "no-write", KB_OPT_LONG('W'), NULL, "write no skill" },
    { "replay", KB_OPT_LONG('R'), "RUN", "re-run RUN's transcript against its recorded replies\n"
      "(a run id in the runs folder, or its folder); no LLM" },
    { "dry-run", KB_OPT_LONG('d'), NULL, "print the first prompt; call nothing (with\n"
      "KB_RERANK=llm, only the request that chooses its passages)" },
    { "timeout", KB_OPT_LONG('t'), "S", "kb-verify's wall-clock limit per candidate (default 120)" },
    { "json", KB_OPT_LONG('j'), NULL, "one JSON summary object" },
    { NULL, 0, NULL, NULL },
};

static int cmd_generate(int argc, char **argv, const kb_cli *cli, const kb_command *self);

const kb_command kb_cmd_generate = {
    .name = "generate",
    .fn = cmd_generate,
    .usage = "kb generate [options] TASK",
    .summary = "an LLM's kernels for a task, verified and fed back; a win becomes a draft skill",
    .options = generate_options,
    .notes = "The LLM: KB_LLM_URL, KB_LLM_MODEL, KB_LLM_API_KEY, KB_LLM_API (see docs/generate.md,\n"
             "\"LLM endpoints\"); kb-verify: KB_VERIFY. Exit status 0 when a kernel met the\n"
             "goal (faster; compiled with --compile-only), 1 when none did, 4 when every\n"
             "verification ended in 'error' (no GPU).\n",
    .operands = "task",
};

/* kb generate's arguments. */
typedef struct {
    kb_gen_opts g;
    const char *out_dir, *skills, *task;
    int json, dry, no_write;
    double timeout;
    long max_tokens;
} gen_args;

/* A number option into *out (the usage error's status into *status). */
static int parse_number(const kb_command *self, const kb_getopt *go, int c, gen_args *a,
                        int *status)
{
    long v = 0;
    switch (c) {
    case KB_OPT_LONG('n'):
        if (kb_parse_long(go->arg, 1, 64, &v) != KB_OK)
            return *status = kb_cli_usage_error(self, "--samples must be 1 to 64, not '%s'",
                                                go->arg), 1;
        a->g.samples = (int)v;
        break;
    case KB_OPT_LONG('w'):
        if (kb_parse_long(go->arg, 1, 64, &v) != KB_OK)
            return *status = kb_cli_usage_error(self, "--workers must be 1 to 64, not '%s'",
                                                go->arg), 1;
        a->g.workers = (int)v;
        break;
    case KB_OPT_LONG('r'):
        if (kb_parse_long(go->arg, 1, 100, &v) != KB_OK)
            return *status = kb_cli_usage_error(self, "--rounds must be 1 to 100, not '%s'",
                                                go->arg), 1;
        a->g.rounds = (int)v;
        break;
    case KB_OPT_LONG('P'):
        if (kb_parse_long(go->arg, 1, 64, &v) != KB_OK)
            return *status = kb_cli_usage_error(self, "--population must be 1 to 64, not "
                                                "'%s'", go->arg), 1;
        a->g.population = (int)v;
        break;
    case KB_OPT_LONG('b'):
        if (kb_parse_long(go->arg, 1, 1000000000L, &a->g.budget_tokens) != KB_OK)
            return *status = kb_cli_usage_error(self, "--budget-tokens must be a positive "
                                                "number of tokens, not '%s'", go->arg), 1;
        break;
    case KB_OPT_LONG('p'):
        if (kb_parse_long(go->arg, 1000, 1000000L, &a->g.prompt_tokens) != KB_OK)
            return *status = kb_cli_usage_error(self, "--prompt-tokens must be 1000 to "
                                                "1000000, not '%s'", go->arg), 1;
        break;
    case KB_OPT_LONG('m'):
        if (kb_parse_long(go->arg, 16, 1000000L, &a->max_tokens) != KB_OK)
            return *status = kb_cli_usage_error(self, "--max-tokens must be 16 to 1000000, "
                                                "not '%s'", go->arg), 1;
        break;
    case KB_OPT_LONG('f'): {
        char *end = NULL;
        double f = strtod(go->arg, &end);
        if (!end || *end || !(f > 0 && f <= 1))
            return *status = kb_cli_usage_error(self, "--floor-fraction must be in (0, 1], "
                                                "not '%s'", go->arg), 1;
        a->g.floor_fraction = f;
        break;
    }
    case KB_OPT_LONG('t'): {
        char *end = NULL;
        a->timeout = strtod(go->arg, &end);
        if (!end || *end || !(a->timeout > 0 && a->timeout <= 86400))
            return *status = kb_cli_usage_error(self, "--timeout must be seconds, 0 to "
                                                "86400, not '%s'", go->arg), 1;
        break;
    }
    }
    return 0;
}

/* The options and the TASK into a; 1 when the command ends here, with
 * *status. */
static int parse_args(int argc, char **argv, const kb_command *self, gen_args *a,
                      int *status)
{
    memset(a, 0, sizeof *a);
    kb_gen_opts_init(&a->g);
    a->timeout = 120;
    int c;
    kb_getopt go;
    kb_getopt_init(&go, self, argc, argv);
    while ((c = kb_getopt_next(&go)) > 0) {
        switch (c) {
        case KB_OPT_LONG('s'):
            if (kb_gen_strategy_parse(go.arg, &a->g.strategy) != 0)
                return *status = kb_cli_usage_error(self, "--strategy is refine or "
                                                    "population, not '%s'", go.arg), 1;
            break;
        case KB_OPT_LONG('o'): a->out_dir = go.arg; break;
        case KB_OPT_LONG('S'): a->skills = go.arg; break;
        case KB_OPT_LONG('W'): a->no_write = 1; break;
        case KB_OPT_LONG('d'): a->dry = 1; break;
        case KB_OPT_LONG('j'): a->json = 1; break;
        case KB_OPT_LONG('R'): a->g.replay = go.arg; break;
        case KB_OPT_LONG('c'): a->g.compile_only = 1; break;
        default:
            if (parse_number(self, &go, c, a, status))
                return 1;
        }
    }
    if (c < 0)
        return *status = go.status, 1;
    if (go.ind + 1 != argc)
        return *status = kb_cli_usage_error(self, go.ind < argc ? "one TASK, not several"
                                            : "need a TASK (a task's name or folder)"), 1;
    if (a->dry && a->g.replay)
        return *status = kb_cli_usage_error(self, "--dry-run and --replay do not go "
                                            "together"), 1;
    a->task = argv[go.ind];
    return 0;
}

/* The task's folder (*task_dir) and the folder of tasks it is in
 * (*tasks_dir), both the caller's. */
static kb_rc find_task(const kb_cli *cli, const char *task, char **task_dir, char **tasks_dir,
                       kb_err *err)
{
    char *manifest = kb_manifest_path(cli->config, cli->kb_dir);
    kb_rc rc = manifest ? kb_task_find(task, manifest, task_dir, err)
                        : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    free(manifest);
    if (rc != KB_OK)
        return rc;
    *tasks_dir = kb_strdup(*task_dir);
    char *slash = *tasks_dir ? strrchr(*tasks_dir, '/') : NULL;
    if (!*tasks_dir)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (slash)
        *slash = '\0';
    else
        (*tasks_dir)[0] = '.', (*tasks_dir)[1] = '\0';
    return KB_OK;
}

/* The LLM (not for a dry run or a replay), the KB (none for a dry run
 * without one) and the verifier. */
static kb_rc open_deps(const kb_cli *cli, gen_args *a, kb_llm_opts *llm, kb_store **store,
                       kb_verifier **ver, kb_err *err)
{
    kb_rc rc = KB_OK;
    if (!a->dry && !a->g.replay &&
        (rc = kb_llm_opts_from_config(cli->config, llm, err)) == KB_OK) {
        if (a->max_tokens)
            llm->max_tokens = a->max_tokens;
        a->g.llm = llm;
    }
    if (rc == KB_OK) {
        rc = kb_cli_open_store(cli, a->dry ? KB_STORE_READONLY : KB_STORE_CREATE, store, err);
        if (rc != KB_OK && a->dry && err->rc == KB_ERR_NOTFOUND) {
            /* a dry run without a KB: the prompt without retrieval */
            kb_err_clear(err);
            *store = NULL;
            rc = KB_OK;
        }
    }
    kb_verifier_opts vo;
    kb_verifier_opts_init(&vo);
    vo.kb_verify = cli->config ? cli->config->verify : NULL;
    vo.queue = cli->config ? cli->config->queue : NULL;   /* KB_QUEUE */
    vo.timeout_s = a->timeout;
    vo.serve = 1;
    vo.compile_only = a->g.compile_only;
    if (rc == KB_OK)
        rc = kb_verifier_open(&vo, ver, err);
    return rc;
}

/* Runs the loop in runs and reports its summary; the exit status. */
static int run_loop(const kb_cli *cli, gen_args *a, const char *runs)
{
    kb_err err;
    kb_err_clear(&err);
    cJSON *summary = NULL;
    a->g.runs_dir = runs;
    progress_state ps = { .tty = isatty(STDERR_FILENO) };
    if (cli->progress || (!cli->quiet && !a->json)) {
        a->g.progress = on_progress;
        a->g.progress_ctx = &ps;
    }
    kb_rc rc = kb_gen_run(&a->g, &summary, &err);
    if (rc != KB_OK && !summary)
        return kb_cli_fail(&err);
    int status;
    if (a->json) {
        kb_err jerr;
        kb_err_clear(&jerr);
        status = run_status(summary);
        cJSON *copy = cJSON_Duplicate(summary, 1);
        if (kb_cli_print_json(copy, &jerr) != KB_OK)
            status = kb_cli_fail(&jerr);
    } else {
        print_summary(summary);
        status = run_status(summary);
    }
    if (rc != KB_OK)
        status = kb_cli_fail(&err);
    cJSON_Delete(summary);
    return status;
}

static int cmd_generate(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    gen_args a;
    int status = 1;
    if (parse_args(argc, argv, self, &a, &status))
        return status;
    kb_err err;
    kb_err_clear(&err);
    char *task_dir = NULL, *tasks_dir = NULL, *runs = NULL, *skills = NULL;
    kb_store *store = NULL;
    kb_verifier *ver = NULL;
    cJSON *device = NULL;
    kb_llm_opts llm;
    memset(&llm, 0, sizeof llm);
    kb_rc rc = find_task(cli, a.task, &task_dir, &tasks_dir, &err);
    if (rc == KB_OK)
        rc = open_deps(cli, &a, &llm, &store, &ver, &err);
    if (rc != KB_OK) {
        status = kb_cli_fail(&err);
        goto out;
    }
    /* the hardware profile for the prompt; none without a GPU */
    kb_err derr;
    kb_err_clear(&derr);
    if (kb_verifier_device_info(ver, &device, &derr) != KB_OK && !cli->quiet)
        fprintf(stderr, "kb generate: %s; the prompt says the device is unknown\n", derr.msg);
    a.g.task_dir = task_dir;
    a.g.tasks_dir = tasks_dir;
    a.g.store = store;
    a.g.config = cli->config;
    a.g.verifier = ver;
    a.g.device = device;
    /* a win goes into the library kb finds, not a corpus/ of the
     * working directory's */
    if (!a.skills && !a.no_write)
        a.skills = skills = kb_cli_data(cli, "skills");
    a.g.skills_dir = a.no_write ? NULL : a.skills;
    if (a.dry) {
        const char *base = strrchr(task_dir, '/');
        status = dry_run(&a.g, base ? base + 1 : task_dir, a.json);
    } else if (!(runs = a.out_dir ? kb_strdup(a.out_dir) : kb_path_join(cli->kb_dir, "runs"))) {
        kb_err_set(&err, KB_ERR_NOMEM, "out of memory");
        status = kb_cli_fail(&err);
    } else {
        status = run_loop(cli, &a, runs);
    }
out:
    cJSON_Delete(device);
    kb_verifier_free(ver);
    kb_store_close(store);
    free(task_dir);
    free(tasks_dir);
    free(runs);
    free(skills);
    return status;
}
