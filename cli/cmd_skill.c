/* cmd_skill.c - kb skill: the skill library's commands (lint, new, verify,
 * approve, retire, list, show, export). The model, the evidence and the
 * lifecycle are skills/'s; verifying runs kb-verify through
 * skills/skill.h. */
#include "cli/cli.h"
#include "generator/gen.h"
#include "skills/skill.h"
#include "verify/verify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_DIR "corpus/skills"
#define DEFAULT_TASKS "corpus/tasks"
#define KERNEL_MAX_BYTES (1u << 20)

/* ------------------------------------------------------------------ options */

/* Where a subcommand's option goes, by its long name (the option itself
 * is in the subcommand's table): --name VALUE into *str, --name into *flag. */
typedef struct {
    const char *name;
    const char **str;
    int *flag;
} sub_opt;

typedef struct {
    const char **pos;          /* the operands */
    int npos;
} sub_args;

/* Parses argv (argv[0] is the subcommand) with self's option table, into
 * opts' places. Returns -1 to go on, or the exit status to stop with (a
 * usage error reported, --help printed). */
static int parse_sub(const kb_command *self, int argc, char **argv, const sub_opt *opts,
                     sub_args *a)
{
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    int c;
    while ((c = kb_getopt_next(&g)) > 0) {
        const kb_option *o = self->options;
        while (o->name && o->key != c)
            o++;
        for (const sub_opt *b = opts; b->name; b++) {
            if (strcmp(b->name, o->name) != 0)
                continue;
            if (b->flag)
                *b->flag = 1;
            else
                *b->str = g.arg;
        }
    }
    if (c < 0)
        return g.status;
    a->npos = 0;
    for (int i = g.ind; i < argc; i++)
        a->pos[a->npos++] = argv[i];
    return -1;
}

/* ------------------------------------------------------------------ output */

static void print_diags(const kb_skill_diags *d)
{
    for (size_t i = 0; i < d->n; i++) {
        const kb_skill_diag *x = &d->items[i];
        const char *sev = x->severity == KB_SKILL_ERROR ? "error" : "warning";
        if (x->line > 0)
            fprintf(stderr, "%s:%d: %s: %s (%s)\n", x->file, x->line, sev, x->msg, x->rule);
        else
            fprintf(stderr, "%s: %s: %s (%s)\n", x->file, sev, x->msg, x->rule);
    }
}

