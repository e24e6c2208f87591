/* gen-twin-modules.c: writes an unsealed segment of a dead process (pid 4000000) whose module map
 * holds the same library under two paths at the same place, and one stack in it: what a
 * hot-reloaded plugin or a library reached through two paths (/lib vs /usr/lib) looks like. The
 * next process started on that trace path recovers the segment and symbolizes it; libdw once
 * freed the first module when the second was reported, and the compressor crashed the host.
 * usage: gen-twin-modules OUT.active PATH_A PATH_B START END OFFSET (numbers in hex) */
#include "d9-format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	static uint8_t buf[1 << 16];
	struct d9_wbuf w;
	struct d9_header h;

	if (argc != 7) {
		fprintf(stderr, "usage: gen-twin-modules OUT PATH_A PATH_B START END OFFSET\n");
		return 2;
	}
	uint64_t start = strtoull(argv[4], NULL, 16), end = strtoull(argv[5], NULL, 16);
	uint64_t off = strtoull(argv[6], NULL, 16);
	size_t n = d9_prefix_encode(buf, sizeof(buf));
	d9_wbuf_init(&w, buf + n, sizeof(buf) - n);
	memset(&h, 0, sizeof(h));
	h.major = D9_FORMAT_MAJOR;
	h.minor = D9_FORMAT_MINOR;
	h.pid = 4000000;
	h.ppid = 1;
	h.ticks_per_sec = 1000000000;
	h.writer = "gen-twin-modules";
	h.process = h.cmdline = "x";
	h.cmdline_len = 1;
	h.hostname = "h";
	h.boot_id = "b";
	if (d9_header_write(&w, &h))
		return 1;
	uint8_t *c = d9_chunk_open(&w, D9_CHUNK_DEFS);
	d9_def_string(&w, 1, argv[2], strlen(argv[2]));
	d9_def_string(&w, 2, argv[3], strlen(argv[3]));
	d9_def_module(&w, 1, 1, start, end, off, NULL, 0);
	d9_def_module(&w, 2, 2, start, end, off, NULL, 0);
	uint64_t frame = start + (end - start) / 2;
	d9_def_stack(&w, 1, &frame, 1);
	if (d9_chunk_close(&w, c))
		return 1;
	FILE *f = fopen(argv[1], "wb");
	if (!f || fwrite(buf, 1, (size_t)(w.p - buf), f) != (size_t)(w.p - buf) || fclose(f))
		return 1;
	return 0;
}
