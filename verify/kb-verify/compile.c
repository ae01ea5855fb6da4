/* compile.c - NVRTC: a candidate or reference compiled in process for the
 * device's architecture, the compile cache for references, and ptxas's
 * report (registers, shared memory, stack, spills) per kernel. */
#include "verify/kb-verify/verify_int.h"

#include <elf.h>
#include <math.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KBV_CUDA_HOME
#define KBV_CUDA_HOME "/usr/local/cuda"
#endif

void kbv_compiled_release(kbv_compiled *c)
{
    free(c->log);
    free(c->cubin);
    memset(c, 0, sizeof *c);
}

static const char *cuda_home(void)
{
    const char *h = getenv("CUDA_HOME");
    return h && *h ? h : KBV_CUDA_HOME;
}

/* Where the cubin of key lives. Caller frees; NULL out of memory. */
static char *cache_path(const kbv_opts *o, const char *key)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc;
    const char *dir = o->cache_dir ? o->cache_dir : getenv("KB_VERIFY_CACHE");
    if (dir && *dir) {
        rc = kb_buf_printf(&b, "%s/%s.cubin", dir, key);
    } else {
        const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
        if (x && *x)
            rc = kb_buf_printf(&b, "%s/kb/verify/%s.cubin", x, key);
        else
            rc = kb_buf_printf(&b, "%s/.cache/kb/verify/%s.cubin",
                               h ? h : "/tmp", key);
    }
    return kb_buf_finish(&b, rc);
}

/* A cached cubin at cpath into out; returns 1 if there was one. */
static int cache_lookup(const char *cpath, kbv_compiled *out)
{
    kb_buf bin;
    kb_buf_init(&bin, 0);
    if (kb_read_file(cpath, 64u << 20, &bin, NULL) == KB_OK && bin.len > 0) {
        out->ok = 1;
        out->cached = 1;
        out->cubin_len = bin.len;
        out->cubin = kb_buf_detach(&bin);
        out->log = kb_strdup("");
        return 1;
    }
    kb_buf_release(&bin);
    return 0;
}

static void cache_store(char *cpath, const kbv_compiled *c)
{
    char *slash = strrchr(cpath, '/');
    if (slash) {
        *slash = '\0';
        kb_mkdirs(cpath, NULL);
        *slash = '/';
    }
    kb_write_file_atomic(cpath, c->cubin, c->cubin_len, NULL);
}

/* NVRTC itself: the log always, the cubin when it compiled. */
static void nvrtc_run(const char *src, const char *name, const char *const *opts,
                      int nopts, kbv_compiled *out)
{
    nvrtcProgram prog = NULL;
    nvrtcResult r = nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        out->log = kb_strdup(nvrtcGetErrorString(r));
        return;
    }
    nvrtcResult cr = nvrtcCompileProgram(prog, nopts, opts);
    size_t ln = 0;
    nvrtcGetProgramLogSize(prog, &ln);
    out->log = calloc(1, ln + 1);
    if (out->log && ln)
        nvrtcGetProgramLog(prog, out->log);
    if (cr == NVRTC_SUCCESS) {
        size_t cn = 0;
        if (nvrtcGetCUBINSize(prog, &cn) == NVRTC_SUCCESS && cn > 0) {
            out->cubin = malloc(cn);
            if (out->cubin && nvrtcGetCUBIN(prog, out->cubin) == NVRTC_SUCCESS) {
                out->cubin_len = cn;
                out->ok = 1;
            }
        }
    }
    nvrtcDestroyProgram(&prog);
}