static cJSON *diags_json(const kb_skill_diags *d)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < d->n; i++) {
        const kb_skill_diag *x = &d->items[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(a, o) ||
            !cJSON_AddStringToObject(o, "file", x->file) ||
            !cJSON_AddNumberToObject(o, "line", x->line) ||
            !cJSON_AddStringToObject(o, "severity",
                                     x->severity == KB_SKILL_ERROR ? "error" : "warning") ||
            !cJSON_AddStringToObject(o, "rule", x->rule) ||
            !cJSON_AddStringToObject(o, "message", x->msg)) {
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

static int print_json(cJSON *root)
{
    kb_err err;
    kb_err_clear(&err);
    return kb_cli_print_json(root, &err) == KB_OK ? 0 : kb_cli_fail(&err);
}

static const char *sname(const kb_skill_entry *e)
{
    return e->ok && e->skill.fields[KB_SKILL_NAME] ? e->skill.fields[KB_SKILL_NAME] : e->dir;
}

static const char *meta_or(const kb_skill_entry *e, const char *key, const char *dflt)
{
    const char *v = e->ok ? kb_skill_get(&e->skill, key) : NULL;
    return v ? v : dflt;
}

/* ------------------------------------------------------------------ the library */

/* The library of dir, or the skills and libraries that paths name (a skill
 * folder or its SKILL.md, a folder of skills, or a skill of dir by name).
 * Findings of loading go to d. */
static kb_rc load(kb_skill_lib *lib, const char *dir, const char **paths, int n,
                  kb_skill_diags *d, kb_err *err)
{
    kb_skill_lib_init(lib);
    if (n == 0)
        return kb_skill_lib_load(dir, lib, d, err);
    kb_rc rc = KB_OK;
    if (!(lib->dir = kb_strdup(dir)))
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n && rc == KB_OK; i++) {
        char *md = kb_path_join(paths[i], "SKILL.md");
        char *named = strchr(paths[i], '/') ? NULL : kb_path_join(dir, paths[i]);
        char *named_md = named ? kb_path_join(named, "SKILL.md") : NULL;
        struct stat st;
        size_t len = strlen(paths[i]);
        int is_skill = (md && stat(md, &st) == 0) ||
                       (len >= 8 && strcmp(paths[i] + len - 8, "SKILL.md") == 0);
        if (!md)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        else if (is_skill)
            rc = kb_skill_lib_add(lib, paths[i], d, err);
        else if (named_md && stat(named_md, &st) == 0)
            rc = kb_skill_lib_add(lib, named, d, err);
        else if (stat(paths[i], &st) == 0 && S_ISDIR(st.st_mode))
            rc = kb_skill_lib_load(paths[i], lib, d, err);
        else
            rc = kb_err_set(err, KB_ERR_NOTFOUND, "no skill at '%s' (a folder with a "
                            "SKILL.md, a folder of them, or a skill of '%s')", paths[i], dir);
        free(md);
        free(named);
        free(named_md);
    }
    return rc;
}

/* The entry NAME names: a skill of the library by name, else a path. */
static kb_skill_entry *find(kb_skill_lib *lib, const char *name, kb_skill_diags *d,
                            kb_err *err)
{
    kb_skill_entry *e = kb_skill_lib_find(lib, name);
    if (e)
        return e;
    for (size_t i = 0; i < lib->n; i++)
        if (strcmp(lib->items[i].dir, name) == 0)
            return &lib->items[i];
    if (strchr(name, '/') && kb_skill_lib_add(lib, name, d, err) == KB_OK)
        return &lib->items[lib->n - 1];
    if (!err->rc)
        kb_err_set(err, KB_ERR_NOTFOUND, "no skill '%s' in '%s'", name,
                   lib->dir ? lib->dir : DEFAULT_DIR);
    return NULL;
}

/* The entry NAME names, parsed: else the exit status, reported. */
static kb_skill_entry *find_ok(kb_skill_lib *lib, const char *name, kb_skill_diags *d,
                               int *status)
{
    kb_err err;
    kb_err_clear(&err);
    kb_skill_entry *e = find(lib, name, d, &err);
    if (e && !e->ok) {
        print_diags(d);
        kb_err_set(&err, KB_ERR_PARSE, "'%s' does not parse (above)", name);
        e = NULL;
    }
    if (!e)
        *status = kb_cli_fail(&err);
    return e;
}

/* ------------------------------------------------------------------ lint */

/* The per-skill checks of lint beyond the model: the task, the evidence,
 * the compile (through v, when kb-verify is there), the links (store may
 * be NULL). */
static kb_rc lint_entry(const kb_skill_entry *e, const char *tasks, kb_verifier *v,
                        int *compile_ok, kb_store *store, kb_skill_diags *d, kb_err *err)
{
    kb_rc rc = kb_skill_check(&e->skill, d);
    if (rc == KB_OK)
        rc = kb_gen_skill_check_task(e, tasks, d);
    if (rc == KB_OK)
        rc = kb_skill_check_evidence(&e->skill, &e->evidence,
                                     *e->kernel_sha256 ? e->kernel_sha256 : NULL, d);
    if (rc != KB_OK)
        return kb_err_set(err, rc, "out of memory");
    if (v && *compile_ok) {
        kb_err cerr;
        kb_err_clear(&cerr);
        rc = kb_gen_skill_check_compile(e, tasks, v, d, &cerr);
        if (rc == KB_ERR_NOTFOUND)
            *compile_ok = 0, rc = KB_OK;
        else if (rc != KB_OK)
            return kb_err_set(err, rc, "%s", cerr.msg);
    }
    if (store)
        rc = kb_gen_skill_check_links(e, store, d, err);
    return rc;
}

static int sub_lint(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *dir = DEFAULT_DIR, *tasks = DEFAULT_TASKS;
    int json = 0, no_compile = 0, strict = 0;
    const sub_opt opts[] = {
        { "dir", &dir, NULL }, { "tasks", &tasks, NULL }, { "json", NULL, &json },
        { "no-compile", NULL, &no_compile }, { "strict", NULL, &strict }, { NULL, NULL, NULL }
    };
    const char *pos[argc];
    sub_args a = { .pos = pos };
    int status = parse_sub(self, argc, argv, opts, &a);
    if (status >= 0)
        return status;
    status = 0;
    kb_skill_lib lib;
    kb_skill_lib_init(&lib);
    kb_skill_diags d;
    kb_skill_diags_init(&d);
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = load(&lib, dir, a.pos, a.npos, &d, &err);
    kb_verifier *v = NULL;
    kb_store *store = NULL;
    int compile_ok = !no_compile;
    const char *links_note = NULL;
    if (rc == KB_OK && compile_ok) {
        kb_verifier_opts vo;
        kb_verifier_opts_init(&vo);
        vo.kb_verify = cli->config->verify;
        vo.compile_only = 1;
        rc = kb_verifier_open(&vo, &v, &err);
    }
    if (rc == KB_OK) {
        kb_err serr;
        kb_err_clear(&serr);
        if (kb_cli_open_store(cli, KB_STORE_READONLY, &store, &serr) != KB_OK) {
            store = NULL;
            links_note = "links not checked: no KB (ingest the corpus, or --kb DIR)";
        }
    }
    for (size_t i = 0; i < lib.n && rc == KB_OK; i++)
        if (lib.items[i].ok)
            rc = lint_entry(&lib.items[i], tasks, v, &compile_ok, store, &d, &err);
    if (rc == KB_OK && (rc = kb_skill_lib_check(&lib, &d)) != KB_OK)
        rc = kb_err_set(&err, rc, "out of memory");
    if (rc != KB_OK) {
        status = kb_cli_fail(&err);
        goto out;
    }
    kb_skill_diags_sort(&d);
    const char *compile_note = !no_compile && !compile_ok
        ? "kernels not compiled: no kb-verify (build it where a CUDA toolkit is found)"
        : NULL;
    if (json) {
        cJSON *root = cJSON_CreateObject(), *notes = NULL;
        if (!root || !cJSON_AddNumberToObject(root, "skills", (double)lib.n) ||
            !cJSON_AddNumberToObject(root, "errors", (double)d.errors) ||
            !cJSON_AddNumberToObject(root, "warnings", (double)d.warnings) ||
            !cJSON_AddItemToObject(root, "findings", diags_json(&d)) ||
            !(notes = cJSON_AddArrayToObject(root, "notes")) ||
            (links_note && !cJSON_AddItemToArray(notes, cJSON_CreateString(links_note))) ||
            (compile_note && !cJSON_AddItemToArray(notes, cJSON_CreateString(compile_note)))) {
            cJSON_Delete(root);
            root = NULL;
        }
        status = print_json(root);
    } else {
        print_diags(&d);
        if (!cli->quiet) {
            if (links_note)
                fprintf(stderr, "kb skill lint: %s\n", links_note);
            if (compile_note)
                fprintf(stderr, "kb skill lint: %s\n", compile_note);
            fprintf(stderr, "kb skill lint: %zu skill%s, %zu error%s, %zu warning%s\n",
                    lib.n, lib.n == 1 ? "" : "s", d.errors, d.errors == 1 ? "" : "s",
                    d.warnings, d.warnings == 1 ? "" : "s");
        }
    }
    if (!status && (d.errors || (strict && d.warnings)))
        status = 1;
out:
    kb_store_close(store);
    kb_verifier_free(v);
    kb_skill_diags_release(&d);
    kb_skill_lib_release(&lib);
    return status;
}

/* ------------------------------------------------------------------ new */

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
    char *sdir = kb_path_join(dir, name);
    char *cu = sdir ? kb_path_join(sdir, "kernel.cu") : NULL;
    struct stat st;
    kb_rc rc = cu ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && stat(sdir, &st) == 0)
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
        if (r == KB_OK && !(s.path = kb_path_join(sdir, "SKILL.md")))
            r = KB_ERR_NOMEM;
        if (r != KB_OK)
            rc = kb_err_set(err, r, "out of memory");
    }
    if (rc == KB_OK)
        rc = kb_mkdirs(sdir, err);
    if (rc == KB_OK && from)
        rc = kb_write_file_atomic(cu, kernel.data ? kernel.data : "", kernel.len, err);
    if (rc == KB_OK)
        rc = kb_skill_save(&s, err);
    if (rc == KB_OK) {
        *out_dir = sdir;
        sdir = NULL;
    }
    free(sdir);
    free(cu);
    kb_buf_release(&body);
    kb_buf_release(&kernel);
    kb_skill_release(&s);
    return rc;
}

