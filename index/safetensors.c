/*
 * safetensors.c - a read-only, validating loader of .safetensors files:
 * an 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 * "__metadata__": {...}}, then the raw data. The file is mmap'd; nothing is
 * used before every offset, shape and dtype has been checked.
 */
#include "index/index.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_HEADER (100u << 20)

kb_rc kb_model_corrupt(kb_err *err, const char *path)
{
    return kb_err_set(err, KB_ERR_MODEL,
                      "model '%s' is truncated or corrupt; run 'kb model fetch' or set KB_MODEL_DIR",
                      path);
}

static size_t dtype_size(kb_st_dtype d)
{
    switch (d) {
    case KB_ST_F32: return 4;
    case KB_ST_F16: case KB_ST_BF16: return 2;
    case KB_ST_I64: return 8;
    default: return 0;
    }
}

static kb_st_dtype dtype_parse(const char *s)
{
    if (!strcmp(s, "F32")) return KB_ST_F32;
    if (!strcmp(s, "F16")) return KB_ST_F16;
    if (!strcmp(s, "BF16")) return KB_ST_BF16;
    if (!strcmp(s, "I64")) return KB_ST_I64;
    return KB_ST_OTHER;
}

/* A JSON number that is a non-negative integer below 2^53. */
static int get_size(const cJSON *j, size_t *out)
{
    if (!cJSON_IsNumber(j))
        return -1;
    double v = j->valuedouble;
    if (v < 0 || v > 9007199254740992.0 || v != (double)(uint64_t)v)
        return -1;
    *out = (size_t)v;
    return 0;
}

static int by_offset(const void *a, const void *b)
{
    const kb_st_tensor *x = a, *y = b;
    const char *px = x->data, *py = y->data;
    return px < py ? -1 : px > py;
}

/* Parses and checks the header; fills st->tensors. -1 on any defect. */
static int parse_header(kb_safetensors *st, const char *hdr, size_t hlen,
                        const char *data, size_t dlen)
{
    cJSON *root = cJSON_ParseWithLength(hdr, hlen);
    int ret = -1;
    if (!cJSON_IsObject(root))
        goto out;
    size_t n = 0;
    for (cJSON *e = root->child; e; e = e->next)
        n++;
    st->tensors = calloc(n ? n : 1, sizeof *st->tensors);
    if (!st->tensors)
        goto out;
    for (cJSON *e = root->child; e; e = e->next) {
        if (e->string && !strcmp(e->string, "__metadata__"))
            continue;
        if (!e->string || !cJSON_IsObject(e))
            goto out;
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) ||
            cJSON_GetArraySize(off) != 2)
            goto out;
        kb_st_tensor *t = &st->tensors[st->n];
        t->dtype = dtype_parse(dt->valuestring);
        size_t esize = dtype_size(t->dtype);
        int nd = cJSON_GetArraySize(sh);
        if (!esize || nd > KB_ST_MAX_DIMS)
            goto out;
        size_t count = 1;
        for (int i = 0; i < nd; i++) {
            size_t d;
            if (get_size(cJSON_GetArrayItem(sh, i), &d) != 0)
                goto out;
            if (d && count > SIZE_MAX / d)
                goto out;
            count *= d;
            t->shape[i] = d;
        }
        t->ndim = nd;
        size_t begin, end;
        if (get_size(cJSON_GetArrayItem(off, 0), &begin) != 0 ||
            get_size(cJSON_GetArrayItem(off, 1), &end) != 0 ||
            begin > end || end > dlen || count > SIZE_MAX / esize ||
            end - begin != count * esize)
            goto out;
        t->data = data + begin;
        t->nbytes = end - begin;
        /* the encoder reads these as arrays of their type */
        if ((uintptr_t)t->data % esize)
            goto out;
        t->name = kb_strdup(e->string);
        if (!t->name)
            goto out;
        st->n++;
    }
    /* tensors must not overlap */
    kb_st_tensor *sorted = malloc((st->n ? st->n : 1) * sizeof *sorted);
    if (!sorted)
        goto out;
    memcpy(sorted, st->tensors, st->n * sizeof *sorted);
    qsort(sorted, st->n, sizeof *sorted, by_offset);
    ret = 0;
    for (size_t i = 1; i < st->n; i++) {
        const char *prev_end = (const char *)sorted[i - 1].data + sorted[i - 1].nbytes;
        if ((const char *)sorted[i].data < prev_end)
            ret = -1;
    }
    free(sorted);
out:
    cJSON_Delete(root);
    return ret;
}

kb_rc kb_st_open(const char *path, kb_safetensors *st, kb_err *err)
{
    memset(st, 0, sizeof *st);
    kb_rc rc = KB_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kb_err_set(err, KB_ERR_MODEL,
                          "cannot open model '%s': %s; run 'kb model fetch' or set KB_MODEL_DIR",
                          path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < 8) {
        rc = kb_model_corrupt(err, path);
        goto out;
    }
    st->size = (size_t)sb.st_size;
    st->map = mmap(NULL, st->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (st->map == MAP_FAILED) {
        st->map = NULL;
        rc = kb_err_set(err, KB_ERR_MODEL, "cannot map model '%s': %s", path,
                        strerror(errno));
        goto out;
    }
    const unsigned char *p = st->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | p[i];
    if (hlen < 2 || hlen > MAX_HEADER || hlen > st->size - 8 ||
        parse_header(st, (const char *)p + 8, (size_t)hlen,
                     (const char *)p + 8 + hlen, st->size - 8 - (size_t)hlen) != 0) {
        rc = kb_model_corrupt(err, path);
        goto out;
    }
    st->path = kb_strdup(path);
    if (!st->path)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
out:
    close(fd);
    if (rc != KB_OK)
        kb_st_close(st);
    return rc;
}

void kb_st_close(kb_safetensors *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->n; i++)
        free(st->tensors[i].name);
    free(st->tensors);
    if (st->map)
        munmap(st->map, st->size);
    free(st->path);
    memset(st, 0, sizeof *st);
}

const kb_st_tensor *kb_st_get(const kb_safetensors *st, const char *name)
{
    for (size_t i = 0; i < st->n; i++)
        if (!strcmp(st->tensors[i].name, name))
            return &st->tensors[i];
    return NULL;
}
