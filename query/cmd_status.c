/* cmd_status.c - kb status. */
#include "kb/cli.h"

#include <stdio.h>

int cmd_status(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    (void)argc; (void)argv; (void)cli;
    fprintf(stderr, "kb %s: not built yet\n", self->name);
    return 1;
}