static int sub_new(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *dir = DEFAULT_DIR, *tasks = DEFAULT_TASKS, *task = NULL, *from = NULL;
    const char *author = NULL, *desc = NULL;
    int json = 0;
    const sub_opt opts[] = {
        { "dir", &dir, NULL }, { "tasks", &tasks, NULL }, { "task", &task, NULL },
        { "from", &from, NULL }, { "author", &author, NULL }, { "description", &desc, NULL },
        { "json", NULL, &json }, { NULL, NULL, NULL }
    };
    const char *pos[argc];
    sub_args a = { .pos = pos };
    int status = parse_sub(self, argc, argv, opts, &a);
    if (status >= 0)
        return status;
    status = 0;
    if (a.npos != 1)
        return kb_cli_usage_error(self, "need one NAME");
    if (!task)
        return kb_cli_usage_error(self, "need --task TASK (a task of '%s')", tasks);
    const char *name = a.pos[0];
    if (!kb_skill_name_ok(name))
        return kb_cli_usage_error(self, "'%s' is no skill name (1-64 characters of "
                                  "a-z, 0-9 and '-', no leading, trailing or doubled '-')",
                                  name);
    kb_err err;
    kb_err_clear(&err);
    char *tdir = kb_path_join(tasks, task), *sdir = NULL;
    kb_task *t = NULL;
    char *tjson = tdir ? kb_path_join(tdir, "task.json") : NULL;
    kb_rc rc = tjson ? KB_OK : kb_err_set(&err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && access(tjson, R_OK) != 0)
        rc = kb_err_set(&err, KB_ERR_NOTFOUND, "no task '%s' in '%s' (cannot open '%s': "
                        "%s)", task, tasks, tjson, strerror(errno));
    free(tjson);
    if (rc == KB_OK)
        rc = kb_task_load(tdir, &t, &err);
    if (rc == KB_OK)
        rc = make_draft(dir, name, t, from, author, desc, &sdir, &err);
    if (rc != KB_OK) {
        status = kb_cli_fail(&err);
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
        status = print_json(o);
    } else {
        printf("%s: a draft in %s for task '%s'%s\n", name, sdir, task,
               from ? ", kernel.cu from the file given" : " (add its kernel.cu)");
        if (!cli->quiet)
            fprintf(stderr, "next: fill in SKILL.md, then 'kb skill lint %s' and "
                    "'kb skill verify %s'\n", sdir, name);
    }
    kb_task_free(t);
    free(tdir);
    free(sdir);
    return status;
}

/* ------------------------------------------------------------------ verify */

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
static kb_rc verify_entry(kb_skill_entry *e, const kb_gen_skill_opts *o, cJSON *arr,
                          int *verified)
{
    kb_buf what, verdict;
    kb_buf_init(&what, 0);
    kb_buf_init(&verdict, 0);
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = kb_gen_skill_verify(e, o, &what, &verdict, &err);
    kb_skill_status st = e->ok ? kb_skill_status_of(&e->skill) : KB_SKILL_DRAFT;
    *verified = rc == KB_OK && (st == KB_SKILL_VERIFIED || st == KB_SKILL_APPROVED);
    if (arr) {
        cJSON *x = cJSON_CreateObject();
        if (x && cJSON_AddItemToArray(arr, x)) {
            cJSON_AddStringToObject(x, "name", sname(e));
            cJSON_AddStringToObject(x, "status", kb_skill_status_name(st));
            cJSON_AddStringToObject(x, "verdict", verdict.data ? verdict.data : "");
            cJSON_AddStringToObject(x, rc == KB_OK ? "change" : "error",
                                    rc == KB_OK ? (what.data ? what.data : "") : err.msg);
            const char *sp = meta_or(e, "kb-speedup", NULL);
            if (sp)
                cJSON_AddStringToObject(x, "speedup", sp);
        }
    } else if (rc == KB_OK) {
        printf("%s: %s\n", sname(e), what.data ? what.data : "");
    } else {
        fprintf(stderr, "kb: %s\n", err.msg);
    }
    kb_buf_release(&what);
    kb_buf_release(&verdict);
    return rc;
}

