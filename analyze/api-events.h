/* api-events.h: the application API's events (include/d9.h: Mark, Value, CustomEvent) as the
 * analyzer's outputs show them; cmd-events.c implements them, jsonl and chrome share them. */
#ifndef D9_ANALYZE_API_EVENTS_H
#define D9_ANALYZE_API_EVENTS_H
#include <stdio.h>

struct d9__ev;

/* 1 when ev is a Mark, Value or CustomEvent the trace model resolved (name, schema). */
int d9__api_event(const struct d9__ev *ev);
/* "Mark", "Value", "CustomEvent". */
const char *d9__api_type_name(const struct d9__ev *ev);
/* The mark's or value's name, the custom event's schema name. */
const char *d9__api_name(const struct d9__ev *ev);
/* The keys after the common ones: ,"name":..., then Value: ,"kind":...,"value":...;
 * CustomEvent: ,"fields":{...} (README.md, "jsonl schema"). */
void d9__api_json(FILE *f, const struct d9__ev *ev);
/* A Value's value (a number; an f64 gauge's NaN or infinity as null). */
void d9__api_json_value(FILE *f, const struct d9__ev *ev);
/* A CustomEvent's fields as a JSON object by field name: numbers, strings, bytes in hex. */
void d9__api_json_fields(FILE *f, const struct d9__ev *ev);
#endif
