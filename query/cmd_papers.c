/* cmd_papers.c - kb papers: the literature list's records. */
#include "kb/cli.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_papers(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *section = NULL;
    int json, status = kb_cli_parse_plain(argc, argv, self, "section", &section,
                                          &json);
    if (status)
        return status;
    if (json) {   /* the papers tool's object */
        cJSON *args = cJSON_CreateObject();
        if (section && !cJSON_AddStringToObject(args, "section", section)) {
            cJSON_Delete(args);
            args = NULL;
        }
        return cmd_tool_json(cli, "papers", args);
    }
    kb_err err;
    kb_err_clear(&err);
    kb_store *store = NULL;
    kb_paper_list list = { 0 };
    kb_rc rc = kb_cli_open_store(cli, KB_STORE_READONLY, &store, &err);
    if (rc == KB_OK)
        rc = kb_papers_list(store, section, &list, &err);
    if (rc == KB_OK) {
        const char *last = "";
        for (size_t i = 0; i < list.n; i++) {
            const kb_paper_row *p = &list.items[i];
            if (strcmp(p->section, last) != 0)
                printf("%s%s\n", i ? "\n" : "", p->section);
            last = p->section;
            printf("  [%-7s] %s\n", p->date, p->title);
            cJSON *links = cJSON_Parse(p->links_json);
            const cJSON *l;
            cJSON_ArrayForEach(l, links)
                if (cJSON_IsString(l))
                    printf("            %s: %s\n", l->string, l->valuestring);
            cJSON_Delete(links);
        }
        printf("%s%zu papers\n", list.n ? "\n" : "", list.n);
    }
    kb_paper_list_release(&list);
    kb_store_close(store);
    return rc == KB_OK ? 0 : kb_cli_fail(&err);
}
