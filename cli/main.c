/* main.c - kb's entry: the list of commands. Each command's entry (name,
 * usage, options) is in its own file; cli/cli.c parses and dispatches. */
#include "cli/cli.h"

static const kb_command *const commands[] = {
    &kb_cmd_ingest, &kb_cmd_rm, &kb_cmd_query, &kb_cmd_get, &kb_cmd_status, &kb_cmd_sources,
    &kb_cmd_papers, &kb_cmd_eval, &kb_cmd_tune, &kb_cmd_mcp, &kb_cmd_verify, &kb_cmd_prompt, &kb_cmd_generate,
    &kb_cmd_skill, &kb_cmd_serve, &kb_cmd_doctor, &kb_cmd_model, &kb_cmd_config, &kb_cmd_completion,
    &kb_cmd_manpage, NULL,
};

int main(int argc, char **argv)
{
    return kb_cli_main(argc, argv, commands);
}
