/* cmd_skill_new.c - kb skill new: a draft skill for a task, with the
 * sections to fill (skills/skill.h). The rest of kb skill is
 * cmd_skill.c's. */
#include "cli/cli.h"
#include "skills/skill.h"
#include "verify/verify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KERNEL_MAX_BYTES (1u << 20)

static const char new_body[] =
    "\n# %s\n\n"
    "## When to apply\n\n"
    "TODO: the bottleneck that calls for it (what the profiler shows, the access\n"
    "pattern, the shapes), the key case first.\n\n"
    "## Technique\n\n"
    "TODO: what kernel.cu does, step by step, citing the guide sections it rests on\n"
    "with deep links (find them with `kb query`).\n\n"
    "## Pitfalls\n\n"
    "TODO: what goes wrong: correctness, occupancy, shapes that are no multiple of\n"
    "the tile.\n\n"
    "## Evidence\n\n"
    "`kb skill verify %s` runs kb-verify on kernel.cu and records the result in\n"
    "evidence.json.\n";

/* A new draft in dir/name for task t, its kernel from from (may be NULL). */
static kb_rc make_draft(const char *dir, const char *name, const kb_task *t,
                        const char *from, const char *author, const char *desc,
                        char **out_dir, kb_err *err)
{
    kb_skill s;
    kb_skill_init(&s);
    kb_buf body, kernel;
    kb_buf_init(&body, 0);
    kb_buf_init(&kernel, 0);
    kb_buf tmp;
    kb_buf_init(&tmp, 0);
    char *sdir = kb_path_join(dir, name), *cu = NULL;
    struct stat st;
    kb_rc rc = sdir ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && lstat(sdir, &st) == 0)
        rc = kb_err_set(err, KB_ERR_IO, "'%s' already exists", sdir);
    if (rc == KB_OK && from)
        rc = kb_read_file(from, KERNEL_MAX_BYTES, &kernel, err);
    if (rc == KB_OK) {
        kb_rc r = kb_skill_set_field(&s, KB_SKILL_NAME, name);
        if (r == KB_OK)
            r = kb_skill_set_field(&s, KB_SKILL_DESCRIPTION,
                                   desc ? desc : "TODO: what the technique does and when "
                                   "to use it, the key use first.");
        if (r == KB_OK)
            r = kb_skill_set(&s, "kb-status", "draft");
        if (r == KB_OK)
            r = kb_skill_set(&s, "kb-task", t->name);
        if (r == KB_OK && t->ops && *t->ops)
            r = kb_skill_set(&s, "kb-ops", t->ops);
        if (r == KB_OK)
            r = kb_skill_set(&s, "kb-dtype", kb_dtype_name(t->dtype));
        if (r == KB_OK && author)
            r = kb_skill_set(&s, "kb-author", author);
        if (r == KB_OK)
            r = kb_buf_printf(&body, new_body, name, name);
        if (r == KB_OK)
            r = kb_skill_set_body(&s, body.data);
        if (r != KB_OK)
            rc = kb_err_set(err, r, "out of memory");
    }
    /* built whole in a hidden temp folder and renamed into place: a kill
     * leaves the library as it was (the temp folder swept next time),
     * never a half-made draft that blocks making it again */
    if (rc == KB_OK && (rc = kb_mkdirs(dir, err)) == KB_OK) {
        kb_sweep_temp(dir);
        rc = kb_temp_dir(sdir, &tmp, err);
    }
    if (rc == KB_OK && (!(s.path = kb_path_join(tmp.data, "SKILL.md")) ||
                        !(cu = kb_path_join(tmp.data, "kernel.cu"))))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && from)
        rc = kb_write_file_atomic(cu, kernel.data ? kernel.data : "", kernel.len, err);
    if (rc == KB_OK)
        rc = kb_skill_save(&s, err);
    if (rc == KB_OK && kb_rename_noreplace(tmp.data, sdir) != 0)
        rc = errno == EEXIST || errno == ENOTEMPTY
             ? kb_err_set(err, KB_ERR_IO, "'%s' already exists", sdir)
             : kb_err_set(err, KB_ERR_IO, "cannot put '%s' in place: %s", sdir,
                          strerror(errno));
    if (rc != KB_OK && tmp.len)
        kb_rmtree(tmp.data);
    if (rc == KB_OK) {
        *out_dir = sdir;
        sdir = NULL;
    }
    kb_buf_release(&tmp);
    free(sdir);
    free(cu);
    kb_buf_release(&body);
    kb_buf_release(&kernel);
    kb_skill_release(&s);
    return rc;
}

int cmd_skill_new(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *dir = NULL, *tasks = NULL, *task = NULL, *from = NULL;
    const char *author = NULL, *desc = NULL;
    int json = 0;
    const cmd_skill_opt opts[] = {
        { "dir", &dir, NULL }, { "tasks", &tasks, NULL }, { "task", &task, NULL },
        { "from", &from, NULL }, { "author", &author, NULL }, { "description", &desc, NULL },
        { "json", NULL, &json }, { NULL, NULL, NULL }
    };
    cmd_skill_run r;
    int status = cmd_skill_begin(self, cli, argc, argv, opts, &r);
    if (status >= 0)
        return status;
    status = 0;
    if (r.npos != 1)
        return kb_cli_usage_error(self, "need one NAME");
    if (!task)
        return kb_cli_usage_error(self, "need --task TASK (a task of '%s')", tasks);
    const char *name = r.pos[0];
    if (!kb_skill_name_ok(name))
        return kb_cli_usage_error(self, "'%s' is no skill name (1-64 characters of "
                                  "a-z, 0-9 and '-', no leading, trailing or doubled '-')",
                                  name);
    char *tdir = kb_path_join(tasks, task), *sdir = NULL;
    kb_task *t = NULL;
    char *tjson = tdir ? kb_path_join(tdir, "task.json") : NULL;
    kb_rc rc = tjson ? KB_OK : kb_err_set(&r.err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && access(tjson, R_OK) != 0)
        rc = kb_err_set(&r.err, KB_ERR_NOTFOUND, "no task '%s' in '%s' (cannot open '%s': "
                        "%s)", task, tasks, tjson, strerror(errno));
    free(tjson);
    if (rc == KB_OK)
        rc = kb_task_load(tdir, &t, &r.err);
    if (rc == KB_OK)
        rc = make_draft(dir, name, t, from, author, desc, &sdir, &r.err);
    if (rc != KB_OK) {
        status = kb_cli_fail(&r.err);
    } else if (json) {
        cJSON *o = cJSON_CreateObject();
        if (o && (!cJSON_AddStringToObject(o, "name", name) ||
                  !cJSON_AddStringToObject(o, "path", sdir) ||
                  !cJSON_AddStringToObject(o, "status", "draft") ||
                  !cJSON_AddStringToObject(o, "task", task) ||
                  !cJSON_AddBoolToObject(o, "kernel", from != NULL))) {
            cJSON_Delete(o);
            o = NULL;
        }
        status = cmd_skill_print_json(o);
    } else {
        printf("%s: a draft in %s for task '%s'%s\n", name, sdir, task,
               from ? ", kernel.cu from the file given" : " (add its kernel.cu)");
        /* a library named by --dir is named again: verify finds NAME there */
        if (!cli->quiet)
            fprintf(stderr, "next: fill in SKILL.md, then 'kb skill lint %s' and "
                    "'kb skill verify%s%s %s'\n", sdir, r.found[0] ? "" : " --dir ",
                    r.found[0] ? "" : dir, name);
    }
    kb_task_free(t);
    free(tdir);
    free(sdir);
    return status;
}
