/* cmd_skill.c - kb skill: the skill library's commands (lint, new, verify,
 * approve, retire, list, show, export). The model, the evidence and the
 * lifecycle are skills/'s; verifying runs kb-verify through
 * skills/skill.h. */
#include "cli/cli.h"
#include "generator/gen.h"
#include "skills/skill.h"
#include "verify/verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


/* ------------------------------------------------------------------ output */

static void print_diags(const kb_skill_diags *d)
{
    for (size_t i = 0; i < d->n; i++) {
        const kb_skill_diag *x = &d->items[i];
        const char *sev = x->severity == KB_SKILL_ERROR ? "error" : "warning";
        /* a file's name and what a message quotes of it, escaped */
        kb_fput_line_safe(stderr, x->file);
        if (x->line > 0)
            fprintf(stderr, ":%d", x->line);
        fprintf(stderr, ": %s: ", sev);
        kb_fput_line_safe(stderr, x->msg);
        fprintf(stderr, " (%s)\n", x->rule);
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

/* The entry NAME names, parsed: else the exit status, reported. */
static kb_skill_entry *find_ok(kb_skill_lib *lib, const char *name, kb_skill_diags *d,
                               int *status)
{
    kb_err err;
    kb_err_clear(&err);
    kb_skill_entry *e = cmd_skill_find(lib, name, d, &err);
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
        rc = kb_skill_check_task(e, tasks, d);
    if (rc == KB_OK)
        rc = kb_skill_check_evidence(&e->skill, &e->evidence,
                                     *e->kernel_sha256 ? e->kernel_sha256 : NULL, d);
    if (rc != KB_OK)
        return kb_err_set(err, rc, "out of memory");
    if (v && *compile_ok) {
        kb_err cerr;
        kb_err_clear(&cerr);
        rc = kb_skill_check_compile(e, tasks, v, d, &cerr);
        if (rc == KB_ERR_NOTFOUND)
            *compile_ok = 0, rc = KB_OK;
        else if (rc != KB_OK)
            return kb_err_set(err, rc, "%s", cerr.msg);
    }
    if (store)
        rc = kb_skill_check_links(e, store, d, err);
    return rc;
}

static int sub_lint(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *dir = NULL, *tasks = NULL;
    int json = 0, no_compile = 0, strict = 0;
    const cmd_skill_opt opts[] = {
        { "dir", &dir, NULL }, { "tasks", &tasks, NULL }, { "json", NULL, &json },
        { "no-compile", NULL, &no_compile }, { "strict", NULL, &strict }, { NULL, NULL, NULL }
    };
    cmd_skill_run r;
    int status = cmd_skill_begin(self, cli, argc, argv, opts, &r);
    if (status >= 0)
        return status;
    status = 0;
    kb_rc rc = load(&r.lib, dir, r.pos, r.npos, &r.d, &r.err);
    kb_verifier *v = NULL;
    kb_store *store = NULL;
    int compile_ok = !no_compile;
    const char *links_note = NULL;
    if (rc == KB_OK && compile_ok) {
        kb_verifier_opts vo;
        kb_verifier_opts_init(&vo);
        vo.kb_verify = cli->config->verify;
        vo.compile_only = 1;
        rc = kb_verifier_open(&vo, &v, &r.err);
    }
    if (rc == KB_OK) {
        kb_err serr;
        kb_err_clear(&serr);
        if (kb_cli_open_store(cli, KB_STORE_READONLY, &store, &serr) != KB_OK) {
            store = NULL;
            links_note = "links not checked: no KB (ingest the corpus, or --kb DIR)";
        }
    }
    kb_cli_progress pg;   /* compiling takes seconds a kernel */
    kb_cli_progress_init(&pg, v && !cli->quiet && !json);
    for (size_t i = 0; i < r.lib.n && rc == KB_OK; i++)
        if (r.lib.items[i].ok) {
            if (compile_ok)
                kb_cli_progress_show(&pg, "kb skill lint: compiling kernel %zu of %zu (%s)",
                                     i + 1, r.lib.n, r.lib.items[i].skill.fields[KB_SKILL_NAME]
                                     ? r.lib.items[i].skill.fields[KB_SKILL_NAME] : "?");
            rc = lint_entry(&r.lib.items[i], tasks, v, &compile_ok, store, &r.d, &r.err);
        }
    kb_cli_progress_clear(&pg);
    if (rc == KB_OK && (rc = kb_skill_lib_check(&r.lib, &r.d)) != KB_OK)
        rc = kb_err_set(&r.err, rc, "out of memory");
    if (rc != KB_OK) {
        status = kb_cli_fail(&r.err);
        goto out;
    }
    kb_skill_diags_sort(&r.d);
    const char *compile_note = !no_compile && !compile_ok
        ? "kernels not compiled: no kb-verify (build it where a CUDA toolkit is found)"
        : NULL;
    if (json) {
        cJSON *root = cJSON_CreateObject(), *notes = NULL;
        if (!root || !cJSON_AddNumberToObject(root, "skills", (double)r.lib.n) ||
            !cJSON_AddNumberToObject(root, "errors", (double)r.d.errors) ||
            !cJSON_AddNumberToObject(root, "warnings", (double)r.d.warnings) ||
            !cJSON_AddItemToObject(root, "findings", diags_json(&r.d)) ||
            !(notes = cJSON_AddArrayToObject(root, "notes")) ||
            (links_note && !cJSON_AddItemToArray(notes, cJSON_CreateString(links_note))) ||
            (compile_note && !cJSON_AddItemToArray(notes, cJSON_CreateString(compile_note)))) {
            cJSON_Delete(root);
            root = NULL;
        }
        status = cmd_skill_print_json(root);
    } else {
        print_diags(&r.d);
        if (!cli->quiet) {
            if (links_note)
                fprintf(stderr, "kb skill lint: %s\n", links_note);
            if (compile_note)
                fprintf(stderr, "kb skill lint: %s\n", compile_note);
            fprintf(stderr, "kb skill lint: %zu skill%s, %zu error%s, %zu warning%s\n",
                    r.lib.n, r.lib.n == 1 ? "" : "s", r.d.errors, r.d.errors == 1 ? "" : "s",
                    r.d.warnings, r.d.warnings == 1 ? "" : "s");
        }
    }
    if (!status && (r.d.errors || (strict && r.d.warnings)))
        status = 1;
out:
    kb_store_close(store);
    kb_verifier_free(v);
    cmd_skill_end(&r);
    return status;
}

/* ------------------------------------------------------------------ approve, retire */

/* Loads the one skill of r's NAME operand into r's library. */
static kb_skill_entry *one_skill(const kb_command *self, const char *dir, cmd_skill_run *r,
                                 int *status)
{
    if (r->npos != 1) {
        *status = kb_cli_usage_error(self, "need one NAME");
        return NULL;
    }
    if (kb_skill_lib_load(dir, &r->lib, &r->d, &r->err) != KB_OK && !strchr(r->pos[0], '/')) {
        *status = kb_cli_fail(&r->err);
        return NULL;
    }
    kb_err_clear(&r->err);
    return find_ok(&r->lib, r->pos[0], &r->d, status);
}

static int save_entry(kb_skill_entry *e)
{
    kb_err err;
    kb_err_clear(&err);
    return kb_skill_save(&e->skill, &err) == KB_OK ? 0 : kb_cli_fail(&err);
}

/* approve and retire: one skill, the one value the step needs (--reviewer,
 * --reason), the transition, SKILL.md written. */
static int change_one(int argc, char **argv, const kb_cli *cli, const kb_command *self,
                      int approve)
{
    const char *dir = NULL, *value = NULL;
    const char *opt = approve ? "reviewer" : "reason";
    const cmd_skill_opt opts[] = {
        { "dir", &dir, NULL }, { opt, &value, NULL }, { NULL, NULL, NULL }
    };
    cmd_skill_run r;
    int status = cmd_skill_begin(self, cli, argc, argv, opts, &r);
    if (status >= 0)
        return status;
    status = 0;
    if (!value)
        return kb_cli_usage_error(self, approve ? "need --reviewer WHO (the "
                                  "human step)" : "need --reason TEXT");
    kb_skill_entry *e = one_skill(self, dir, &r, &status);
    kb_rc rc = !e ? KB_OK
             : approve ? kb_skill_approve(&e->skill, &e->evidence,
                                          *e->kernel_sha256 ? e->kernel_sha256 : NULL,
                                          value, &r.err)
                       : kb_skill_retire(&e->skill, value, &r.err);
    if (rc != KB_OK)
        status = kb_cli_fail(&r.err);
    else if (e && !(status = save_entry(e)) && approve)
        printf("%s: approved by %s (commit SKILL.md to record it in git)\n", cmd_skill_name(e), value);
    else if (e && !status)
        printf("%s: retired (%s); kept in %s\n", cmd_skill_name(e), value, e->dir);
    cmd_skill_end(&r);
    return status;
}

static int sub_approve(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    (void)cli;
    return change_one(argc, argv, cli, self, 1);
}

static int sub_retire(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    (void)cli;
    return change_one(argc, argv, cli, self, 0);
}

/* ------------------------------------------------------------------ list, show */

/* The names of the skills e dominates (dominated 0) or that dominate it. */
static cJSON *dominance_json(const kb_skill_lib *lib, const kb_skill_entry *e, int dominated)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < lib->n; i++) {
        const kb_skill_entry *o = &lib->items[i];
        int yes = dominated ? kb_skill_dominates(o, e) : kb_skill_dominates(e, o);
        if (yes && !cJSON_AddItemToArray(a, cJSON_CreateString(cmd_skill_name(o)))) {
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

/* show's more: metadata, sections, license, compatibility, the kernel's
 * and each evidence record's hashes, the records. */
static void skill_json_full(cJSON *o, const kb_skill_entry *e, int *ok)
{
    const kb_skill *s = &e->skill;
    cJSON *m = kb_json_put_obj(o, "metadata", ok);
    cJSON *sec = kb_json_put_arr(o, "sections", ok);
    kb_json_put_str(o, "license", s->fields[KB_SKILL_LICENSE], ok);
    kb_json_put_str(o, "compatibility", s->fields[KB_SKILL_COMPATIBILITY], ok);
    kb_json_put_str(o, "kernel_sha256", e->kernel_sha256, ok);
    kb_json_put_str(o, "body", s->body, ok);   /* SKILL.md after its front matter */
    const cJSON *records = cJSON_GetObjectItemCaseSensitive(e->evidence.root, "records");
    cJSON *copy = *ok ? cJSON_Duplicate(records, 1) : NULL;
    if (records && !copy)
        *ok = 0;
    kb_json_put_item(o, "evidence", copy, ok);
    /* each record's hash, what kb-evidence names */
    cJSON *hashes = kb_json_put_arr(o, "evidence_sha256", ok);
    for (size_t i = 0; *ok && i < kb_skill_evidence_count(&e->evidence); i++) {
        char h[65];
        if (kb_skill_record_hash(kb_skill_evidence_at(&e->evidence, i), h) != KB_OK)
            *ok = 0;
        kb_json_push_str(hashes, h, ok);
    }
    for (size_t i = 0; *ok && i < s->nmeta; i++)
        kb_json_put_str(m, s->meta[i].key, s->meta[i].value, ok);
    for (size_t i = 0; *ok && i < s->nsections; i++)
        kb_json_push_str(sec, s->sections[i].title, ok);
}

/* What list and show say of a skill: arch is its kb-arch, as everywhere
 * (skill_search, skill_list); verified_on the architecture of the device
 * its evidence was measured on (null: none). */
static cJSON *skill_json(const kb_skill_lib *lib, const kb_skill_entry *e, int full)
{
    cJSON *o = cJSON_CreateObject();
    const kb_skill *s = &e->skill;
    const char *on = kb_skill_entry_arch(e);
    int ok = o != NULL;
    kb_json_put_str(o, "name", cmd_skill_name(e), &ok);
    kb_json_put_str(o, "path", e->dir, &ok);
    kb_json_put_bool(o, "parses", e->ok, &ok);
    kb_json_put_str(o, "status", e->ok ? kb_skill_status_name(kb_skill_status_of(s)) : NULL, &ok);
    kb_json_put_str(o, "description", e->ok ? s->fields[KB_SKILL_DESCRIPTION] : NULL, &ok);
    kb_json_put_str(o, "task", cmd_skill_meta(e, "kb-task", NULL), &ok);
    cmd_skill_put_speedup(o, cmd_skill_meta(e, "kb-speedup", NULL), &ok);
    kb_json_put_str(o, "arch", cmd_skill_meta(e, "kb-arch", NULL), &ok);
    kb_json_put_str(o, "verified_on", *on ? on : NULL, &ok);
    kb_json_put_str(o, "dtype", cmd_skill_meta(e, "kb-dtype", NULL), &ok);
    kb_json_put_str(o, "ops", cmd_skill_meta(e, "kb-ops", NULL), &ok);
    kb_json_put_str(o, "when_not", cmd_skill_meta(e, "kb-when-not", NULL), &ok);
    kb_json_put_num(o, "evidence_records", (double)kb_skill_evidence_count(&e->evidence), &ok);
    kb_json_put_item(o, "dominates", ok ? dominance_json(lib, e, 0) : NULL, &ok);
    kb_json_put_item(o, "dominated_by", ok ? dominance_json(lib, e, 1) : NULL, &ok);
    if (ok && full && e->ok)
        skill_json_full(o, e, &ok);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* The widths of list's columns: each as wide as its widest value (a long
 * name or task no longer pushes the columns after it out of line). */
typedef struct {
    int name, task, speedup, arch;
} list_widths;

/* kb-speedup as list shows it: "1.61x", "-" for none, "?" when it is not
 * a number (the note says so). */
static const char *speedup_cell(const kb_skill_entry *e, char *buf, size_t n)
{
    const char *sp = cmd_skill_meta(e, "kb-speedup", NULL);
    double x;
    if (!sp)
        return "-";
    if (!kb_skill_speedup_parse(sp, &x))
        return "?";
    snprintf(buf, n, "%sx", sp);
    return buf;
}

static int widest(int w, const char *s)
{
    int n = (int)strlen(s);
    return n > w ? n : w;
}

static void list_widen(list_widths *w, const kb_skill_entry *e)
{
    char sp[32];
    const char *t = cmd_skill_meta(e, "kb-task", "");
    w->name = widest(w->name, cmd_skill_name(e));
    w->task = widest(w->task, *t ? t : "-");
    w->speedup = widest(w->speedup, speedup_cell(e, sp, sizeof sp));
    w->arch = widest(w->arch, cmd_skill_meta(e, "kb-arch", "-"));
}

/* list's line of e: name, status, task, speedup, arch (kb-arch), how
 * often kb generate's prompts carried it and won, what dominates it. */
static void print_row(FILE *out, const kb_skill_lib *lib, const kb_skill_entry *e, long used,
                      long won, const list_widths *w)
{
    kb_skill_status st = e->ok ? kb_skill_status_of(&e->skill) : KB_SKILL_DRAFT;
    const char *t = cmd_skill_meta(e, "kb-task", "");
    char uw[48], sp[32];
    snprintf(uw, sizeof uw, "%ld/%ld", used, won);
    const char *spc = speedup_cell(e, sp, sizeof sp);
    fprintf(out, "%-*s %-9s %-*s %*s %-*s %8s", w->name, cmd_skill_name(e),
            e->ok ? kb_skill_status_name(st) : "?", w->task, *t ? t : "-", w->speedup, spc,
            w->arch, cmd_skill_meta(e, "kb-arch", "-"), uw);
    const char *sep = " ";
    for (size_t j = 0; j < lib->n; j++) {
        if (kb_skill_dominates(&lib->items[j], e))
            fprintf(out, "%sdominated by %s", sep, cmd_skill_name(&lib->items[j])),
                sep = "; ";
        if (kb_skill_dominates(e, &lib->items[j]))
            fprintf(out, "%sdominates %s", sep, cmd_skill_name(&lib->items[j])), sep = "; ";
    }
    if (!e->ok)
        fprintf(out, "%sdoes not parse: kb skill lint %s", sep, e->dir), sep = "; ";
    else if (st == KB_SKILL_RETIRED)
        fprintf(out, "%sretired: %s", sep,
                cmd_skill_meta(e, "kb-retired", "no reason recorded")), sep = "; ";
    if (e->ok && *spc == '?')
        fprintf(out, "%skb-speedup '%s' is not a number: kb skill lint %s", sep,
                cmd_skill_meta(e, "kb-speedup", ""), e->dir);
    fputc('\n', out);
}

/* Does list show e: of status *want (NULL: any), of task (NULL: any), and
 * retired only with all or when asked for by status? */
static int listed(const kb_skill_entry *e, const kb_skill_status *want, const char *task,
                  int all)
{
    kb_skill_status st = e->ok ? kb_skill_status_of(&e->skill) : KB_SKILL_DRAFT;
    if ((want && (!e->ok || st != *want)) ||
        (task && strcmp(cmd_skill_meta(e, "kb-task", ""), task) != 0))
        return 0;
    return want || all || st != KB_SKILL_RETIRED;
}

static int sub_list(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *dir = NULL, *want = NULL, *task = NULL;
    int json = 0, all = 0;
    const cmd_skill_opt opts[] = {
        { "dir", &dir, NULL }, { "status", &want, NULL }, { "task", &task, NULL },
        { "all", NULL, &all }, { "json", NULL, &json }, { NULL, NULL, NULL }
    };
    cmd_skill_run r;
    int status = cmd_skill_begin(self, cli, argc, argv, opts, &r);
    if (status >= 0)
        return status;
    status = 0;
    kb_skill_status wst = KB_SKILL_DRAFT;
    if (r.npos)
        return kb_cli_usage_error(self, "unexpected argument '%s'", r.pos[0]);
    if (want && kb_skill_status_parse(want, &wst) != 0)
        return kb_cli_usage_error(self, "bad --status '%s' (draft, verified, "
                                  "approved or retired)", want);
    kb_gen_credit *credit = NULL;
    size_t ncredit = 0;
    if (kb_skill_lib_load(dir, &r.lib, &r.d, &r.err) != KB_OK) {
        status = kb_cli_fail(&r.err);
        goto out;
    }
    /* credit: how often kb generate's runs (KB/runs) carried each skill in
     * a prompt, and in the winner's */
    char *runs = kb_path_join(cli->kb_dir, "runs");
    kb_rc crc = runs ? kb_gen_credit_load(runs, &credit, &ncredit, &r.err) : KB_ERR_NOMEM;
    free(runs);
    if (crc != KB_OK) {
        status = kb_cli_fail(&r.err);
        goto out;
    }
    cJSON *root = json ? cJSON_CreateObject() : NULL;
    cJSON *arr = root ? cJSON_AddArrayToObject(root, "skills") : NULL;
    list_widths w = { 4, 4, 7, 4 };   /* the headings' */
    for (size_t i = 0; i < r.lib.n; i++)
        if (listed(&r.lib.items[i], want ? &wst : NULL, task, all))
            list_widen(&w, &r.lib.items[i]);
    kb_cli_safe_out so;   /* names and notes are contributors' text */
    kb_cli_safe_begin(&so);
    if (!json)
        fprintf(so.f, "%-*s %-9s %-*s %*s %-*s %8s %s\n", w.name, "name", "status", w.task,
                "task", w.speedup, "speedup", w.arch, "arch", "used/won", "note");
    size_t shown = 0, hidden = 0;
    for (size_t i = 0; i < r.lib.n; i++) {
        const kb_skill_entry *e = &r.lib.items[i];
        kb_skill_status st = e->ok ? kb_skill_status_of(&e->skill) : KB_SKILL_DRAFT;
        if (!listed(e, want ? &wst : NULL, task, 1))
            continue;
        if (!want && !all && st == KB_SKILL_RETIRED) {
            hidden++;
            continue;
        }
        shown++;
        long used = 0, won = 0;
        for (size_t k = 0; k < ncredit; k++)
            if (strcmp(credit[k].skill, cmd_skill_name(e)) == 0)
                used = credit[k].used, won = credit[k].won;
        if (json) {
            cJSON *o = skill_json(&r.lib, e, 0);
            int ok = o != NULL;
            kb_json_put_num(o, "used", (double)used, &ok);
            kb_json_put_num(o, "won", (double)won, &ok);
            if (!ok)
                cJSON_Delete(o);
            if (arr && (!ok || !cJSON_AddItemToArray(arr, o)))
                arr = NULL;
            continue;
        }
        print_row(so.f, &r.lib, e, used, won, &w);
    }
    kb_cli_safe_end(&so);
    if (json) {
        if (!arr || !cJSON_AddNumberToObject(root, "hidden_retired", (double)hidden)) {
            cJSON_Delete(root);
            root = NULL;
        }
        status = cmd_skill_print_json(root);
    } else if (!cli->quiet) {
        fprintf(stderr, "%zu skill%s", shown, shown == 1 ? "" : "s");
        if (hidden)
            fprintf(stderr, " (%zu retired not shown: --all)", hidden);
        fputc('\n', stderr);
    }
out:
    kb_gen_credit_free(credit, ncredit);
    cmd_skill_end(&r);
    return status;
}

static void show_record(FILE *out, const cJSON *r)
{
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(r, "device");
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(r, "speedup");
    fprintf(out, "  %s  %-10s on %s (%s)", kb_skill_record_str(r, "date"),
            kb_skill_record_str(r, "verdict"), kb_skill_record_str(dev, "name"),
            kb_skill_record_str(dev, "arch"));
    if (cJSON_IsNumber(sp))
        fprintf(out, ", %.2fx %s", sp->valuedouble, kb_skill_record_str(r, "baseline"));
    fprintf(out, ", kernel %.12s\n", kb_skill_record_str(r, "kernel_sha256"));
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(r, "timings")) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(t, "candidate_ms");
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(t, "baseline_ms");
#define MS(o, k) (cJSON_GetObjectItemCaseSensitive(o, k) ? \
                  cJSON_GetObjectItemCaseSensitive(o, k)->valuedouble : 0)
        fprintf(out, "      %s: %.4f ms [%.4f, %.4f] against %.4f ms [%.4f, %.4f]\n",
                kb_skill_record_str(t, "shape"), MS(c, "median"), MS(c, "ci95_lo"),
                MS(c, "ci95_hi"), MS(b, "median"), MS(b, "ci95_lo"), MS(b, "ci95_hi"));
#undef MS
    }
}

