/* skills.c - the skill library's chunks apart from the documentation
 * (kb_results.skills): which chunks are a skill's, each skill's title and
 * status. */
#include "query/query_int.h"
#include "kb/kb_int.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* The chunks of skills: those of a SKILL.md and of the files beside one
 * in the same source (rtrim(key, its non-slash characters) is a key's
 * folder with its slash), with that folder, by chunk id. CROSS JOIN keeps
 * SQLite to this order - the documents, then their chunks by index: left
 * to itself it scans every chunk, 46 ms on the test corpus against 2. */
#define SKILL_CHUNKS_SQL \
    "SELECT c.id, rtrim(d.key, replace(d.key, '/', '')) FROM documents d" \
    " CROSS JOIN documents s ON s.source_id = d.source_id" \
    "  AND s.key = rtrim(d.key, replace(d.key, '/', '')) || 'SKILL.md'" \
    " CROSS JOIN chunks c ON c.document_id = d.id ORDER BY c.id"
/* Each SKILL.md's folder and its first chunk's heading path, whose first
 * heading is the skill's title: "NAME (STATUS, SPEEDUPx)" (parse_skill.c). */
#define SKILL_TITLES_SQL \
    "SELECT rtrim(d.key, replace(d.key, '/', '')), (SELECT c.heading_path" \
    " FROM chunks c WHERE c.document_id = d.id ORDER BY c.ord LIMIT 1)" \
    " FROM documents d WHERE d.key LIKE '%SKILL.md'"

/* The store keeps its KB's skill chunks until the KB changes. */
#define SKILL_CHUNKS_SLOT "query/skill_chunks"

static void skill_chunks_release(kb_skill_chunks *sc)
{
    for (size_t i = 0; i < sc->nskills; i++) {
        free(sc->skills[i].folder);
        free(sc->skills[i].title);
    }
    free(sc->skills);
    free(sc->ids);
    free(sc->of);
    memset(sc, 0, sizeof *sc);
}

static void skill_chunks_free(void *p)
{
    skill_chunks_release(p);
    free(p);
}

/* The index of folder's skill in sc, added when new; SIZE_MAX out of
 * memory. The chunks come by id, a document's together: the last one
 * found is tried first. */
static size_t skill_index(kb_skill_chunks *sc, const char *folder, size_t *cap)
{
    static const size_t none = (size_t)-1;
    size_t last = sc->n ? sc->of[sc->n - 1] : none;
    if (last != none && strcmp(sc->skills[last].folder, folder) == 0)
        return last;
    for (size_t i = 0; i < sc->nskills; i++)
        if (strcmp(sc->skills[i].folder, folder) == 0)
            return i;
    if (KB_GROW(sc->skills, sc->nskills + 1, *cap) != KB_OK)
        return none;
    kb_skill_info *s = &sc->skills[sc->nskills];
    memset(s, 0, sizeof *s);
    s->status = KB_SKILLS_DRAFT;
    if (!(s->folder = kb_strdup(folder)))
        return none;
    return sc->nskills++;
}

/* A skill's status from its title's "(STATUS, ...)" or "(STATUS)". */
static int title_status(const char *title)
{
    const char *p = strrchr(title, '(');
    if (!p)
        return KB_SKILLS_DRAFT;
    p++;
    size_t n = strcspn(p, ",)");
    if ((n == 8 && strncmp(p, "verified", 8) == 0) ||
        (n == 8 && strncmp(p, "approved", 8) == 0))
        return KB_SKILLS_FIRST;
    return n == 7 && strncmp(p, "retired", 7) == 0 ? KB_SKILLS_RETIRED : KB_SKILLS_DRAFT;
}

/* Each skill's title and status, from its SKILL.md's first heading. */
static kb_rc skill_titles_load(kb_store *store, kb_skill_chunks *sc, kb_err *err)
{
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store, SKILL_TITLES_SQL, &st, err);
    int step = SQLITE_DONE;
    while (rc == KB_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *folder = (const char *)sqlite3_column_text(st, 0);
        const char *hp = (const char *)sqlite3_column_text(st, 1);
        kb_skill_info *s = NULL;
        for (size_t i = 0; folder && i < sc->nskills && !s; i++)
            if (strcmp(sc->skills[i].folder, folder) == 0)
                s = &sc->skills[i];
        cJSON *arr = s && hp ? cJSON_Parse(hp) : NULL;
        const cJSON *first = cJSON_GetArrayItem(arr, 0);
        if (s && cJSON_IsString(first) && !s->title) {
            if (!(s->title = kb_strdup(first->valuestring)))
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            else
                s->status = title_status(s->title);
        }
        cJSON_Delete(arr);
    }
    if (rc == KB_OK && step != SQLITE_DONE)
        rc = kb_store_db_error(store, err, "find the skills' titles");
    sqlite3_finalize(st);
    return rc;
}

static kb_rc skill_chunks_load(kb_store *store, kb_skill_chunks *sc, kb_err *err)
{
    memset(sc, 0, sizeof *sc);
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store, SKILL_CHUNKS_SQL, &st, err);
    size_t cap = 0, capof = 0, capskills = 0;
    int step = SQLITE_DONE;
    while (rc == KB_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
        if (KB_GROW(sc->ids, sc->n + 1, cap) != KB_OK ||
            KB_GROW(sc->of, sc->n + 1, capof) != KB_OK) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            break;
        }
        size_t k = skill_index(sc, (const char *)sqlite3_column_text(st, 1), &capskills);
        if (k == (size_t)-1) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            break;
        }
        sc->of[sc->n] = k;
        sc->ids[sc->n++] = sqlite3_column_int64(st, 0);
    }
    if (rc == KB_OK && step != SQLITE_DONE)
        rc = kb_store_db_error(store, err, "find the skills' chunks");
    sqlite3_finalize(st);
    if (rc == KB_OK)
        rc = skill_titles_load(store, sc, err);
    if (rc != KB_OK)
        skill_chunks_release(sc);
    return rc;
}

kb_rc kb_skill_chunks_get(kb_store *store, const kb_skill_chunks **out, kb_err *err)
{
    long long version = 0, changes = 0;
    kb_rc rc = kb_store_version(store, &version, &changes, err);
    if (rc != KB_OK)
        return rc;
    kb_skill_chunks *sc = kb_store_slot_get(store, SKILL_CHUNKS_SLOT);
    if (sc && sc->data_version == version && sc->changes == changes) {
        *out = sc;
        return KB_OK;
    }
    if (!(sc = malloc(sizeof *sc)))
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if ((rc = skill_chunks_load(store, sc, err)) != KB_OK) {
        free(sc);
        return rc;
    }
    sc->data_version = version;
    sc->changes = changes;
    if ((rc = kb_store_slot_set(store, SKILL_CHUNKS_SLOT, sc, skill_chunks_free, err)) != KB_OK)
        return rc;
    *out = sc;
    return KB_OK;
}

const kb_skill_info *kb_skill_of(const kb_skill_chunks *sc, int64_t id)
{
    size_t lo = 0, hi = sc->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sc->ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < sc->n && sc->ids[lo] == id ? &sc->skills[sc->of[lo]] : NULL;
}
