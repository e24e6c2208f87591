/* http-scan.h: where HTTP/1.x request heads end, for zero-code requests (requests.c). A head ends
 * with an empty line; its terminator "\r\n\r\n" may be cut by the end of a read, so the scan
 * carries how much of one the previous read ended with. A pure function, so that
 * tests/unit/test-http-scan.c can check it against the byte-by-byte rule. */
#ifndef D9_HTTP_SCAN_H
#define D9_HTTP_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <emmintrin.h>

/* One byte of the rule: m bytes of "\r\n\r\n" seen, then c; returns how many now (4: a whole
 * terminator). A mismatch falls back to a lone CR, the only prefix that can restart there. */
static inline unsigned d9__http_step(unsigned m, uint8_t c)
{
	static const uint8_t term[4] = { '\r', '\n', '\r', '\n' };

	return c == term[m] ? m + 1 : c == '\r';
}

/* One block of d9__http_scan: the 16 bytes at b + at, of which those from at + skip on are new
 * (the last block of a read is loaded ending at its end and overlaps the one before). */
static inline __attribute__((always_inline)) void d9__http_block(const uint8_t *b, size_t at,
	unsigned skip, uint32_t *plf, uint32_t *pcr, size_t *start, size_t *last, uint64_t *count)
{
	__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(b + at));
	uint32_t lf = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('\n'))) >> skip;
	uint32_t cr = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('\r'))) >> skip;
	uint32_t l = lf << 16 | *plf, c = cr << 16 | *pcr;
	size_t k = at + skip;

	/* bit 16 + q: a terminator ends at k + q */
	for (uint32_t t = (l & c << 1 & l << 2 & c << 3) >> 16; t; t &= t - 1) {
		size_t j = k + (size_t)__builtin_ctz(t);
		if (j >= *start + 3) {
			++*count;
			*last = j;
			*start = j + 1;
		}
	}
	*plf = lf;
	*pcr = cr;
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
	/* The rest, 16 bytes at a time (SSE2, every x86-64 has it): a block's CR and LF bits, with
	 * the previous block's below them, give at once every position where a terminator ends
	 * (LF, CR one before, LF two before, CR three before), its start at or past i; found in
	 * order, one that overlaps the previous match is skipped, as byte by byte. The last block
	 * is loaded ending at n and shifted to its place: no byte past n is read. Measured
	 * natively against the 4-byte-step (Horspool) search it replaced: a 446-byte browser head
	 * 226 -> 38 ns, a 39-byte curl head 10 -> 6 ns (about as many instructions: agent/COST.md
	 * 21). */
	if (n - i >= 16) {
		uint32_t plf = 0, pcr = 0; /* the block before, none before i */
		size_t start = i, k = i;
		for (; k + 16 <= n; k += 16)
			d9__http_block(b, k, 0, &plf, &pcr, &start, &last, count);
		if (k < n)
			d9__http_block(b, n - 16, (unsigned)(k - (n - 16)), &plf, &pcr, &start, &last,
				count);
		/* the state after the last bytes, as the rule leaves it: from none, over the bytes
		 * past the last match, of which only the last three can begin a terminator */
		i = n - start > 3 ? n - 3 : start;
	}
	/* a read of fewer than 16 bytes, or the last (at most 3) after the blocks: byte by byte */
	for (; i < n; i++)
		m = d9__http_byte(m, b, i, count, &last);
	*m_io = (uint8_t)m;
	*since = last == (size_t)-1 ? *since + n : n - last - 1;
}

#endif