static int sub_show(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *dir = NULL;
    int json = 0;
    const cmd_skill_opt opts[] = {
        { "dir", &dir, NULL }, { "json", NULL, &json }, { NULL, NULL, NULL }
    };
    cmd_skill_run r;
    int status = cmd_skill_begin(self, cli, argc, argv, opts, &r);
    if (status >= 0)
        return status;
    status = 0;
    kb_skill_entry *e = one_skill(self, dir, &r, &status);
    if (e && json) {
        status = cmd_skill_print_json(skill_json(&r.lib, e, 1));
    } else if (e) {
        const kb_skill *s = &e->skill;
        kb_cli_safe_out so;   /* every value is a contributor's text */
        kb_cli_safe_begin(&so);
        FILE *out = so.f;
        fprintf(out, "%s  (%s)\n%s\n\n", cmd_skill_name(e),
                kb_skill_status_name(kb_skill_status_of(s)),
                s->fields[KB_SKILL_DESCRIPTION] ? s->fields[KB_SKILL_DESCRIPTION] : "");
        fprintf(out, "  %-15s %s\n", "path", e->dir);
        for (size_t i = 0; i < s->nmeta; i++)
            fprintf(out, "  %-15s %s\n", s->meta[i].key, s->meta[i].value);
        fprintf(out, "  %-15s", "sections");
        for (size_t i = 0; i < s->nsections; i++)
            fprintf(out, "%s%s", i ? ", " : " ", s->sections[i].title);
        fprintf(out, "\n\nevidence (%zu record%s):\n", kb_skill_evidence_count(&e->evidence),
                kb_skill_evidence_count(&e->evidence) == 1 ? "" : "s");
        for (size_t i = 0; i < kb_skill_evidence_count(&e->evidence); i++)
            show_record(out, kb_skill_evidence_at(&e->evidence, i));
        if (s->body && *s->body)   /* the skill itself: SKILL.md's body */
            fprintf(out, "\n%s%s", s->body, s->body[strlen(s->body) - 1] != '\n' ? "\n" : "");
        kb_cli_safe_end(&so);
    }
    cmd_skill_end(&r);
    (void)cli;
    return status;
}