static int sub_verify(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *dir = DEFAULT_DIR, *tasks = DEFAULT_TASKS, *timeout = NULL;
    const char *from = NULL, *device = NULL;
    int json = 0, all = 0;
    const sub_opt opts[] = {
        { "dir", &dir, NULL }, { "tasks", &tasks, NULL }, { "json", NULL, &json },
        { "all", NULL, &all }, { "timeout", &timeout, NULL }, { "from-result", &from, NULL },
        { "device-info", &device, NULL }, { NULL, NULL, NULL }
    };
    const char *pos[argc];
    sub_args a = { .pos = pos };
    int status = parse_sub(self, argc, argv, opts, &a);
    if (status >= 0)
        return status;
    status = 0;
    if (all == (a.npos > 0))
        return kb_cli_usage_error(self, "need NAME... or --all");
    if (device && !from)
        return kb_cli_usage_error(self, "--device-info goes with --from-result");
    kb_verifier_opts vo;
    kb_verifier_opts_init(&vo);
    vo.kb_verify = cli->config->verify;
    long secs;
    if (timeout) {
        if (kb_parse_long(timeout, 1, 86400, &secs) != KB_OK)
            return kb_cli_usage_error(self, "bad --timeout '%s'", timeout);
        vo.timeout_s = (double)secs;
    }
    kb_skill_lib lib;
    kb_skill_lib_init(&lib);
    kb_skill_diags d;
    kb_skill_diags_init(&d);
    kb_err err;
    kb_err_clear(&err);
    kb_gen_skill_opts go = { .tasks_dir = tasks, .from_result = from };
    cJSON *dev = NULL, *root = NULL, *arr = NULL;
    kb_rc rc = kb_skill_lib_load(dir, &lib, &d, &err);
    if (rc == KB_OK && device && !(dev = read_json_file(device, &err)))
        rc = err.rc;
    go.device = dev;
    if (rc == KB_OK && !from)
        rc = kb_verifier_open(&vo, &go.verifier, &err);
    if (rc == KB_OK && json &&
        (!(root = cJSON_CreateObject()) || !(arr = cJSON_AddArrayToObject(root, "skills"))))
        rc = kb_err_set(&err, KB_ERR_NOMEM, "out of memory");
    /* the entries first: a name that is none stops before anything runs */
    size_t n = all ? lib.n : (size_t)a.npos;
    kb_skill_entry **todo = calloc(n ? n : 1, sizeof *todo);
    if (rc == KB_OK && !todo)
        rc = kb_err_set(&err, KB_ERR_NOMEM, "out of memory");
    size_t m = 0;
    for (size_t i = 0; rc == KB_OK && i < n; i++) {
        kb_skill_entry *e = all ? &lib.items[i] : find(&lib, a.pos[i], &d, &err);
        if (!e)
            rc = err.rc;
        else if (!all || (e->ok && kb_skill_status_of(&e->skill) != KB_SKILL_RETIRED))
            todo[m++] = e;
    }
    if (rc != KB_OK) {
        status = kb_cli_fail(&err);
        goto out;
    }
    size_t nfail = 0, nnot = 0;
    kb_rc last = KB_OK;
    for (size_t i = 0; i < m; i++) {
        int ok = 0;
        kb_rc r = verify_entry(todo[i], &go, arr, &ok);
        if (r != KB_OK) {
            nfail++;
            last = r;
        } else if (!ok) {
            nnot++;
        }
    }
    if (json)
        status = print_json(root), root = NULL;
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
    kb_skill_diags_release(&d);
    kb_skill_lib_release(&lib);
    return status;
}

/* ------------------------------------------------------------------ approve, retire */

/* Loads the one skill of a NAME argument; the caller releases lib and d. */
static kb_skill_entry *one_skill(const kb_command *self, const sub_args *a, const char *dir,
                                 kb_skill_lib *lib, kb_skill_diags *d, int *status)
{
    kb_skill_lib_init(lib);
    if (a->npos != 1) {
        *status = kb_cli_usage_error(self, "need one NAME");
        return NULL;
    }
    kb_err err;
    kb_err_clear(&err);
    if (kb_skill_lib_load(dir, lib, d, &err) != KB_OK && !strchr(a->pos[0], '/')) {
        *status = kb_cli_fail(&err);
        return NULL;
    }
    return find_ok(lib, a->pos[0], d, status);
}

static int save_entry(kb_skill_entry *e)
{
    kb_err err;
    kb_err_clear(&err);
    return kb_skill_save(&e->skill, &err) == KB_OK ? 0 : kb_cli_fail(&err);
}

/* approve and retire: one skill, the one value the step needs (--reviewer,
 * --reason), the transition, SKILL.md written. */
static int change_one(int argc, char **argv, const kb_command *self, int approve)
{
    const char *dir = DEFAULT_DIR, *value = NULL;
    const char *opt = approve ? "reviewer" : "reason";
    const sub_opt opts[] = {
        { "dir", &dir, NULL }, { opt, &value, NULL }, { NULL, NULL, NULL }
    };
    const char *pos[argc];
    sub_args a = { .pos = pos };
    int status = parse_sub(self, argc, argv, opts, &a);
    if (status >= 0)
        return status;
    status = 0;
    if (!value)
        return kb_cli_usage_error(self, approve ? "need --reviewer WHO (the "
                                  "human step)" : "need --reason TEXT");
    kb_skill_lib lib;
    kb_skill_lib_init(&lib);
    kb_skill_diags d;
    kb_skill_diags_init(&d);
    kb_skill_entry *e = one_skill(self, &a, dir, &lib, &d, &status);
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = !e ? KB_OK
             : approve ? kb_skill_approve(&e->skill, &e->evidence,
                                          *e->kernel_sha256 ? e->kernel_sha256 : NULL,
                                          value, &err)
                       : kb_skill_retire(&e->skill, value, &err);
    if (rc != KB_OK)
        status = kb_cli_fail(&err);
    else if (e && !(status = save_entry(e)) && approve)
        printf("%s: approved by %s (commit SKILL.md to record it in git)\n", sname(e), value);
    else if (e && !status)
        printf("%s: retired (%s); kept in %s\n", sname(e), value, e->dir);
    kb_skill_diags_release(&d);
    kb_skill_lib_release(&lib);
    return status;
}

static int sub_approve(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    (void)cli;
    return change_one(argc, argv, self, 1);
}

static int sub_retire(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    (void)cli;
    return change_one(argc, argv, self, 0);
}

/* ------------------------------------------------------------------ list, show */

