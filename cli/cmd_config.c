/* cmd_config.c - kb config: the settings in force, where each came from
 * (the environment, the config file, the default) and what each does; one
 * of them alone for a script. */
#include "cli/cli.h"

#include <cjson/cJSON.h>
#include <stdio.h>

static const kb_option config_options[] = {
    { "json", KB_OPT_LONG('j'), NULL, "print JSON: every setting, its value, where it came\n"
                                      "from, what it does and its default" },
    { NULL, 0, NULL, NULL },
};

/* kb config NAME: the value alone, for a script; 1 when it is unset
 * (git config's way), 2 for no such setting. */
static int config_one(const kb_cli *cli, const kb_command *self, const char *name)
{
    kb_buf out;
    kb_err err;
    kb_buf_init(&out, 0);
    kb_err_clear(&err);
    kb_rc rc = kb_config_get(cli->config, name, &out, &err);
    if (rc == KB_OK)
        fputs(out.data ? out.data : "", stdout);
    kb_buf_release(&out);
    if (rc == KB_OK && kb_config_is_key(name))
        kb_cli_errorf("%s is set (kb never prints a key)", name);
    if (rc == KB_ERR_USAGE) {
        const char *names[64];
        const char *like = kb_cli_similar(name, names, kb_config_names(names, 64));
        return kb_cli_usage_error(self, "%s%s%s%s ('kb config' lists them)", err.msg,
                                  like ? "; did you mean '" : "", like ? like : "",
                                  like ? "'?" : "");
    }
    if (rc == KB_ERR_NOTFOUND) {
        if (!cli->quiet)
            kb_cli_errorf("%s", err.msg);
        return 1;
    }
    return rc == KB_OK ? 0 : kb_cli_fail(&err);
}

static int cmd_config(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    int json = 0;
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    int c;
    while ((c = kb_getopt_next(&g)) > 0)
        if (c == KB_OPT_LONG('j'))
            json = 1;
    if (c < 0)
        return g.status;
    if (argc - g.ind > 1)
        return kb_cli_usage_error(self, "name one setting, not %d", argc - g.ind);
    if (argc - g.ind == 1) {
        if (json)
            return kb_cli_usage_error(self, "--json shows every setting; name none");
        return config_one(cli, self, argv[g.ind]);
    }
    kb_err err;
    kb_err_clear(&err);
    if (json)
        return kb_cli_print_json(kb_config_json(cli->config), &err) == KB_OK
                   ? 0 : kb_cli_fail(&err);
    kb_buf out;
    kb_buf_init(&out, 0);
    kb_rc rc = kb_config_show(cli->config, &out);
    if (rc == KB_OK)
        fputs(out.data, stdout);
    kb_buf_release(&out);
    if (rc != KB_OK) {
        kb_cli_errorf("out of memory");
        return 1;
    }
    return 0;
}

const kb_command kb_cmd_config = {
    .name = "config",
    .fn = cmd_config,
    .usage = "kb config [--json] [NAME]",
    .summary = "the settings in force (KB_*), where each came from, what each does",
    .options = config_options,
    .notes = "Without NAME: every setting, its value in force and where it came from,\n"
             "and what it does (a key is shown as set, never its value). With NAME:\n"
             "its value alone; exit status 1 when it is unset, 2 when there is no such\n"
             "setting. Settings are environment variables; the config file\n"
             "($XDG_CONFIG_HOME/kb/config, else ~/.config/kb/config) holds them as\n"
             "'KEY = value' lines ('#' starts a comment); the environment wins over it.\n"
             "The man page (kb manpage) lists them too.\n",
};
