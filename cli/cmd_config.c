/* cmd_config.c - kb config: the settings in force, and where each came
 * from (the environment, the config file, the default). */
#include "cli/cli.h"

#include <stdio.h>

static const kb_option config_options[] = { { NULL, 0, NULL, NULL } };

static int cmd_config(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    int stop = kb_cli_no_options(self, argc, argv, NULL);
    if (stop >= 0)
        return stop;
    kb_buf out;
    kb_buf_init(&out, 0);
    kb_rc rc = kb_config_show(cli->config, &out);
    if (rc == KB_OK)
        fputs(out.data, stdout);
    kb_buf_release(&out);
    if (rc != KB_OK) {
        fputs("kb: out of memory\n", stderr);
        return 1;
    }
    return 0;
}

const kb_command kb_cmd_config = {
    .name = "config",
    .fn = cmd_config,
    .usage = "kb config",
    .summary = "show the settings in force and where each came from",
    .options = config_options,
    .notes = "Settings are the environment variables of 'kb --help'. The config file\n"
             "($XDG_CONFIG_HOME/kb/config, else ~/.config/kb/config) holds them as\n"
             "'KEY = value' lines ('#' starts a comment); the environment wins over it.\n"
             "Keys are shown as (set), never their values.\n",
};
