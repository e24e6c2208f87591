/* api-demo.c: a program that uses include/d9.h (test-api.sh). It knows nothing of the agent: it
 * runs the same with and without it. `api-demo [N]` makes N rounds of marks, values and custom
 * events and prints one line per call (what the trace must hold, in order); `api-demo hostile`
 * makes absurd calls (NULL pointers, huge names, 10,000 fields, unknown handles, negative
 * lengths) and prints "rejected K": the calls the agent must count as dropped (reason api), then
 * records one good event to show it still works; `api-demo serve N` accepts one loopback
 * connection from a thread of its own, reads N lines from it and answers each, calling
 * d9_request_begin(1000 + i) and d9_request_end(1000 + i, 200 + i) around each answer, and prints
 * one line "request ID STATUS" per request (the API's requests override d9's zero-code guess of
 * the same exchanges). Exits 0. */
#include "../../include/d9.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int normal(int rounds)
{
	static const struct d9_field order_fields[] = {
		{ "id", D9_U64, 0 },
		{ "delta", D9_I64, 0 },
		{ "price", D9_F64, 0 },
		{ "user", D9_STR, 16 },
		{ "blob", D9_BYTES, 8 },
	};
	uint32_t queue = d9_name("queue_len");
	uint32_t served = d9_name("served");
	uint32_t temp = d9_name("temperature");
	uint32_t reload = d9_name("config reload");
	uint32_t order = d9_schema("order", order_fields, 5);
	int64_t total = 0;

	for (int r = 0; r < rounds; r++) {
		d9_mark(reload);
		printf("mark config reload\n");
		d9_gauge(queue, 10 * r - 7);
		printf("gauge queue_len %d\n", 10 * r - 7);
		total += r + 1;
		d9_counter_add(served, r + 1);
		printf("counter served %" PRId64 "\n", total);
		double t = 20.25 + r;
		d9_gauge_f64(temp, t);
		printf("gauge temperature %.17g\n", t);
		char user[64];
		/* every third name is longer than the field's 16 bytes: the trace holds 16 */
		snprintf(user, sizeof(user), r % 3 == 2 ? "user-%d-with-a-long-name" : "user-%d", r);
		uint8_t blob[3] = { (uint8_t)r, 0, 0xff };
		union d9_arg a[5] = { d9_u64(UINT64_MAX - (uint64_t)r), d9_i64(-1000 * r - 1),
			d9_f64(r / 4.0), d9_str(user), d9_bytes(blob, sizeof(blob)) };
		d9_event(order, a, 5);
		printf("event order id=%" PRIu64 " delta=%d price=%.17g user=%.16s blob=%02x00ff\n",
			UINT64_MAX - (uint64_t)r, -1000 * r - 1, r / 4.0, user, r);
	}
	return 0;
}

