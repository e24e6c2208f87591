/* test-http-scan.c: preload/http-scan.h's scan for the ends of HTTP request heads (16-byte
 * blocks of LF bits, the four bytes that end at each compared; byte by byte for short reads)
 * against the rule it implements, byte by byte: "\r\n\r\n" ends a head, a mismatch falls back
 * to a lone CR, a terminator may be cut by the end of a read. Random inputs, mostly CR and LF,
 * cut into random reads, short and long; and a pipelined pair of real heads cut at every byte. */
#include "../../preload/http-scan.h"
#include "t.h"

#include <stdlib.h>
#include <string.h>

/* The rule: the scanner requests.c used before, one byte at a time. */
static void by_byte(uint8_t *m_io, uint64_t *count, uint64_t *since, const uint8_t *b, size_t n)
{
	static const char term[4] = { '\r', '\n', '\r', '\n' };
	unsigned m = *m_io;
	size_t last = (size_t)-1;

	for (size_t i = 0; i < n; i++) {
		if (b[i] == (uint8_t)term[m]) {
			if (++m == 4) {
				++*count;
				last = i;
				m = 0;
			}
		} else {
			m = b[i] == '\r';
		}
	}
	*m_io = (uint8_t)m;
	*since = last == (size_t)-1 ? *since + n : n - last - 1;
}

/* Both scans over b cut at the given points; fails at the first read where they differ. */
static void compare(const uint8_t *b, size_t n, const size_t *cuts, size_t ncuts)
{
	uint8_t m1 = 0, m2 = 0;
	uint64_t c1 = 0, c2 = 0, s1 = 0, s2 = 0;
	size_t at = 0;

	for (size_t k = 0; k <= ncuts; k++) {
		size_t end = k < ncuts ? cuts[k] : n;
		d9__http_scan(&m1, &c1, &s1, b + at, end - at);
		by_byte(&m2, &c2, &s2, b + at, end - at);
		if (m1 != m2 || c1 != c2 || s1 != s2)
			T_FAIL("read %zu of [%zu, %zu) of a %zu-byte input: scan m %u count %llu since "
				"%llu, by byte m %u count %llu since %llu", k, at, end, n, m1,
				(unsigned long long)c1, (unsigned long long)s1, m2,
				(unsigned long long)c2, (unsigned long long)s2);
		at = end;
	}
}

/* rounds random inputs of up to max bytes (mostly CR and LF), cut into up to 8 random reads */
static void random_rounds(unsigned seed, int rounds, size_t max)
{
	static const uint8_t alpha[] = { '\r', '\n', '\r', '\n', 'a', ' ' };
	uint8_t b[1024];
	size_t cuts[8];

	srand(seed);
	for (int round = 0; round < rounds; round++) {
		size_t n = (size_t)rand() % max;
		for (size_t i = 0; i < n; i++)
			b[i] = alpha[rand() % (int)sizeof(alpha)];
		size_t ncuts = n ? (size_t)rand() % 8 : 0;
		for (size_t k = 0; k < ncuts; k++)
			cuts[k] = (size_t)rand() % (n + 1);
		/* sorted: the reads follow each other */
		for (size_t k = 1; k < ncuts; k++)
			for (size_t j = k; j > 0 && cuts[j - 1] > cuts[j]; j--) {
				size_t x = cuts[j];
				cuts[j] = cuts[j - 1];
				cuts[j - 1] = x;
			}
		compare(b, n, cuts, ncuts);
	}
}

TEST(random_inputs_and_reads)
{
	random_rounds(14, 200000, 96);
}

/* reads of 16 bytes and more take the 16-byte blocks, the last one overlapping */
TEST(random_long_reads)
{
	random_rounds(17, 20000, 1024);
}

TEST(pipelined_heads_cut_anywhere)
{
	const char *h = "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /bb?q=1 HTTP/1.1\r\nHost: x\r\n"
			"Accept: */*\r\n\r\n";
	size_t n = strlen(h);

	for (size_t c1 = 0; c1 <= n; c1++)
		for (size_t c2 = c1; c2 <= n; c2++) {
			size_t cuts[2] = { c1, c2 };
			compare((const uint8_t *)h, n, cuts, 2);
		}
	uint8_t m = 0;
	uint64_t count = 0, since = 0;
	d9__http_scan(&m, &count, &since, (const uint8_t *)h, n);
	T_EQ(count, 2);
	T_EQ(since, 0);
	T_EQ(m, 0);
}

/* The state a long read ends in (its last three bytes, past its last match), and long reads that
 * begin with a terminator the read before began: each tail below after 20 filler bytes, read
 * whole and cut before each of its last four bytes, then continued by "\r\n\r\n" and filler. */
TEST(long_reads_tails_and_continuations)
{
	static const char *const tails[] = { "", "\r", "\r\n", "\r\n\r", "\r\n\r\n",
		"\r\n\r\n\r", "\r\n\r\n\r\n", "\r\n\r\n\r\n\r", "\n\r\n\r", "\r\r\n\r",
		"\r\n\r\n\r\n\r\n" };
	uint8_t b[64];

	for (size_t t = 0; t < sizeof(tails) / sizeof(tails[0]); t++) {
		size_t n = 20;
		memset(b, 'a', n);
		memcpy(b + n, tails[t], strlen(tails[t]));
		n += strlen(tails[t]);
		memcpy(b + n, "\r\n\r\n", 4);
		memset(b + n + 4, 'b', 17);
		for (size_t back = 0; back <= 4; back++) {
			size_t cuts[1] = { n - back };
			compare(b, n + 21, cuts, 1);
		}
	}
}

int main(int argc, char **argv)
{
	return t_main(argc, argv);
}