/* The names of the skills e dominates (dominated 0) or that dominate it. */
static cJSON *dominance_json(const kb_skill_lib *lib, const kb_skill_entry *e, int dominated)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < lib->n; i++) {
        const kb_skill_entry *o = &lib->items[i];
        int yes = dominated ? kb_skill_dominates(o, e) : kb_skill_dominates(e, o);
        if (yes && !cJSON_AddItemToArray(a, cJSON_CreateString(sname(o)))) {
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

static int add_str(cJSON *o, const char *k, const char *v)
{
    return v ? cJSON_AddStringToObject(o, k, v) != NULL : cJSON_AddNullToObject(o, k) != NULL;
}

/* What list and show say of a skill. */
static cJSON *skill_json(const kb_skill_lib *lib, const kb_skill_entry *e, int full)
{
    cJSON *o = cJSON_CreateObject();
    const kb_skill *s = &e->skill;
    int ok = o && cJSON_AddStringToObject(o, "name", sname(e)) &&
             cJSON_AddStringToObject(o, "path", e->dir) &&
             cJSON_AddBoolToObject(o, "parses", e->ok) &&
             add_str(o, "status", e->ok ? kb_skill_status_name(kb_skill_status_of(s)) : NULL) &&
             add_str(o, "description", e->ok ? s->fields[KB_SKILL_DESCRIPTION] : NULL) &&
             add_str(o, "task", meta_or(e, "kb-task", NULL)) &&
             add_str(o, "speedup", meta_or(e, "kb-speedup", NULL)) &&
             add_str(o, "arch", *kb_skill_entry_arch(e) ? kb_skill_entry_arch(e)
                                                        : meta_or(e, "kb-arch", NULL)) &&
             add_str(o, "dtype", meta_or(e, "kb-dtype", NULL)) &&
             add_str(o, "ops", meta_or(e, "kb-ops", NULL)) &&
             add_str(o, "when_not", meta_or(e, "kb-when-not", NULL)) &&
             cJSON_AddNumberToObject(o, "evidence_records",
                                     (double)kb_skill_evidence_count(&e->evidence)) &&
             cJSON_AddItemToObject(o, "dominates", dominance_json(lib, e, 0)) &&
             cJSON_AddItemToObject(o, "dominated_by", dominance_json(lib, e, 1));
    if (ok && full && e->ok) {
        cJSON *m = cJSON_AddObjectToObject(o, "metadata");
        cJSON *sec = cJSON_AddArrayToObject(o, "sections");
        ok = m && sec && add_str(o, "license", s->fields[KB_SKILL_LICENSE]) &&
             add_str(o, "compatibility", s->fields[KB_SKILL_COMPATIBILITY]) &&
             cJSON_AddStringToObject(o, "kernel_sha256", e->kernel_sha256) &&
             cJSON_AddItemToObject(o, "evidence",
                                   cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(
                                       e->evidence.root, "records"), 1));
        /* each record's hash, what kb-evidence names */
        cJSON *hashes = ok ? cJSON_AddArrayToObject(o, "evidence_sha256") : NULL;
        ok = hashes != NULL;
        for (size_t i = 0; ok && i < kb_skill_evidence_count(&e->evidence); i++) {
            char h[65];
            ok = kb_skill_record_hash(kb_skill_evidence_at(&e->evidence, i), h) == KB_OK &&
                 cJSON_AddItemToArray(hashes, cJSON_CreateString(h));
        }
        for (size_t i = 0; ok && i < s->nmeta; i++)
            ok = cJSON_AddStringToObject(m, s->meta[i].key, s->meta[i].value) != NULL;
        for (size_t i = 0; ok && i < s->nsections; i++)
            ok = cJSON_AddItemToArray(sec, cJSON_CreateString(s->sections[i].title));
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static int sub_list(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *dir = DEFAULT_DIR, *want = NULL, *task = NULL;
    int json = 0, all = 0;
    const sub_opt opts[] = {
        { "dir", &dir, NULL }, { "status", &want, NULL }, { "task", &task, NULL },
        { "all", NULL, &all }, { "json", NULL, &json }, { NULL, NULL, NULL }
    };
    const char *pos[argc];
    sub_args a = { .pos = pos };
    int status = parse_sub(self, argc, argv, opts, &a);
    if (status >= 0)
        return status;
    status = 0;
    kb_skill_status wst = KB_SKILL_DRAFT;
    if (a.npos)
        return kb_cli_usage_error(self, "unexpected argument '%s'", a.pos[0]);
    if (want && kb_skill_status_parse(want, &wst) != 0)
        return kb_cli_usage_error(self, "bad --status '%s' (draft, verified, "
                                  "approved or retired)", want);
    kb_skill_lib lib;
    kb_skill_lib_init(&lib);
    kb_skill_diags d;
    kb_skill_diags_init(&d);
    kb_err err;
    kb_err_clear(&err);
    kb_gen_credit *credit = NULL;
    size_t ncredit = 0;
    if (kb_skill_lib_load(dir, &lib, &d, &err) != KB_OK) {
        status = kb_cli_fail(&err);
        goto out;
    }
    /* credit: how often kb generate's runs (KB/runs) carried each skill in
     * a prompt, and in the winner's */
    char *runs = kb_path_join(cli->kb_dir, "runs");
    kb_rc crc = runs ? kb_gen_credit_load(runs, &credit, &ncredit, &err) : KB_ERR_NOMEM;
    free(runs);
    if (crc != KB_OK) {
        status = kb_cli_fail(&err);
        goto out;
    }
    cJSON *root = json ? cJSON_CreateObject() : NULL;
    cJSON *arr = root ? cJSON_AddArrayToObject(root, "skills") : NULL;
    if (!json)
        printf("%-34s %-9s %-11s %8s %-6s %8s %s\n", "name", "status", "task", "speedup",
               "arch", "used/won", "note");
    size_t shown = 0, hidden = 0;
    for (size_t i = 0; i < lib.n; i++) {
        const kb_skill_entry *e = &lib.items[i];
        kb_skill_status st = e->ok ? kb_skill_status_of(&e->skill) : KB_SKILL_DRAFT;
        const char *t = meta_or(e, "kb-task", "");
        if ((want && (!e->ok || st != wst)) || (task && strcmp(t, task) != 0))
            continue;
        if (!want && !all && st == KB_SKILL_RETIRED) {
            hidden++;
            continue;
        }
        shown++;
        long used = 0, won = 0;
        for (size_t k = 0; k < ncredit; k++)
            if (strcmp(credit[k].skill, sname(e)) == 0)
                used = credit[k].used, won = credit[k].won;
        if (json) {
            cJSON *o = skill_json(&lib, e, 0);
            if (o && (!cJSON_AddNumberToObject(o, "used", (double)used) ||
                      !cJSON_AddNumberToObject(o, "won", (double)won))) {
                cJSON_Delete(o);
                o = NULL;
            }
            if (arr && !cJSON_AddItemToArray(arr, o))
                arr = NULL;
            continue;
        }
        char uw[48];
        snprintf(uw, sizeof uw, "%ld/%ld", used, won);
        const char *arch = kb_skill_entry_arch(e);
        char sp[32] = "-";
        if (meta_or(e, "kb-speedup", NULL))
            snprintf(sp, sizeof sp, "%sx", meta_or(e, "kb-speedup", ""));
        printf("%-34s %-9s %-11s %8s %-6s %8s ", sname(e),
               e->ok ? kb_skill_status_name(st) : "?", *t ? t : "-", sp,
               *arch ? arch : meta_or(e, "kb-arch", "-"), uw);
        const char *sep = "";
        for (size_t j = 0; j < lib.n; j++) {
            if (kb_skill_dominates(&lib.items[j], e))
                printf("%sdominated by %s", sep, sname(&lib.items[j])), sep = "; ";
            if (kb_skill_dominates(e, &lib.items[j]))
                printf("%sdominates %s", sep, sname(&lib.items[j])), sep = "; ";
        }
        if (!e->ok)
            printf("%sdoes not parse: kb skill lint %s", sep, e->dir);
        else if (st == KB_SKILL_RETIRED)
            printf("%sretired: %s", sep, meta_or(e, "kb-retired", "no reason recorded"));
        putchar('\n');
    }
    if (json) {
        if (!arr || !cJSON_AddNumberToObject(root, "hidden_retired", (double)hidden)) {
            cJSON_Delete(root);
            root = NULL;
        }
        status = print_json(root);
    } else if (!cli->quiet) {
        fprintf(stderr, "%zu skill%s", shown, shown == 1 ? "" : "s");
        if (hidden)
            fprintf(stderr, " (%zu retired not shown: --all)", hidden);
        fputc('\n', stderr);
    }
out:
    kb_gen_credit_free(credit, ncredit);
    kb_skill_diags_release(&d);
    kb_skill_lib_release(&lib);
    return status;
}

static void show_record(const cJSON *r)
{
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(r, "device");
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(r, "speedup");
    printf("  %s  %-10s on %s (%s)", kb_skill_record_str(r, "date"),
           kb_skill_record_str(r, "verdict"), kb_skill_record_str(dev, "name"),
           kb_skill_record_str(dev, "arch"));
    if (cJSON_IsNumber(sp))
        printf(", %.2fx %s", sp->valuedouble, kb_skill_record_str(r, "baseline"));
    printf(", kernel %.12s\n", kb_skill_record_str(r, "kernel_sha256"));
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(r, "timings")) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(t, "candidate_ms");
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(t, "baseline_ms");
#define MS(o, k) (cJSON_GetObjectItemCaseSensitive(o, k) ? \
                  cJSON_GetObjectItemCaseSensitive(o, k)->valuedouble : 0)
        printf("      %s: %.4f ms [%.4f, %.4f] against %.4f ms [%.4f, %.4f]\n",
               kb_skill_record_str(t, "shape"), MS(c, "median"), MS(c, "ci95_lo"),
               MS(c, "ci95_hi"), MS(b, "median"), MS(b, "ci95_lo"), MS(b, "ci95_hi"));
#undef MS
    }
}

