/* cmd_skill_lib.c - what the kb skill files share (cli.h, "cmd_skill"):
 * the preamble every subcommand starts with (its options parsed, its
 * operands, an empty library, findings and error), a skill found by name
 * or path, and the small output helpers. */
#include "cli/cli.h"
#include "skills/skill.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ the preamble */

int cmd_skill_begin(const kb_command *self, const kb_cli *cli, int argc, char **argv,
                    const cmd_skill_opt *opts, cmd_skill_run *r)
{
    r->found[0] = r->found[1] = NULL;
    r->pos = NULL;
    r->npos = 0;
    kb_skill_lib_init(&r->lib);
    kb_skill_diags_init(&r->d);
    kb_err_clear(&r->err);
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    int c;
    while ((c = kb_getopt_next(&g)) > 0) {
        const kb_option *o = self->options;
        while (o->name && o->key != c)
            o++;
        for (const cmd_skill_opt *b = opts; b->name; b++) {
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
    /* the library and the tasks where kb finds them (not the working
     * directory's alone) */
    for (const cmd_skill_opt *b = opts; b->name; b++) {
        int tasks = strcmp(b->name, "tasks") == 0;
        if (b->str && !*b->str && (tasks || strcmp(b->name, "dir") == 0)) {
            if (!(r->found[tasks] = kb_cli_data(cli, tasks ? "tasks" : "skills"))) {
                kb_err_set(&r->err, KB_ERR_NOMEM, "out of memory");
                return kb_cli_fail(&r->err);
            }
            *b->str = r->found[tasks];
        }
    }
    r->pos = (const char **)(argv + g.ind);
    r->npos = argc - g.ind;
    return -1;
}

void cmd_skill_end(cmd_skill_run *r)
{
    kb_skill_diags_release(&r->d);
    kb_skill_lib_release(&r->lib);
    free(r->found[0]);
    free(r->found[1]);
}

/* ------------------------------------------------------------------ output */

int cmd_skill_print_json(cJSON *root)
{
    kb_err err;
    kb_err_clear(&err);
    return kb_cli_print_json(root, &err) == KB_OK ? 0 : kb_cli_fail(&err);
}

const char *cmd_skill_name(const kb_skill_entry *e)
{
    return e->ok && e->skill.fields[KB_SKILL_NAME] ? e->skill.fields[KB_SKILL_NAME] : e->dir;
}

const char *cmd_skill_meta(const kb_skill_entry *e, const char *key, const char *dflt)
{
    const char *v = e->ok ? kb_skill_get(&e->skill, key) : NULL;
    return v ? v : dflt;
}

void cmd_skill_put_speedup(cJSON *o, const char *speedup, int *ok)
{
    double x;
    if (kb_skill_speedup_parse(speedup, &x))
        kb_json_put_num(o, "speedup", x, ok);
    else
        kb_json_put_null(o, "speedup", ok);
}

/* ------------------------------------------------------------------ the library */

/* The entry NAME names: a skill of the library by name, else a path. */
kb_skill_entry *cmd_skill_find(kb_skill_lib *lib, const char *name, kb_skill_diags *d,
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
                   lib->dir ? lib->dir : "corpus/skills");
    return NULL;
}
