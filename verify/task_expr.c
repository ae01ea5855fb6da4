/* task_expr.c - size expressions: the arithmetic a task (and a
 * candidate's header) writes its sizes, launches and tolerances in,
 * evaluated over named values, integers kept apart from reals. */
#include "verify/verify.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ expressions */

/* A recursive-descent parser over values that know whether they are
 * integers (from integer literals, dims and integer operations) or reals
 * (a literal with '.' or an exponent, sqrt, a real operand). */
typedef struct {
    double v;
    int real;
} num;

typedef struct {
    const char *s, *p;
    const char *const *names;
    const double *values;
    size_t n;
    kb_err *err;
    kb_rc rc;
    int depth;          /* nesting of atoms: parentheses, calls, signs */
} expr_st;

static num e_sum(expr_st *e);

static void e_ws(expr_st *e)
{
    while (isspace((unsigned char)*e->p))
        e->p++;
}

static num e_fail(expr_st *e, const char *what)
{
    if (e->rc == KB_OK)
        e->rc = kb_err_set(e->err, KB_ERR_PARSE, "bad expression '%s': %s",
                           e->s, what);
    return (num){ 0, 0 };
}

static num e_call(expr_st *e, const char *name, size_t len)
{
    num args[2] = { { 0, 0 }, { 0, 0 } };
    int nargs = 0;
    e->p++; /* '(' */
    for (;;) {
        e_ws(e);
        if (nargs == 2)
            return e_fail(e, "too many arguments");
        args[nargs++] = e_sum(e);
        if (e->rc)
            return (num){ 0, 0 };
        e_ws(e);
        if (*e->p == ',') {
            e->p++;
            continue;
        }
        if (*e->p == ')') {
            e->p++;
            break;
        }
        return e_fail(e, "expected ',' or ')'");
    }
    double a = args[0].v, b = args[1].v;
    int real = args[0].real || (nargs == 2 && args[1].real);
#define FN(s) (len == sizeof(s) - 1 && strncmp(name, s, len) == 0)
    if (FN("ceil_div") && nargs == 2) {
        if (b == 0)
            return e_fail(e, "division by zero");
        return (num){ ceil(a / b), 0 };
    }
    if (FN("min") && nargs == 2)
        return (num){ a < b ? a : b, real };
    if (FN("max") && nargs == 2)
        return (num){ a > b ? a : b, real };
    if (FN("sqrt") && nargs == 1)
        return (num){ sqrt(a), 1 };
    if (FN("floor") && nargs == 1)
        return (num){ floor(a), 0 };
    if (FN("ceil") && nargs == 1)
        return (num){ ceil(a), 0 };
#undef FN
    return e_fail(e, "unknown function or wrong number of arguments");
}

static num e_atom_in(expr_st *e);

/* An atom, one level deeper: past KB_EXPR_MAX_DEPTH a parse error, not a
 * stack overflow (200,000 '(' once crashed kb-verify). */
static num e_atom(expr_st *e)
{
    if (e->depth >= KB_EXPR_MAX_DEPTH) {
        if (e->rc == KB_OK)
            e->rc = kb_err_set(e->err, KB_ERR_PARSE, "bad expression '%.40s...': "
                               "nested too deeply (at most %d levels)", e->s,
                               KB_EXPR_MAX_DEPTH);
        return (num){ 0, 0 };
    }
    e->depth++;
    num v = e_atom_in(e);
    e->depth--;
    return v;
}

static num e_atom_in(expr_st *e)
{
    e_ws(e);
    const char *p = e->p;
    if (*p == '(') {
        e->p++;
        num v = e_sum(e);
        e_ws(e);
        if (*e->p != ')')
            return e_fail(e, "expected ')'");
        e->p++;
        return v;
    }
    if (*p == '-') {
        e->p++;
        num v = e_atom(e);
        v.v = -v.v;
        return v;
    }
    if (*p == '+') {
        e->p++;
        return e_atom(e);
    }
    if (isdigit((unsigned char)*p) || *p == '.') {
        char *end = NULL;
        double v = strtod(p, &end);
        if (end == p)
            return e_fail(e, "bad number");
        int real = 0;
        for (const char *q = p; q < end; q++)
            if (*q == '.' || *q == 'e' || *q == 'E')
                real = 1;
        e->p = end;
        return (num){ v, real };
    }
    if (isalpha((unsigned char)*p) || *p == '_') {
        const char *q = p;
        while (isalnum((unsigned char)*q) || *q == '_')
            q++;
        size_t len = (size_t)(q - p);
        e->p = q;
        e_ws(e);
        if (*e->p == '(')
            return e_call(e, p, len);
        for (size_t i = 0; i < e->n; i++)
            if (strlen(e->names[i]) == len && strncmp(e->names[i], p, len) == 0)
                return (num){ e->values[i], e->values[i] != floor(e->values[i]) };
        if (e->rc == KB_OK)
            e->rc = kb_err_set(e->err, KB_ERR_PARSE,
                               "bad expression '%s': unknown name '%.*s'",
                               e->s, (int)len, p);
        return (num){ 0, 0 };
    }
    return e_fail(e, *p ? "unexpected character" : "unexpected end");
}

static num e_prod(expr_st *e)
{
    num v = e_atom(e);
    for (;;) {
        if (e->rc)
            return (num){ 0, 0 };
        e_ws(e);
        char op = *e->p;
        if (op != '*' && op != '/' && op != '%')
            return v;
        e->p++;
        num r = e_atom(e);
        if (e->rc)
            return (num){ 0, 0 };
        int real = v.real || r.real;
        if (op == '*') {
            v.v *= r.v;
        } else if (r.v == 0) {
            return e_fail(e, "division by zero");
        } else if (op == '/') {
            v.v = real ? v.v / r.v : trunc(v.v / r.v);
        } else {
            if (real)
                return e_fail(e, "'%' needs integers");
            v.v = fmod(v.v, r.v);
        }
        v.real = real;
    }
}

static num e_sum(expr_st *e)
{
    num v = e_prod(e);
    for (;;) {
        if (e->rc)
            return (num){ 0, 0 };
        e_ws(e);
        char op = *e->p;
        if (op != '+' && op != '-')
            return v;
        e->p++;
        num r = e_prod(e);
        v.v = op == '+' ? v.v + r.v : v.v - r.v;
        v.real = v.real || r.real;
    }
}

kb_rc kb_expr_eval(const char *expr, const char *const *names,
                   const double *values, size_t n, double *out, kb_err *err)
{
    expr_st e = { expr, expr, names, values, n, err, KB_OK, 0 };
    if (!expr)
        return kb_err_set(err, KB_ERR_PARSE, "missing expression");
    num v = e_sum(&e);
    if (e.rc)
        return e.rc;
    e_ws(&e);
    if (*e.p)
        return kb_err_set(err, KB_ERR_PARSE,
                          "bad expression '%s': unexpected '%s'", expr, e.p);
    *out = v.v;
    return KB_OK;
}

kb_rc kb_task_eval(const kb_task *t, const kb_shape *s, const char *expr,
                   double *out, kb_err *err)
{
    return kb_expr_eval(expr, (const char *const *)t->dims, s->dims, t->ndims,
                        out, err);
}
