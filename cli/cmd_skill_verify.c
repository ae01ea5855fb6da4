/* cmd_skill_verify.c - kb skill verify: kb-verify run on each skill's
 * kernel.cu (or a result made elsewhere imported), the record appended to
 * its evidence, kb-status and kb-speedup set (skills/skill.h,
 * kb_skill_verify). The rest of kb skill is cmd_skill.c's. */
#include "cli/cli.h"
#include "skills/skill.h"
#include "verify/verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static cJSON *read_json_file(const char *path, kb_err *err)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    cJSON *j = NULL;
    if (kb_read_file(path, 1u << 20, &b, err) == KB_OK &&
        !(j = cJSON_ParseWithOpts(b.data ? b.data : "", NULL, 1)))
        kb_err_set(err, KB_ERR_PARSE, "'%s' is not JSON", path);
    else if (j && !cJSON_IsObject(j)) {
        kb_err_set(err, KB_ERR_PARSE, "'%s' is not a JSON object", path);
        cJSON_Delete(j);
        j = NULL;
    }
    kb_buf_release(&b);
    return j;
}

/* One skill verified; its line printed (or added to arr). Returns the rc. */
static kb_rc verify_entry(kb_skill_entry *e, const kb_skill_verify_opts *o, cJSON *arr,
                          int *verified)
{
    kb_buf what, verdict;
    kb_buf_init(&what, 0);
    kb_buf_init(&verdict, 0);
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = kb_skill_verify(e, o, &what, &verdict, &err);
    kb_skill_status st = e->ok ? kb_skill_status_of(&e->skill) : KB_SKILL_DRAFT;
    *verified = rc == KB_OK && (st == KB_SKILL_VERIFIED || st == KB_SKILL_APPROVED);
    if (arr) {
        cJSON *x = cJSON_CreateObject();
        if (x && cJSON_AddItemToArray(arr, x)) {
            cJSON_AddStringToObject(x, "name", cmd_skill_name(e));
            cJSON_AddStringToObject(x, "status", kb_skill_status_name(st));
            cJSON_AddStringToObject(x, "verdict", verdict.data ? verdict.data : "");
            cJSON_AddStringToObject(x, rc == KB_OK ? "change" : "error",
                                    rc == KB_OK ? (what.data ? what.data : "") : err.msg);
            const char *sp = cmd_skill_meta(e, "kb-speedup", NULL);
            int ok = 1;
            if (sp)
                cmd_skill_put_speedup(x, sp, &ok);
        }
    } else if (rc == KB_OK) {
        printf("%s: %s\n", cmd_skill_name(e), what.data ? what.data : "");
    } else {
        kb_cli_errorf("%s", err.msg);
    }
    kb_buf_release(&what);
    kb_buf_release(&verdict);
    return rc;
}

int cmd_skill_verify(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *dir = NULL, *tasks = NULL, *timeout = NULL;
    const char *from = NULL, *device = NULL;
    int json = 0, all = 0;
    const cmd_skill_opt opts[] = {
        { "dir", &dir, NULL }, { "tasks", &tasks, NULL }, { "json", NULL, &json },
        { "all", NULL, &all }, { "timeout", &timeout, NULL }, { "from-result", &from, NULL },
        { "device-info", &device, NULL }, { NULL, NULL, NULL }
    };
    cmd_skill_run r;
    int status = cmd_skill_begin(self, cli, argc, argv, opts, &r);
    if (status >= 0)
        return status;
    status = 0;
    if (all == (r.npos > 0))
        return kb_cli_usage_error(self, "need NAME... or --all");
    if (device && !from)
        return kb_cli_usage_error(self, "--device-info goes with --from-result");
    kb_verifier_opts vo;
    kb_verifier_opts_init(&vo);
    vo.kb_verify = cli->config->verify;
    /* a receipt records how far its baseline moves across processes: three
     * short baseline-only processes after each timed verification */
    vo.spread = 3;
    vo.queue = cli->config->queue;   /* KB_QUEUE */
    long secs;
    if (timeout) {
        if (kb_parse_long(timeout, 1, 86400, &secs) != KB_OK)
            return kb_cli_usage_error(self, "bad --timeout '%s'", timeout);
        vo.timeout_s = (double)secs;
    }
    kb_skill_verify_opts go = { .tasks_dir = tasks, .from_result = from, .lib = &r.lib };
    cJSON *dev = NULL, *root = NULL, *arr = NULL;
    kb_rc rc = kb_skill_lib_load(dir, &r.lib, &r.d, &r.err);
    if (rc == KB_OK && device && !(dev = read_json_file(device, &r.err)))
        rc = r.err.rc;
    go.device = dev;
    if (rc == KB_OK && !from)
        rc = kb_verifier_open(&vo, &go.verifier, &r.err);
    if (rc == KB_OK && json &&
        (!(root = cJSON_CreateObject()) || !(arr = cJSON_AddArrayToObject(root, "skills"))))
        rc = kb_err_set(&r.err, KB_ERR_NOMEM, "out of memory");
    /* the entries first: a name that is none stops before anything runs */
    size_t n = all ? r.lib.n : (size_t)r.npos;
    kb_skill_entry **todo = calloc(n ? n : 1, sizeof *todo);
    if (rc == KB_OK && !todo)
        rc = kb_err_set(&r.err, KB_ERR_NOMEM, "out of memory");
    size_t m = 0;
    for (size_t i = 0; rc == KB_OK && i < n; i++) {
        kb_skill_entry *e = all ? &r.lib.items[i] : cmd_skill_find(&r.lib, r.pos[i], &r.d, &r.err);
        if (!e)
            rc = r.err.rc;
        else if (!all || (e->ok && kb_skill_status_of(&e->skill) != KB_SKILL_RETIRED))
            todo[m++] = e;
    }
    if (rc != KB_OK) {
        status = kb_cli_fail(&r.err);
        goto out;
    }
    size_t nfail = 0, nnot = 0;
    kb_rc last = KB_OK;
    for (size_t i = 0; i < m; i++) {
        int ok = 0;
        kb_rc vr = verify_entry(todo[i], &go, arr, &ok);
        if (vr != KB_OK) {
            nfail++;
            last = vr;
        } else if (!ok) {
            nnot++;
        }
    }
    if (json)
        status = cmd_skill_print_json(root), root = NULL;
    if (!status) {
        if (m == 1 && nfail)
            status = last == KB_ERR_GPU ? 4 : kb_rc_exit_status(last);
        else if (nfail && nfail + nnot < m)
            status = 3;
        else if (nfail || nnot)
            status = 1;
    }
out:
    cJSON_Delete(root);
    cJSON_Delete(dev);
    free(todo);
    kb_verifier_free(go.verifier);
    cmd_skill_end(&r);
    return status;
}