/* ------------------------------------------------------------------ export */

static int sub_export(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *dir = NULL, *want = "verified";
    int json = 0;
    const cmd_skill_opt opts[] = {
        { "dir", &dir, NULL }, { "status", &want, NULL }, { "json", NULL, &json },
        { NULL, NULL, NULL }
    };
    cmd_skill_run r;
    int status = cmd_skill_begin(self, cli, argc, argv, opts, &r);
    if (status >= 0)
        return status;
    status = 0;
    kb_skill_status min;
    if (r.npos != 1)
        return kb_cli_usage_error(self, "need one DIR to export into");
    if (kb_skill_status_parse(want, &min) != 0 ||
        (min != KB_SKILL_VERIFIED && min != KB_SKILL_APPROVED))
        return kb_cli_usage_error(self, "bad --status '%s' (approved or verified)",
                                  want);
    size_t n = 0;
    kb_rc rc = kb_skill_lib_load(dir, &r.lib, &r.d, &r.err);
    if (rc == KB_OK)
        rc = kb_skill_export(&r.lib, r.pos[0], min, &n, &r.d, &r.err);
    print_diags(&r.d);
    if (rc != KB_OK)
        status = kb_cli_fail(&r.err);
    if (rc == KB_OK || rc == KB_ERR_PARTIAL) {
        if (json) {
            cJSON *o = cJSON_CreateObject();
            if (o && (!cJSON_AddStringToObject(o, "dir", r.pos[0]) ||
                      !cJSON_AddNumberToObject(o, "exported", (double)n) ||
                      !cJSON_AddStringToObject(o, "status", want))) {
                cJSON_Delete(o);
                o = NULL;
            }
            int s = cmd_skill_print_json(o);
            status = status ? status : s;
        } else if (!cli->quiet) {
            printf("%zu skill%s (%s%s) exported to %s\n", n, n == 1 ? "" : "s", want,
                   min == KB_SKILL_VERIFIED ? " or approved" : "", r.pos[0]);
        }
    }
    cmd_skill_end(&r);
    return status;
}

