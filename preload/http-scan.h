/* http-scan.h: where HTTP/1.x request heads end, for zero-code requests (requests.c). A head ends
 * with an empty line; its terminator "\r\n\r\n" may be cut by the end of a read, so the scan
 * carries how much of one the previous read ended with. A pure function, so that
 * tests/unit/test-http-scan.c can check it against the byte-by-byte rule. */
#ifndef D9_HTTP_SCAN_H
#define D9_HTTP_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <emmintrin.h>

/* One byte of the rule: m bytes of "\r\n\r\n" seen, then c; returns how many now (4: a whole
 * terminator). A mismatch falls back to a lone CR, the only prefix that can restart there. */
static inline unsigned d9__http_step(unsigned m, uint8_t c)
{
	static const uint8_t term[4] = { '\r', '\n', '\r', '\n' };

	return c == term[m] ? m + 1 : c == '\r';
}

/* One block of d9__http_scan: the 16 bytes at b + at, of which those from at + skip on are new
 * (the last block of a read is loaded ending at its end and overlaps the one before). Each LF
 * among them that ends "\r\n\r\n" starting at or past *start is a terminator. */
static inline __attribute__((always_inline)) void d9__http_block(const uint8_t *b, size_t at,
	unsigned skip, size_t *start, size_t *last, uint64_t *count)
{
	__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(b + at));
	uint32_t lf = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('\n'))) >> skip;
	size_t k = at + skip;

	for (; lf; lf &= lf - 1) {
		size_t j = k + (size_t)__builtin_ctz(lf);
		uint32_t w;
		if (j < *start + 3)
			continue;
		memcpy(&w, b + j - 3, sizeof(w));
		if (w == ('\r' | '\n' << 8 | '\r' << 16 | (uint32_t)'\n' << 24)) {
			++*count;
			*last = j;
			*start = j + 1;
		}
	}
}

/* One byte of d9__http_scan, b[i], with m bytes of a terminator before it: counts a terminator
 * that ends there; returns the new m. */
static inline unsigned d9__http_byte(unsigned m, const uint8_t *b, size_t i, uint64_t *count,
	size_t *last)
{
	if ((m = d9__http_step(m, b[i])) == 4) {
		++*count;
		*last = i;
		m = 0;
	}
	return m;
}

/* How much of a terminator b[start..n) ends with (0 to 3), n >= 4: the rule's state there. */
static inline unsigned d9__http_tail(const uint8_t *b, size_t n, size_t start)
{
	uint8_t c1 = b[n - 1], c2 = b[n - 2], c3 = b[n - 3];

	if (c1 != '\r')
		return c1 == '\n' && c2 == '\r' && n - 2 >= start ? 2 : 0;
	if (c2 == '\n' && c3 == '\r' && n - 3 >= start)
		return 3;
	return n - 1 >= start;
}

/* Scans b[0..n) for head terminators. *m: how many bytes of a terminator the bytes before ended
 * with (0 to 3), updated; *count: terminators found, added to; *since: bytes since the last
 * terminator's end, updated. */
static inline void d9__http_scan(uint8_t *m_io, uint64_t *count, uint64_t *since,
	const uint8_t *b, size_t n)
{
	unsigned m = *m_io;
	size_t last = (size_t)-1, i = 0;

	/* a terminator the previous read began: byte by byte until it ends or fails */
	for (; i < n && m; i++)
		m = d9__http_byte(m, b, i, count, &last);
	/* The rest, 16 bytes at a time (SSE2, every x86-64 has it): a block's LF bits give the
	 * places where a terminator can end, and the four bytes that end there are compared with
	 * it, its start at or past i; found in order, one that overlaps the previous match is
	 * skipped, as byte by byte. The last block is loaded ending at n and shifted to its place:
	 * no byte past n is read. (A head has a few LFs: one per line.) */
	if (n - i >= 16) {
		size_t start = i, k = i;
		for (; k + 16 <= n; k += 16)
			d9__http_block(b, k, 0, &start, &last, count);
		if (k < n)
			d9__http_block(b, n - 16, (unsigned)(k - (n - 16)), &start, &last, count);
		/* the state after the last bytes, as the rule leaves it: the longest of "\r\n\r",
		 * "\r\n" and "\r" that ends the bytes past the last match (the rule is the search
		 * automaton of "\r\n\r\n", whose state is that prefix's length) */
		m = d9__http_tail(b, n, start);
		i = n;
	}
	/* a read of fewer than 16 bytes: byte by byte */
	for (; i < n; i++)
		m = d9__http_byte(m, b, i, count, &last);
	*m_io = (uint8_t)m;
	*since = last == (size_t)-1 ? *since + n : n - last - 1;
}

#endif