static int hostile(void)
{
	int rejected = 0;
	size_t big = 1u << 20;
	char *huge = malloc(big + 1);
	struct d9_field *many = calloc(10000, sizeof(*many));

	if (!huge || !many)
		return 1;
	memset(huge, 'x', big);
	huge[big] = 0;
	for (int i = 0; i < 10000; i++)
		many[i] = (struct d9_field){ "f", D9_U64, 0 };

	/* names: each rejected registration is one drop, each use of handle 0 another */
	rejected += d9_name(NULL) == 0;
	rejected += d9_name("") == 0;
	rejected += d9_name(huge) == 0;
	d9_mark(0), rejected++;
	d9_mark(123456), rejected++;
	d9_gauge(UINT32_MAX, 1), rejected++;
	d9_counter_add(99999, 5), rejected++;

	/* schemas */
	struct d9_field bad_type[] = { { "a", 'z', 0 } };
	struct d9_field huge_len[] = { { "a", D9_STR, 0xffffffffu } };
	struct d9_field null_name[] = { { NULL, D9_U64, 0 } };
	struct d9_field dup[] = { { "a", D9_U64, 0 }, { "a", D9_I64, 0 } };
	struct d9_field long_name[] = { { huge, D9_U64, 0 } };
	struct d9_field too_big[] = { { "a", D9_STR, 4096 }, { "b", D9_STR, 4096 } };
	rejected += d9_schema(NULL, bad_type, 1) == 0;
	rejected += d9_schema(huge, bad_type, 1) == 0;
	rejected += d9_schema("s1", many, 10000) == 0;
	rejected += d9_schema("s2", NULL, 3) == 0;
	rejected += d9_schema("s3", bad_type, 1) == 0;
	rejected += d9_schema("s4", huge_len, 1) == 0;
	rejected += d9_schema("s5", null_name, 1) == 0;
	rejected += d9_schema("s6", dup, 2) == 0;
	rejected += d9_schema("s7", long_name, 1) == 0;
	rejected += d9_schema("s8", too_big, 2) == 0;

	/* events */
	struct d9_field ok_fields[] = { { "n", D9_U64, 0 }, { "s", D9_STR, 32 } };
	uint32_t ok = d9_schema("ok", ok_fields, 2);
	union d9_arg a[2] = { d9_u64(1), d9_str("fine") };
	d9_event(0, a, 2), rejected++;
	d9_event(ok + 1000, a, 2), rejected++;
	d9_event(ok, a, 1), rejected++;
	d9_event(ok, a, 10000), rejected++;
	d9_event(ok, NULL, 2), rejected++;
	union d9_arg nul[2] = { d9_u64(2), d9_bytes(NULL, 5) };
	d9_event(ok, nul, 2), rejected++;
	union d9_arg neg[2] = { d9_u64(3), d9_bytes("abc", (size_t)-1) };
	d9_event(ok, neg, 2), rejected++;
	/* still recording: a good event after all that */
	union d9_arg good[2] = { d9_u64(42), d9_str(huge) }; /* cut to 32 bytes */
	d9_event(ok, good, 2);
	printf("rejected %d\n", rejected);
	free(huge);
	free(many);
	return 0;
}

static struct sockaddr_in serve_addr;
static int serve_n;

/* The client: N lines, each answered before the next. */
static void *client(void *arg)
{
	char line[32], reply[32];
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	(void)arg;
	if (fd < 0 || connect(fd, (struct sockaddr *)&serve_addr, sizeof(serve_addr)))
		return NULL;
	for (int i = 0; i < serve_n; i++) {
		int n = snprintf(line, sizeof(line), "req %d\n", i);
		if (write(fd, line, (size_t)n) != n || read(fd, reply, sizeof(reply)) <= 0)
			break;
	}
	close(fd);
	return NULL;
}

static int serve(int n)
{
	socklen_t len = sizeof(serve_addr);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	pthread_t th;
	char buf[64];

	serve_addr.sin_family = AF_INET;
	serve_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	serve_n = n;
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&serve_addr, sizeof(serve_addr)) ||
		listen(lfd, 1) || getsockname(lfd, (struct sockaddr *)&serve_addr, &len) ||
		pthread_create(&th, NULL, client, NULL))
		return 1;
	int fd = accept(lfd, NULL, NULL);
	for (int i = 0; fd >= 0 && i < n; i++) {
		if (read(fd, buf, sizeof(buf)) <= 0)
			break;
		d9_request_begin(1000 + (uint64_t)i);
		if (write(fd, "ok\n", 3) != 3)
			break;
		d9_request_end(1000 + (uint64_t)i, 200 + i);
		printf("request %d %d\n", 1000 + i, 200 + i);
	}
	pthread_join(th, NULL);
	if (fd >= 0)
		close(fd);
	close(lfd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "serve"))
		return serve(atoi(argv[2]));
	if (argc > 1 && !strcmp(argv[1], "hostile"))
		return hostile();
	return normal(argc > 1 ? atoi(argv[1]) : 5);
}
