/* json.h: small JSON writing helpers shared by the analyzer's machine outputs. */
#ifndef D9_ANALYZE_JSON_H
#define D9_ANALYZE_JSON_H
#include <stddef.h>
#include <stdio.h>

/* Writes s[0..n) as a JSON string (quotes included), escaping controls and invalid UTF-8 bytes
 * as \u00XX so any input yields valid JSON. */
void d9__json_str(FILE *f, const char *s, size_t n);
void d9__json_cstr(FILE *f, const char *s);
#endif
