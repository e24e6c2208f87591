/* json.c: JSON string escaping for the analyzer's outputs; never emits invalid JSON, whatever
 * bytes a (possibly hostile) trace holds. */
#include "json.h"

#include <string.h>

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	unsigned c = s[0];

	if (c < 0x80)
		return 1;
	else if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if (len == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0)))
		return 0; /* overlong or surrogate */
	if (len == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90)))
		return 0;
	return len;
}

void d9__json_str(FILE *f, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;

	fputc('"', f);
	for (size_t i = 0; i < n;) {
		unsigned c = s[i];
		if (c == '"' || c == '\\') {
			fputc('\\', f);
			fputc((int)c, f);
			i++;
		} else if (c == '\n') {
			fputs("\\n", f);
			i++;
		} else if (c == '\t') {
			fputs("\\t", f);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			fprintf(f, "\\u%04x", c);
			i++;
		} else {
			size_t l = utf8_len(s + i, n - i);
			if (l == 0) {
				fprintf(f, "\\u%04x", c); /* stray byte: shown as its Latin-1 code point */
				i++;
			} else {
				fwrite(s + i, 1, l, f);
				i += l;
			}
		}
	}
	fputc('"', f);
}

void d9__json_cstr(FILE *f, const char *s)
{
	d9__json_str(f, s ? s : "", s ? strlen(s) : 0);
}
