/* http-scan.h: where HTTP/1.x request heads end, for zero-code requests (requests.c). A head ends
 * with an empty line; its terminator "\r\n\r\n" may be cut by the end of a read, so the scan
 * carries how much of one the previous read ended with. A pure function, so that
 * tests/unit/test-http-scan.c can check it against the byte-by-byte rule. */
#ifndef D9_HTTP_SCAN_H
#define D9_HTTP_SCAN_H

#include <stddef.h>
#include <stdint.h>

/* One byte of the rule: m bytes of "\r\n\r\n" seen, then c; returns how many now (4: a whole
 * terminator). A mismatch falls back to a lone CR, the only prefix that can restart there. */
static inline unsigned d9__http_step(unsigned m, uint8_t c)
{
	static const uint8_t term[4] = { '\r', '\n', '\r', '\n' };

	return c == term[m] ? m + 1 : c == '\r';
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
	for (; i < n && m; i++) {
		if ((m = d9__http_step(m, b[i])) == 4) {
			++*count;
			last = i;
			m = 0;
		}
	}
	/* Horspool: a window's last byte tells where the next terminator can start, 4 bytes on
	 * past a byte that is neither CR nor LF (most of a head); no terminator, whole or cut by
	 * the read's end, starts at a byte skipped */
	while (i + 4 <= n) {
		uint8_t c = b[i + 3];
		if (c == '\n' && b[i + 2] == '\r' && b[i + 1] == '\n' && b[i] == '\r') {
			++*count;
			last = i + 3;
			i += 4;
		} else {
			i += c == '\n' ? 2 : c == '\r' ? 1 : 4;
		}
	}
	/* the last bytes (fewer than 4): how much of a terminator they begin */
	for (; i < n; i++)
		m = d9__http_step(m, b[i]);
	*m_io = (uint8_t)m;
	*since = last == (size_t)-1 ? *since + n : n - last - 1;
}

#endif
