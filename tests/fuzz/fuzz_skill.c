/* fuzz_skill.c - kb_skill_parse on any bytes as a SKILL.md (its front
 * matter read by libyaml): a skill, or a clear error with its finding.
 * What it accepts passes kb_skill_check without running out of memory,
 * and survives kb_skill_write: the text written parses back to the same
 * fields, metadata (in order) and body. */
#include "tests/fuzz/fuzz.h"
#include "skills/skill.h"

static int same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact copy: the fuzzer's buffer may be shared with its own checks */
    char *copy = malloc(size ? size : 1);
    fuzz_check(copy != NULL);
    memcpy(copy, data, size);
    kb_skill s;
    kb_skill_init(&s);
    kb_skill_diags d;
    kb_skill_diags_init(&d);
    kb_err err;
    kb_err_clear(&err);
    if (kb_skill_parse("fuzz/SKILL.md", copy, size, &s, &d, &err) == KB_OK) {
        fuzz_check(kb_skill_check(&s, &d) == KB_OK);
        kb_buf out;
        kb_buf_init(&out, 0);
        fuzz_check(kb_skill_write(&s, &out) == KB_OK);
        kb_skill back;
        kb_skill_init(&back);
        kb_skill_diags d2;
        kb_skill_diags_init(&d2);
        kb_err_clear(&err);
        if (kb_skill_parse("fuzz/SKILL.md", out.data, out.len, &back, &d2, &err) != KB_OK) {
            fprintf(stderr, "written text does not parse: %s\n%s\n", err.msg, out.data);
            abort();
        }
        for (int k = 0; k < KB_SKILL_NKEYS; k++)
            fuzz_check(same(s.fields[k], back.fields[k]));
        fuzz_check(s.has_metadata == back.has_metadata);
        fuzz_check(s.nmeta == back.nmeta);
        for (size_t i = 0; i < s.nmeta; i++) {
            fuzz_check(same(s.meta[i].key, back.meta[i].key));
            fuzz_check(same(s.meta[i].value, back.meta[i].value));
        }
        fuzz_check(same(s.body, back.body));
        fuzz_check(s.nsections == back.nsections);
        kb_skill_release(&back);
        kb_skill_diags_release(&d2);
        kb_buf_release(&out);
        kb_skill_release(&s);
    } else {
        fuzz_check(err.msg[0] != '\0');   /* a failure says why */
        fuzz_check(d.n > 0);
    }
    kb_skill_diags_release(&d);
    free(copy);
    return 0;
}