static int sub_show(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *dir = DEFAULT_DIR;
    int json = 0;
    const sub_opt opts[] = {
        { "dir", &dir, NULL }, { "json", NULL, &json }, { NULL, NULL, NULL }
    };
    const char *pos[argc];
    sub_args a = { .pos = pos };
    int status = parse_sub(self, argc, argv, opts, &a);
    if (status >= 0)
        return status;
    status = 0;
    kb_skill_lib lib;
    kb_skill_lib_init(&lib);
    kb_skill_diags d;
    kb_skill_diags_init(&d);
    kb_skill_entry *e = one_skill(self, &a, dir, &lib, &d, &status);
    if (e && json) {
        status = print_json(skill_json(&lib, e, 1));
    } else if (e) {
        const kb_skill *s = &e->skill;
        printf("%s  (%s)\n%s\n\n", sname(e), kb_skill_status_name(kb_skill_status_of(s)),
               s->fields[KB_SKILL_DESCRIPTION] ? s->fields[KB_SKILL_DESCRIPTION] : "");
        printf("  %-15s %s\n", "path", e->dir);
        for (size_t i = 0; i < s->nmeta; i++)
            printf("  %-15s %s\n", s->meta[i].key, s->meta[i].value);
        printf("  %-15s", "sections");
        for (size_t i = 0; i < s->nsections; i++)
            printf("%s%s", i ? ", " : " ", s->sections[i].title);
        printf("\n\nevidence (%zu record%s):\n", kb_skill_evidence_count(&e->evidence),
               kb_skill_evidence_count(&e->evidence) == 1 ? "" : "s");
        for (size_t i = 0; i < kb_skill_evidence_count(&e->evidence); i++)
            show_record(kb_skill_evidence_at(&e->evidence, i));
    }
    kb_skill_diags_release(&d);
    kb_skill_lib_release(&lib);
    (void)cli;
    return status;
}

/* ------------------------------------------------------------------ export */

static int sub_export(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *dir = DEFAULT_DIR, *want = "verified";
    int json = 0;
    const sub_opt opts[] = {
        { "dir", &dir, NULL }, { "status", &want, NULL }, { "json", NULL, &json },
        { NULL, NULL, NULL }
    };
    const char *pos[argc];
    sub_args a = { .pos = pos };
    int status = parse_sub(self, argc, argv, opts, &a);
    if (status >= 0)
        return status;
    status = 0;
    kb_skill_status min;
    if (a.npos != 1)
        return kb_cli_usage_error(self, "need one DIR to export into");
    if (kb_skill_status_parse(want, &min) != 0 ||
        (min != KB_SKILL_VERIFIED && min != KB_SKILL_APPROVED))
        return kb_cli_usage_error(self, "bad --status '%s' (approved or verified)",
                                  want);
    kb_skill_lib lib;
    kb_skill_lib_init(&lib);
    kb_skill_diags d;
    kb_skill_diags_init(&d);
    kb_err err;
    kb_err_clear(&err);
    size_t n = 0;
    kb_rc rc = kb_skill_lib_load(dir, &lib, &d, &err);
    if (rc == KB_OK)
        rc = kb_skill_export(&lib, a.pos[0], min, &n, &d, &err);
    print_diags(&d);
    if (rc != KB_OK)
        status = kb_cli_fail(&err);
    if (rc == KB_OK || rc == KB_ERR_PARTIAL) {
        if (json) {
            cJSON *o = cJSON_CreateObject();
            if (o && (!cJSON_AddStringToObject(o, "dir", a.pos[0]) ||
                      !cJSON_AddNumberToObject(o, "exported", (double)n) ||
                      !cJSON_AddStringToObject(o, "status", want))) {
                cJSON_Delete(o);
                o = NULL;
            }
            int s = print_json(o);
            status = status ? status : s;
        } else if (!cli->quiet) {
            printf("%zu skill%s (%s%s) exported to %s\n", n, n == 1 ? "" : "s", want,
                   min == KB_SKILL_VERIFIED ? " or approved" : "", a.pos[0]);
        }
    }
    kb_skill_diags_release(&d);
    kb_skill_lib_release(&lib);
    return status;
}

