/* cmd_eval.c - kb eval. */
#include "kb/cli.h"

#include <stdio.h>

int cmd_eval(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    (void)argc; (void)argv; (void)cli;
    fprintf(stderr, "kb %s: not built yet\n", self->name);
    return 1;
}
