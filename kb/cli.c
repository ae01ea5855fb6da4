/* cli.c - what the command files share: usage and errors printed alike,
 * the KB of the command line, plain options, JSON on stdout. */
#include "kb/cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kb_cli_usage(const kb_command *cmd, int to_stderr)
{
    FILE *f = to_stderr ? stderr : stdout;
    fprintf(f, "usage: %s\n\n%s.\n", cmd->usage, cmd->summary);
    if (cmd->help && *cmd->help)
        fprintf(f, "\noptions:\n%s", cmd->help);
}

kb_rc kb_cli_print_json(cJSON *root, kb_err *err)
{
    char *s = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!s)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory printing JSON");
    puts(s);
    free(s);
    return KB_OK;
}

/* The length of the UTF-8 sequence at s (n bytes left) and its code point,
 * or 0 if it is not one (overlong, surrogate, cut short, beyond U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n, unsigned long *cp)
{
    size_t len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 ? 2 : 0;
    if (s[0] > 0xF4 || len == 0 || len > n)
        return 0;
    unsigned long c = s[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    static const unsigned long least[] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (c < least[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    *cp = c;
    return len;
}

void kb_cli_put_safe(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        const unsigned char *run = p;   /* what needs no escape, in one write */
        unsigned long cp = 0;
        size_t len = 0;
        while (p < end) {
            if (*p >= 0x20 && *p < 0x7F) {
                p++;
            } else if (*p == '\n' || *p == '\t') {
                p++;
            } else if (*p >= 0x80 && (len = utf8_seq(p, (size_t)(end - p), &cp)) &&
                       cp >= 0xA0 && !(cp >= 0x202A && cp <= 0x202E) &&
                       !(cp >= 0x2066 && cp <= 0x2069)) {
                p += len;
            } else {
                break;
            }
        }
        fwrite(run, 1, (size_t)(p - run), f);
        if (p == end)
            break;
        if (*p == '\r' && p + 1 < end && p[1] == '\n') {
            p++;   /* a CRLF line end is a line end */
        } else if (*p >= 0x80 && len) {
            fprintf(f, "\\u%04lx", cp);   /* C1 control, bidi override */
            p += len;
        } else {
            fprintf(f, "\\x%02x", *p++);
        }
    }
}

void kb_cli_puts_safe(FILE *f, const char *s)
{
    kb_cli_put_safe(f, s, strlen(s));
}

void kb_cli_puts_safe_pad(FILE *f, const char *s, int width)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) {                   /* out of memory: unpadded, still safe */
        kb_cli_puts_safe(f, s);
        return;
    }
    kb_cli_puts_safe(m, s);
    if (fclose(m) != 0 || !text) {
        free(text);
        kb_cli_puts_safe(f, s);
        return;
    }
    fwrite(text, 1, len, f);
    for (size_t i = len; i < (size_t)(width > 0 ? width : 0); i++)
        fputc(' ', f);
    free(text);
}

int kb_cli_fail(const kb_err *err)
{
    fprintf(stderr, "kb: %s\n", err->msg[0] ? err->msg : kb_rc_name(err->rc));
    return kb_rc_exit_status(err->rc);
}

int kb_cli_usage_error(const kb_command *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kb %s: ", cmd->name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nusage: %s\n", cmd->usage);
    va_end(ap);
    return 2;
}

kb_rc kb_cli_open_store(const kb_cli *cli, int flags, kb_store **store,
                        kb_err *err)
{
    char *dir = kb_store_default_dir(cli->kb_dir);
    if (!dir)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_rc rc = kb_store_open(dir, flags, store, err);
    free(dir);
    return rc;
}

int kb_cli_parse_plain(int argc, char **argv, const kb_command *self,
                       const char *option, const char **value, int *json)
{
    struct option longopts[3] = { { "json", no_argument, NULL, 'j' } };
    if (option)
        longopts[1] = (struct option){ option, required_argument, NULL, 'o' };
    int c;
    *json = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == 'j')
            *json = 1;
        else if (c == 'o')
            *value = optarg;
        else
            return kb_cli_usage_error(self, "unknown option '%s'", argv[optind - 1]);
    }
    if (optind < argc)
        return kb_cli_usage_error(self, "unexpected argument '%s'", argv[optind]);
    return 0;
}

int kb_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return 0;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return 1;
    }
    return 0;
}
