/* cmd_prompt.c - kb prompt TASK: the generator's prompt for a task
 * (generator/gen.h, kb_gen_prompt_build), printed alone for a coding agent
 * that writes the kernel itself and hands it back through kb verify. */
#include "cli/cli.h"
#include "generator/gen.h"
#include "verify/verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILE_MAX_BYTES (4u << 20)
#define DEVICE_INFO_TIMEOUT_S 60

/* The JSON object in the file at path, or NULL with err set. */
static cJSON *read_object(const char *path, kb_err *err)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    cJSON *j = NULL;
    if (kb_read_file(path, FILE_MAX_BYTES, &b, err) == KB_OK) {
        j = cJSON_ParseWithOpts(b.data ? b.data : "", NULL, 1);
        if (!cJSON_IsObject(j)) {
            kb_err_set(err, KB_ERR_PARSE, "'%s' is not a JSON object (kb-verify "
                       "--device-info --json writes one)", path);
            cJSON_Delete(j);
            j = NULL;
        }
    }
    kb_buf_release(&b);
    return j;
}

/* The text of the file at path (caller frees), or NULL with err set. */
static char *read_text(const char *path, kb_err *err)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_read_file(path, FILE_MAX_BYTES, &b, err);
    char *s = kb_buf_finish(&b, rc);
    if (rc == KB_OK && !s)
        kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return s;
}

/* This machine's device, from kb-verify --device-info --json; NULL (an
 * unknown device) when kb-verify or a GPU is not there, said on stderr. */
static cJSON *local_device(const kb_cli *cli)
{
    kb_verifier_opts vo;
    kb_verifier_opts_init(&vo);
    vo.kb_verify = cli->config->verify;
    vo.timeout_s = DEVICE_INFO_TIMEOUT_S;
    kb_verifier *v = NULL;
    cJSON *d = NULL;
    kb_err err;
    kb_err_clear(&err);
    if (kb_verifier_open(&vo, &v, &err) == KB_OK &&
        kb_verifier_device_info(v, &d, &err) != KB_OK)
        kb_log_info("kb prompt: %s: the prompt names no device (--device-info FILE "
                    "gives one)", err.msg);
    kb_verifier_free(v);
    return d;
}

static const kb_option prompt_options[] = {
    { "budget-tokens", KB_OPT_LONG('b'), "N", "the whole prompt within about N tokens (1000-200000;\n"
      "default 12000): retrieved passages are cut first" },
    { "device-info", KB_OPT_LONG('d'), "FILE", "the device (kb-verify --device-info --json); default:\n"
      "ask kb-verify, else the device is unknown" },
    { "tasks", KB_OPT_LONG('t'), "DIR", "where TASK is (default: where kb verify finds tasks)" },
    { "feedback", KB_OPT_LONG('f'), "FILE", "the last attempts' verdicts, as text" },
    { "parent", KB_OPT_LONG('p'), "FILE", "a kernel to refine" },
    { "json", KB_OPT_LONG('j'), NULL, "one object: system, user, tokens, hash, cites" },
    { NULL, 0, NULL, NULL },
};

static int cmd_prompt(int argc, char **argv, const kb_cli *cli, const kb_command *self);

const kb_command kb_cmd_prompt = {
    .name = "prompt",
    .fn = cmd_prompt,
    .usage = "kb prompt [options] TASK",
    .summary = "print the generator's prompt for a task, for an agent that writes the kernel",
    .options = prompt_options,
    .operands = "task",
};

static int cmd_prompt(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *device_file = NULL, *feedback_file = NULL, *parent_file = NULL;
    kb_gen_prompt_opts o = { .config = cli->config };
    int json = 0, c;
    long budget = 0;
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    while ((c = kb_getopt_next(&g)) > 0) {
        switch (c) {
        case KB_OPT_LONG('b'):
            if (kb_parse_long(g.arg, 1000, 200000, &budget) != KB_OK)
                return kb_cli_usage_error(self, "--budget-tokens wants a whole number "
                                          "from 1000 to 200000, not '%s'", g.arg);
            break;
        case KB_OPT_LONG('d'): device_file = g.arg; break;
        case KB_OPT_LONG('t'): o.tasks_dir = g.arg; break;
        case KB_OPT_LONG('f'): feedback_file = g.arg; break;
        case KB_OPT_LONG('p'): parent_file = g.arg; break;
        case KB_OPT_LONG('j'): json = 1; break;
        }
    }
    if (c < 0)
        return g.status;
    if (g.ind >= argc)
        return kb_cli_usage_error(self, "need TASK (a task's name, such as gelu)");
    if (g.ind + 1 < argc)
        return kb_cli_usage_error(self, "unexpected argument '%s'", argv[g.ind + 1]);
    o.task = argv[g.ind];
    o.budget_tokens = budget;

    kb_err err;
    kb_err_clear(&err);
    kb_store *store = NULL;
    cJSON *device = NULL;
    char *feedback = NULL, *parent = NULL;
    kb_gen_prompt p;
    memset(&p, 0, sizeof p);
    kb_rc rc = KB_OK;
    /* the task first: a bad name is said before anything runs */
    char *dir = NULL;
    rc = kb_gen_task_dir(cli->config, o.tasks_dir, o.task, &dir, &err);
    free(dir);
    if (rc == KB_OK && feedback_file && !(feedback = read_text(feedback_file, &err)))
        rc = err.rc;
    if (rc == KB_OK && parent_file && !(parent = read_text(parent_file, &err)))
        rc = err.rc;
    if (rc == KB_OK && device_file && !(device = read_object(device_file, &err)))
        rc = err.rc;
    if (rc == KB_OK && !device_file)
        device = local_device(cli);
    if (rc == KB_OK) {
        rc = kb_cli_open_store(cli, KB_STORE_READONLY, &store, &err);
        if (rc == KB_ERR_NOTFOUND) {   /* no KB: a prompt without retrieval */
            kb_log_warn("%s: the prompt carries no retrieved context", err.msg);
            kb_err_clear(&err);
            rc = KB_OK;
        }
    }
    o.store = store;
    o.choose = kb_gen_can_choose(cli->config);   /* as round 1 does */
    o.device = device;
    o.feedback = feedback;
    o.parent = parent;
    double t0 = kb_now_ms();
    if (rc == KB_OK)
        rc = kb_gen_prompt_build(&o, &p, &err);
    if (rc == KB_OK && json) {
        cJSON *j = NULL;
        rc = kb_gen_prompt_json(&p, &j, &err);
        if (rc == KB_OK)
            rc = kb_cli_print_json(j, &err);
    } else if (rc == KB_OK) {
        printf("=== system ===\n%s\n\n=== user ===\n%s", p.system, p.user);
        if (fflush(stdout) != 0)
            rc = kb_err_set(&err, KB_ERR_IO, "cannot write to stdout");
    }
    if (rc == KB_OK && cli->progress)
        fprintf(stderr, "kb prompt: %s, %ld tokens (budget %ld), %zu passages cited, "
                "sha256 %.16s, %.0f ms\n", o.task, p.tokens, budget ? budget : KB_GEN_BUDGET_DEFAULT,
                p.ncites, p.hash, kb_now_ms() - t0);
    kb_gen_prompt_release(&p);
    kb_store_close(store);
    cJSON_Delete(device);
    free(feedback);
    free(parent);
    return rc == KB_OK ? 0 : kb_cli_fail(&err);
}
