/* banned.h - functions kb does not use (git's banned.h): each has a safer,
 * length-aware replacement (kb_buf_printf, snprintf, kb_parse_long, ...).
 * Included into every translation unit by the Makefile. */
#ifndef KB_BANNED_H
#define KB_BANNED_H

/* the real declarations first, so the macros below only catch uses */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BANNED(func) sorry_##func##_is_banned_in_kb

#undef strcpy
#define strcpy(x, y) BANNED(strcpy)
#undef strcat
#define strcat(x, y) BANNED(strcat)
#undef sprintf
#define sprintf(...) BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) BANNED(vsprintf)
#undef gets
#define gets(x) BANNED(gets)
#undef atoi
#define atoi(x) BANNED(atoi)

#endif