void kbv_compile(const kbv_opts *o, const char *src, const char *name,
                 const char *arch, int use_cache, kbv_compiled *out)
{
    memset(out, 0, sizeof *out);
    double t0 = kb_now_ms();
    kb_buf opt_arch, opt_inc, key;
    kb_buf_init(&opt_arch, 0);
    kb_buf_init(&opt_inc, 0);
    kb_buf_init(&key, 0);
    char *cpath = NULL;
    kb_rc rc = kb_buf_printf(&opt_arch, "--gpu-architecture=%s", arch);
    if (rc == KB_OK)
        rc = kb_buf_printf(&opt_inc, "--include-path=%s/include", cuda_home());
    if (rc != KB_OK) {
        out->log = kb_strdup("out of memory: NVRTC was not run");
        goto out;
    }
    const char *opts[] = { opt_arch.data, opt_inc.data, "--std=c++17",
                           "--ptxas-options=-v", "-default-device" };
    /* without a key (out of memory) the cache is passed by */
    if (use_cache &&
        kb_buf_printf(&key, "%s\n%s\n%s\n", arch, opt_inc.data, src) == KB_OK) {
        char hex[65];
        kb_sha256_hex(key.data, key.len, hex);
        cpath = cache_path(o, hex);
        if (cpath && cache_lookup(cpath, out))
            goto out;
    }
    nvrtc_run(src, name, opts, 5, out);
    if (out->ok && cpath)
        cache_store(cpath, out);
out:
    out->ms = kb_now_ms() - t0;
    free(cpath);
    kb_buf_release(&opt_arch);
    kb_buf_release(&opt_inc);
    kb_buf_release(&key);
}

/* "N bytes stack frame, N bytes spill stores, N bytes spill loads" */
static void ptxas_stack(cJSON *cur, const char *line)
{
    long st = 0, ss = 0, sl = 0;
    const char *s0 = line;
    while (*s0 == ' ' || *s0 == '\t')
        s0++;
    st = strtol(s0, NULL, 10);
    const char *a = strstr(line, "stack frame, ");
    if (a)
        ss = strtol(a + 13, NULL, 10);
    const char *b = strstr(line, "spill stores, ");
    if (b)
        sl = strtol(b + 14, NULL, 10);
    cJSON_AddNumberToObject(cur, "stack_bytes", (double)st);
    cJSON_AddNumberToObject(cur, "spill_store_bytes", (double)ss);
    cJSON_AddNumberToObject(cur, "spill_load_bytes", (double)sl);
}

/* "Used N registers, ..., N bytes smem" (q points at "Used ") */
static void ptxas_used(cJSON *cur, const char *line, const char *q)
{
    long regs = strtol(q + 5, NULL, 10);
    cJSON_AddNumberToObject(cur, "registers", (double)regs);
    const char *sm = strstr(line, "bytes smem");
    long smem = 0;
    if (sm) {
        const char *s1 = sm;
        while (s1 > line && s1[-1] == ' ')
            s1--;
        while (s1 > line && s1[-1] >= '0' && s1[-1] <= '9')
            s1--;
        smem = strtol(s1, NULL, 10);
    }
    cJSON_AddNumberToObject(cur, "shared_static_bytes", (double)smem);
}

/* ptxas -v lines, per kernel: registers, shared, stack, spills. */
static cJSON *ptxas_kernels(const char *log)
{
    static const char entry[] = "Compiling entry function '";
    cJSON *arr = cJSON_CreateArray();
    cJSON *cur = NULL;
    for (const char *p = log; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char *line = kb_strndup(p, len);
        const char *q;
        if ((q = strstr(line, entry))) {
            q += strlen(entry);
            const char *end = strchr(q, '\'');
            char *nm = kb_strndup(q, end ? (size_t)(end - q) : strlen(q));
            cur = cJSON_CreateObject();
            cJSON_AddStringToObject(cur, "name", nm);
            cJSON_AddItemToArray(arr, cur);
            free(nm);
        } else if (cur && strstr(line, "bytes stack frame")) {
            ptxas_stack(cur, line);
        } else if (cur && (q = strstr(line, "Used "))) {
            ptxas_used(cur, line, q);
        }
        free(line);
        p = e ? e + 1 : NULL;
    }
    return arr;
}

cJSON *kbv_compile_json(const kbv_compiled *c, const char *arch)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "ok", c->ok);
    cJSON_AddStringToObject(o, "arch", arch);
    cJSON_AddNumberToObject(o, "ms", round(c->ms * 100) / 100);
    cJSON_AddBoolToObject(o, "cached", c->cached);
    cJSON_AddStringToObject(o, "log", c->log ? c->log : "");
    cJSON_AddItemToObject(o, "kernels", ptxas_kernels(c->log));
    return o;
}

/* Section header i of the ELF image img (len bytes) into *out; 0, or -1
 * past the image's end. */