/* ------------------------------------------------------------------ search */

static cJSON *hits_json(const char *text, const kb_skill_hits *h)
{
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    int ok = root && cJSON_AddStringToObject(root, "query", text) &&
             cJSON_AddStringToObject(root, "mode", kb_mode_name(h->all.mode)) &&
             cJSON_AddNumberToObject(root, "took_ms", h->all.took_ms) &&
             (arr = cJSON_AddArrayToObject(root, "results"));
    for (size_t i = 0; ok && i < h->n; i++) {
        const kb_skill_hit *x = &h->items[i];
        cJSON *o = cJSON_CreateObject(), *hp = NULL;
        ok = o && cJSON_AddItemToArray(arr, o) &&
             cJSON_AddNumberToObject(o, "rank", (double)(i + 1)) &&
             cJSON_AddStringToObject(o, "name", x->name) &&
             cJSON_AddStringToObject(o, "status", x->status) &&
             cJSON_AddStringToObject(o, "speedup", x->speedup) &&
             cJSON_AddStringToObject(o, "task", x->task) &&
             cJSON_AddStringToObject(o, "arch", x->arch) &&
             cJSON_AddStringToObject(o, "dtype", x->dtype) &&
             cJSON_AddStringToObject(o, "ops", x->ops) &&
             cJSON_AddNumberToObject(o, "score", x->r->score) &&
             cJSON_AddNumberToObject(o, "chunk_id", (double)x->r->chunk_id) &&
             cJSON_AddStringToObject(o, "url", x->r->url) &&
             cJSON_AddStringToObject(o, "path", x->r->path) &&
             (hp = cJSON_AddArrayToObject(o, "heading_path")) &&
             cJSON_AddStringToObject(o, "text", x->r->text);
        for (size_t d = 0; ok && d < x->r->depth; d++)
            ok = cJSON_AddItemToArray(hp, cJSON_CreateString(x->r->heading_path[d]));
    }
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static int sub_search(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *k = NULL, *mode = NULL;
    int json = 0;
    kb_skill_query q = { .run = kb_query_run, .mode = KB_MODE_HYBRID, .k = 10, .config = cli->config };
    const sub_opt opts[] = {
        { "k", &k, NULL }, { "mode", &mode, NULL }, { "arch", &q.arch, NULL },
        { "dtype", &q.dtype, NULL }, { "ops", &q.ops, NULL }, { "status", &q.status, NULL },
        { "all", NULL, &q.all }, { "json", NULL, &json }, { NULL, NULL, NULL }
    };
    const char *pos[argc];
    sub_args a = { .pos = pos };
    int status = parse_sub(self, argc, argv, opts, &a);
    if (status >= 0)
        return status;
    status = 0;
    long n;
    kb_skill_status st;
    if (k && kb_parse_long(k, 1, 50, &n) != KB_OK)
        return kb_cli_usage_error(self, "--k wants a number from 1 to 50, not '%s'", k);
    if (k)
        q.k = (int)n;
    if (mode && kb_mode_parse(mode, &q.mode) != 0)
        return kb_cli_usage_error(self, "unknown mode '%s' (hybrid, lexical, vector)",
                                  mode);
    if (q.status && kb_skill_status_parse(q.status, &st) != 0)
        return kb_cli_usage_error(self, "bad --status '%s'", q.status);
    if (a.npos == 0)
        return kb_cli_usage_error(self, "no query text given");
    kb_buf text;
    kb_buf_init(&text, 1 << 16);
    for (int i = 0; i < a.npos; i++)
        if ((i && kb_buf_putc(&text, ' ') != KB_OK) || kb_buf_puts(&text, a.pos[i]) != KB_OK) {
            kb_buf_release(&text);
            return kb_cli_usage_error(self, "the query text is too long");
        }
    q.text = text.data;
    kb_err err;
    kb_err_clear(&err);
    kb_store *store = NULL;
    kb_skill_hits h = { 0 };
    kb_rc rc = kb_cli_open_store(cli, KB_STORE_READONLY, &store, &err);
    if (rc == KB_OK)
        rc = kb_skill_search(store, &q, &h, &err);
    if (rc != KB_OK) {
        status = kb_cli_fail(&err);
    } else if (json) {
        status = print_json(hits_json(q.text, &h));
    } else {
        for (size_t i = 0; i < h.n; i++) {
            const kb_skill_hit *x = &h.items[i];
            printf("%zu. %s  %s%s%s%s  task %s%s%s\n   %s\n", i + 1, x->name, x->status,
                   *x->speedup ? ", " : "", x->speedup, *x->speedup ? "x" : "",
                   *x->task ? x->task : "-", *x->arch ? ", " : "", x->arch, x->r->url);
            for (const char *t = x->r->text; *t;) {
                size_t len = strcspn(t, "\n");
                if (len)
                    printf("   %.*s\n", (int)len, t);
                t += len + (t[len] == '\n');
            }
            putchar('\n');
        }
        if (!h.n)
            printf("no skills for '%s'\n", q.text);
    }
    kb_skill_hits_release(&h);
    kb_store_close(store);
    kb_buf_release(&text);
    return status;
}

/* ------------------------------------------------------------------ entries */

#define OPT_DIR { "dir", KB_OPT_LONG('d'), "DIR", "the library (default corpus/skills)" }
#define OPT_TASKS { "tasks", KB_OPT_LONG('t'), "DIR", "the tasks (default corpus/tasks)" }
#define OPT_JSON { "json", KB_OPT_LONG('j'), NULL, "print JSON" }
#define OPT_END { NULL, 0, NULL, NULL }

static const kb_option lint_options[] = {
    OPT_DIR, OPT_TASKS, OPT_JSON,
    { "no-compile", KB_OPT_LONG('n'), NULL, "do not compile the kernels" },
    { "strict", KB_OPT_LONG('s'), NULL, "warnings fail too" },
    OPT_END,
};
static const kb_option new_options[] = {
    { "task", KB_OPT_LONG('T'), "TASK", "the skill's task (required)" },
    { "from", KB_OPT_LONG('f'), "FILE", "its kernel.cu" },
    { "author", KB_OPT_LONG('a'), "WHO", "kb-author" },
    { "description", KB_OPT_LONG('D'), "TEXT", "the description (else a TODO)" },
    OPT_DIR, OPT_TASKS, OPT_JSON, OPT_END,
};
static const kb_option verify_options[] = {
    { "all", KB_OPT_LONG('A'), NULL, "every skill of the library" },
    { "timeout", KB_OPT_LONG('s'), "S", "wall-clock limit per kernel (default 120)" },
    { "from-result", KB_OPT_LONG('r'), "FILE", "import a kb-verify result made elsewhere (JSON or\n"
      "JSON lines) instead of a run; the one for the\nskill's task and kernel hash is taken" },
    { "device-info", KB_OPT_LONG('i'), "FILE", "with --from-result: the device (kb-verify\n"
      "--device-info --json) for the record" },
    OPT_DIR, OPT_TASKS, OPT_JSON, OPT_END,
};
static const kb_option approve_options[] = {
    { "reviewer", KB_OPT_LONG('r'), "WHO", "who reviewed it (required)" },
    OPT_DIR, OPT_END,
};
static const kb_option retire_options[] = {
    { "reason", KB_OPT_LONG('r'), "TEXT", "why (required)" },
    OPT_DIR, OPT_END,
};
static const kb_option list_options[] = {
    { "status", KB_OPT_LONG('s'), "S", "draft, verified, approved or retired" },
    { "task", KB_OPT_LONG('T'), "TASK", "those of one task" },
    { "all", KB_OPT_LONG('A'), NULL, "retired ones too" },
    OPT_DIR, OPT_JSON, OPT_END,
};
static const kb_option show_options[] = { OPT_DIR, OPT_JSON, OPT_END };
static const kb_option export_options[] = {
    { "status", KB_OPT_LONG('s'), "S", "verified (and approved; default) or approved" },
    OPT_DIR, OPT_JSON, OPT_END,
};
static const kb_option search_options[] = {
    { "k", 'k', "N", "skills wanted (default 10)" },
    { "mode", KB_OPT_LONG('m'), "MODE", "hybrid (default), lexical or vector" },
    { "arch", KB_OPT_LONG('a'), "A", "kb-arch holds A (sm_90; 'sm_80+' holds sm_90)" },
    { "dtype", KB_OPT_LONG('D'), "D", "kb-dtype holds D" },
    { "ops", KB_OPT_LONG('o'), "O", "kb-ops holds O" },
    { "status", KB_OPT_LONG('s'), "S", "only these (retired ones only when asked: --all)" },
    { "all", KB_OPT_LONG('A'), NULL, "retired ones too" },
    OPT_JSON, OPT_END,
};
static const kb_option skill_common[] = { OPT_DIR, OPT_TASKS, OPT_JSON, OPT_END };

#define SUB(id, word, use, what, ops, kind, more) \
    static const kb_command id##_cmd = { .name = word, .fn = sub_##id, .usage = use, \
                                   .summary = what, .options = ops, .notes = more, \
                                   .parent = &kb_cmd_skill, .operands = kind }
