/* cmd_papers.c - kb papers. */
#include "kb/cli.h"

#include <stdio.h>

int cmd_papers(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    (void)argc; (void)argv; (void)cli;
    fprintf(stderr, "kb %s: not built yet\n", self->name);
    return 1;
}