/* ------------------------------------------------------------------ search */

/* The skill_search tool's arguments for kb skill search's options: the
 * same search, so --json is the tool's answer (api/, one shape). */
static cJSON *search_args(const kb_skill_query *q, const char *mode)
{
    cJSON *a = cJSON_CreateObject();
    int ok = a != NULL;
    kb_json_put_str(a, "query", q->text, &ok);
    kb_json_put_num(a, "k", q->k, &ok);
    if (mode)
        kb_json_put_str(a, "mode", mode, &ok);
    if (q->arch)
        kb_json_put_str(a, "arch", q->arch, &ok);
    if (q->dtype)
        kb_json_put_str(a, "dtype", q->dtype, &ok);
    if (q->ops)
        kb_json_put_str(a, "ops", q->ops, &ok);
    if (q->status)
        kb_json_put_str(a, "status", q->status, &ok);
    if (q->all)
        kb_json_put_bool(a, "all", 1, &ok);
    if (!ok) {
        cJSON_Delete(a);
        return NULL;
    }
    return a;
}

/* The hits as text: rank, name, status, speedup, task, arch, url, the
 * snippet. */
static void print_hits(const kb_skill_hits *h, const char *text)
{
    for (size_t i = 0; i < h->n; i++) {
        const kb_skill_hit *x = &h->items[i];
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
    if (!h->n)
        printf("no skills for '%s'\n", text);
}

static int sub_search(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *k = NULL, *mode = NULL;
    int json = 0;
    kb_skill_query q = { .run = kb_query_run, .mode = KB_MODE_HYBRID, .k = 10, .config = cli->config };
    const cmd_skill_opt opts[] = {
        { "k", &k, NULL }, { "mode", &mode, NULL }, { "arch", &q.arch, NULL },
        { "dtype", &q.dtype, NULL }, { "ops", &q.ops, NULL }, { "status", &q.status, NULL },
        { "all", NULL, &q.all }, { "json", NULL, &json }, { NULL, NULL, NULL }
    };
    cmd_skill_run r;
    int status = cmd_skill_begin(self, cli, argc, argv, opts, &r);
    if (status >= 0)
        return status;
    status = 0;
    long n;
    kb_skill_status st;
    if (k && kb_parse_long(k, 1, 50, &n) != KB_OK)
        return kb_cli_usage_error(self, "-k wants a number from 1 to 50, not '%s'", k);
    if (k)
        q.k = (int)n;
    if (mode && kb_mode_parse(mode, &q.mode) != 0)
        return kb_cli_usage_error(self, "unknown mode '%s' (hybrid, lexical, vector)",
                                  mode);
    if (q.status && kb_skill_status_parse(q.status, &st) != 0)
        return kb_cli_usage_error(self, "bad --status '%s'", q.status);
    if (r.npos == 0)
        return kb_cli_usage_error(self, "no query text given");
    kb_buf text;
    kb_buf_init(&text, 1 << 16);
    for (int i = 0; i < r.npos; i++)
        if ((i && kb_buf_putc(&text, ' ') != KB_OK) || kb_buf_puts(&text, r.pos[i]) != KB_OK) {
            kb_buf_release(&text);
            return kb_cli_usage_error(self, "the query text is too long");
        }
    q.text = text.data;
    if (json) {   /* the skill_search tool's answer */
        status = cmd_tool_json(cli, "skill_search", search_args(&q, mode));
        kb_buf_release(&text);
        return status;
    }
    kb_store *store = NULL;
    kb_skill_hits h = { 0 };
    kb_rc rc = kb_cli_open_store(cli, KB_STORE_READONLY, &store, &r.err);
    if (rc == KB_OK)
        rc = kb_skill_search(store, &q, &h, &r.err);
    if (rc != KB_OK)
        status = kb_cli_fail(&r.err);
    else
        print_hits(&h, q.text);
    kb_skill_hits_release(&h);
    kb_store_close(store);
    kb_buf_release(&text);
    return status;
}

/* ------------------------------------------------------------------ entries */

#define OPT_DIR { "dir", KB_OPT_LONG('d'), "DIR", "the library (default: corpus/skills where kb finds it)" }
#define OPT_TASKS { "tasks", KB_OPT_LONG('t'), "DIR", "the tasks (default: corpus/tasks where kb finds it)" }
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

/* new and verify have their own files */
#define sub_new cmd_skill_new
#define sub_verify cmd_skill_verify
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
SUB(show, "show", "kb skill show NAME [--json]", "one skill: its metadata, evidence and SKILL.md",
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