static int elf_section(const unsigned char *img, size_t len,
                       const Elf64_Ehdr *eh, size_t i, Elf64_Shdr *out)
{
    if (i >= eh->e_shnum || eh->e_shoff > len ||
        i >= (len - eh->e_shoff) / sizeof *out)
        return -1;
    memcpy(out, img + eh->e_shoff + i * sizeof *out, sizeof *out);
    return 0;
}

/* An ELF image: its bytes and its header. */
typedef struct {
    const unsigned char *img;
    size_t len;
    Elf64_Ehdr eh;
} elf_image;

/* A symbol the walk keeps (see cubin_symbols). */
typedef int (*elf_pick)(const elf_image *e, const Elf64_Sym *y);

/* The names of the symbols of every symbol table in c's cubin that pick
 * keeps, as a JSON array; NULL if it is no ELF image this can read (or
 * out of memory). Every offset and size is checked against the image.
 * Caller frees. */
static cJSON *cubin_symbols(const kbv_compiled *c, elf_pick pick)
{
    elf_image e = { .img = c->cubin, .len = c->cubin_len };
    if (!e.img || e.len < sizeof e.eh)
        return NULL;
    memcpy(&e.eh, e.img, sizeof e.eh);
    if (memcmp(e.eh.e_ident, ELFMAG, SELFMAG) != 0 || e.eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        e.eh.e_shentsize != sizeof(Elf64_Shdr))
        return NULL;
    cJSON *names = cJSON_CreateArray();
    Elf64_Shdr sym, str;
    for (size_t i = 0; names && i < e.eh.e_shnum; i++) {
        if (elf_section(e.img, e.len, &e.eh, i, &sym) != 0)
            break;
        if (sym.sh_type != SHT_SYMTAB || elf_section(e.img, e.len, &e.eh, sym.sh_link, &str) ||
            sym.sh_offset > e.len || sym.sh_size > e.len - sym.sh_offset ||
            str.sh_offset > e.len || str.sh_size > e.len - str.sh_offset ||
            sym.sh_entsize != sizeof(Elf64_Sym))
            continue;
        const char *strs = (const char *)e.img + str.sh_offset;
        for (size_t k = 0; k < sym.sh_size / sizeof(Elf64_Sym); k++) {
            Elf64_Sym y;
            memcpy(&y, e.img + sym.sh_offset + k * sizeof y, sizeof y);
            if (y.st_name >= str.sh_size ||
                !memchr(strs + y.st_name, '\0', str.sh_size - y.st_name) || !pick(&e, &y))
                continue;
            cJSON_AddItemToArray(names, cJSON_CreateString(strs + y.st_name));
        }
    }
    return names;
}

/* a kernel: a global function marked as a CUDA entry (0x10) */
static int is_entry(const elf_image *e, const Elf64_Sym *y)
{
    (void)e;
    return ELF64_ST_TYPE(y->st_info) == STT_FUNC &&
           ELF64_ST_BIND(y->st_info) == STB_GLOBAL && (y->st_other & 0x10);
}

/* a variable in module-scope device memory (.nv.global, .nv.global.init):
 * what a kernel writes there outlives the launch */
static int is_device_global(const elf_image *e, const Elf64_Sym *y)
{
    Elf64_Shdr sh, names;
    if (ELF64_ST_TYPE(y->st_info) != STT_OBJECT ||
        elf_section(e->img, e->len, &e->eh, y->st_shndx, &sh) != 0 ||
        elf_section(e->img, e->len, &e->eh, e->eh.e_shstrndx, &names) != 0 ||
        names.sh_offset > e->len || sh.sh_name >= names.sh_size ||
        names.sh_size > e->len - names.sh_offset)
        return 0;
    const char *n = (const char *)e->img + names.sh_offset + sh.sh_name;
    size_t left = names.sh_size - sh.sh_name;
    return left > 10 && strncmp(n, ".nv.global", 10) == 0;
}

cJSON *kbv_cubin_kernels(const kbv_compiled *c)
{
    return cubin_symbols(c, is_entry);
}

cJSON *kbv_cubin_globals(const kbv_compiled *c)
{
    return cubin_symbols(c, is_device_global);
}