SUB(lint, "lint", "kb skill lint [options] [PATH...]",
    "check skills: 'file:line: error: ...', exit 1 on errors", lint_options, "dir",
    "Checks SKILL.md, kb-task, kernel.cu (compiled with kb-verify), evidence.json,\n"
    "deep links (with a KB) and dominance.\n");
SUB(new, "new", "kb skill new NAME --task TASK [options]",
    "a draft with the sections to fill", new_options, NULL, NULL);
SUB(verify, "verify", "kb skill verify [options] NAME...|--all",
    "run kb-verify on kernel.cu, record the evidence, set kb-status",
    verify_options, "skill",
    "Runs kb-verify on each skill's kernel.cu, appends the result to evidence.json and\n"
    "sets kb-status and kb-speedup.\n");
SUB(approve, "approve", "kb skill approve NAME --reviewer WHO",
    "a verified skill, approved (the human step)", approve_options, "skill", NULL);
SUB(retire, "retire", "kb skill retire NAME --reason TEXT",
    "retired: kept, never deleted", retire_options, "skill", NULL);
SUB(list, "list", "kb skill list [options]", "the skills, retired ones hidden",
    list_options, NULL, NULL);
SUB(show, "show", "kb skill show NAME [--json]", "one skill with its evidence",
    show_options, "skill", NULL);
SUB(export, "export", "kb skill export DIR [options]",
    "skills an agent loads as-is (.claude/skills, ...)", export_options, "dir", NULL);
SUB(search, "search", "kb skill search [options] TEXT...",
    "skills in the KB (ingested: kind skill), one hit each", search_options, "text", NULL);
#undef SUB

static const kb_command *const skill_subs[] = {
    &lint_cmd, &new_cmd, &verify_cmd, &approve_cmd, &retire_cmd, &list_cmd, &show_cmd,
    &export_cmd, &search_cmd, NULL,
};

const kb_command kb_cmd_skill = {
    .name = "skill",
    .usage = "kb skill SUBCOMMAND [options]",
    .summary = "the skill library: lint, create, verify on the GPU, approve, retire, "
               "list, export, search",
    .options = skill_common,
    .subcommands = skill_subs,
};
