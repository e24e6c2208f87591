/* test-s3.c: the S3 helpers the agent and the analyzer share (agent/s3common.c): SHA-256 against
 * FIPS 180-4 vectors, fed in uneven pieces; SigV4's URI encoding ('=' as %3D); the key layout;
 * settings and the shared credentials file (a real file); and the trailer's S3 counts (format.c,
 * FORMAT.md section 11) round trip, next to the budget fields they follow. */
#include "../../agent/s3common.c"
#include "d9-format.h"
#include "t.h"

static void hex_of(const void *data, size_t n, size_t piece, char out[65])
{
	struct d9__sha256 s;
	uint8_t sum[32];
	const uint8_t *p = data;

	d9__sha256_init(&s);
	for (size_t off = 0; off < n; off += piece)
		d9__sha256_update(&s, p + off, n - off < piece ? n - off : piece);
	d9__sha256_final(&s, sum);
	d9__sha256_hex(sum, out);
}

TEST(sha256_vectors)
{
	char h[65];
	static const char *abc2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";

	hex_of("", 0, 1, h);
	T_ASSERT(!strcmp(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
	hex_of("abc", 3, 1, h);
	T_ASSERT(!strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
	for (size_t piece = 1; piece <= 64; piece += 7) {
		hex_of(abc2, strlen(abc2), piece, h);
		T_ASSERT(!strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
	}
	/* a million 'a': many blocks, pieces that straddle them */
	char *m = malloc(1000000);
	T_ASSERT(m);
	memset(m, 'a', 1000000);
	hex_of(m, 1000000, 65537, h);
	T_ASSERT(!strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
	hex_of(m, 1000000, 1000000, h);
	T_ASSERT(!strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
	free(m);
}

TEST(uri_encode)
{
	char out[64];

	T_EQ(d9__s3_uri_encode(out, sizeof(out), "d9/env=prod/a b~c_d.e-f", 1), 27);
	T_ASSERT(!strcmp(out, "d9/env%3Dprod/a%20b~c_d.e-f"));
	T_EQ(d9__s3_uri_encode(out, sizeof(out), "pre/2026-11-25/", 0), 19);
	T_ASSERT(!strcmp(out, "pre%2F2026-11-25%2F"));
	/* too small: cap, never an overflow */
	T_EQ(d9__s3_uri_encode(out, 4, "a=b", 1), 4);
	T_EQ(d9__s3_uri_encode(out, 3, "abc", 1), 3);
}

TEST(key_layout)
{
	struct d9__s3_cfg c;
	char key[512];

	memset(&c, 0, sizeof(c));
	strcpy(c.prefix, "prod/env=x");
	/* 2026-11-25T19:06:14Z */
	T_EQ(d9__s3_key(&c, key, sizeof(key), 1795633574000000000ull, "my server", "web/3",
		"c24b6f53-7967", 9098, "12.bin.gz"), 0);
	T_ASSERT(!strcmp(key, "prod/env=x/2026-11-25/1906/my_server/web_3/c24b6f53-7967-9098-12.bin.gz"));
	strcpy(c.service, "api");
	c.prefix[0] = 0;
	T_EQ(d9__s3_key(&c, key, sizeof(key), 0, NULL, "", "", 1, "0.bin"), 0);
	T_ASSERT(!strcmp(key, "1970-01-01/0000/api/unknown/unknown-1-0.bin"));
	T_EQ(d9__s3_key(&c, key, 20, 0, NULL, "", "", 1, "0.bin"), -ENAMETOOLONG);
}

TEST(settings_and_credentials_file)
{
	struct d9__s3_cfg c;
	struct d9__s3_creds cr;
	const char *why;
	char err[256], dir[] = "/tmp/d9-test-s3-XXXXXX", path[300];

	T_ASSERT(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/credentials", dir);
	FILE *f = fopen(path, "w");
	T_ASSERT(f);
	fputs("[default]\naws_access_key_id = A\naws_secret_access_key = B\n\n"
		"# comment\n[ d9 ]\naws_access_key_id=KEY\n  aws_secret_access_key = SECRET \r\n"
		"aws_session_token = TOKEN\n", f);
	fclose(f);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_SESSION_TOKEN");
	unsetenv("D9_S3_BUCKET");
	T_EQ(d9__s3_config_env(&c, &why, 0), 0); /* no bucket: off */
	setenv("D9_S3_BUCKET", "Bad_Bucket", 1);
	T_EQ(d9__s3_config_env(&c, &why, 0), -EINVAL);
	T_ASSERT(strstr(why, "D9_S3_BUCKET"));
	setenv("D9_S3_BUCKET", "traces", 1);
	setenv("D9_S3_PREFIX", "/a/b/", 1);
	setenv("D9_S3_ENDPOINT", "http://127.0.0.1:9/", 1);
	setenv("D9_S3_REGION", "eu-west-1", 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	setenv("AWS_PROFILE", "d9", 1);
	T_EQ(d9__s3_config_env(&c, &why, 0), 1);
	T_ASSERT(!strcmp(c.prefix, "a/b") && !strcmp(c.endpoint, "http://127.0.0.1:9"));
	T_EQ(d9__s3_creds_load(&c, &cr, err, sizeof(err)), 0);
	T_ASSERT(!strcmp(cr.key_id, "KEY") && !strcmp(cr.secret, "SECRET") && !strcmp(cr.token, "TOKEN"));
	char url[256];
	T_EQ(d9__s3_url(&c, "k%3D1", "list-type=2", url, sizeof(url)), 0);
	T_ASSERT(!strcmp(url, "http://127.0.0.1:9/traces/k%3D1?list-type=2"));
	c.endpoint[0] = 0;
	T_EQ(d9__s3_url(&c, "k", NULL, url, sizeof(url)), 0);
	T_ASSERT(!strcmp(url, "https://traces.s3.eu-west-1.amazonaws.com/k"));
	strcpy(c.bucket, "my.traces");
	T_EQ(d9__s3_url(&c, "k", NULL, url, sizeof(url)), 0);
	T_ASSERT(!strcmp(url, "https://s3.eu-west-1.amazonaws.com/my.traces/k"));
	/* a profile that is not there, then a broken file: refused, saying why */
	strcpy(c.profile, "nope");
	T_ASSERT(d9__s3_creds_load(&c, &cr, err, sizeof(err)) < 0 && strstr(err, "[nope]"));
	f = fopen(path, "w");
	T_ASSERT(f);
	fputs("[default\n", f);
	fclose(f);
	T_ASSERT(d9__s3_creds_load(&c, &cr, err, sizeof(err)) < 0 && strstr(err, "']'"));
	/* the variables win over the file */
	setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "ENVSECRET", 1);
	T_EQ(d9__s3_config_env(&c, &why, 0), 1);
	T_EQ(d9__s3_creds_load(&c, &cr, err, sizeof(err)), 0);
	T_ASSERT(!strcmp(cr.key_id, "ENVKEY") && !cr.token[0]);
	unlink(path);
	rmdir(dir);
}

/* Writes in as a TRAILER chunk and decodes its payload (the length the head gives, without the
 * CRC) into out; *len: the whole chunk's bytes. */
static int trailer_round_trip(const struct d9_trailer *in, struct d9_trailer *out, size_t *len)
{
	uint8_t buf[512];
	struct d9_wbuf w;

	d9_wbuf_init(&w, buf, sizeof(buf));
	if (d9_trailer_write(&w, in))
		return -1;
	*len = (size_t)(w.p - buf);
	struct d9_chunk c = { .type = D9_CHUNK_TRAILER, .payload = buf + D9_CHUNK_HDR_LEN,
		.len = (uint32_t)(*len - D9_CHUNK_OVERHEAD) };
	return d9_trailer_decode(&c, out);
}

TEST(trailer_s3_counts)
{
	struct d9_trailer t = { .events = 5, .chunks = 3, .s3_uploaded = 7, .s3_uploaded_bytes = 70000,
		.s3_failures = 2, .s3_evicted = 1 };
	struct d9_trailer plain = { .events = 5, .chunks = 3 }, out;
	size_t n, m;

	T_EQ(trailer_round_trip(&t, &out, &n), 0);
	T_EQ(out.s3_uploaded, 7);
	T_EQ(out.s3_uploaded_bytes, 70000);
	T_EQ(out.s3_failures, 2);
	T_EQ(out.s3_evicted, 1);
	T_EQ(out.budget_deleted_segments, 0);
	T_EQ(trailer_round_trip(&plain, &out, &m), 0);
	T_EQ(out.budget_deleted_segments, 0);
	/* the budget pair (2 zero bytes) is written before them; then 1 + 3 + 1 + 1 bytes */
	T_EQ((long long)n, (long long)m + 2 + 6);
	T_EQ(out.s3_uploaded, 0);
	t.budget_deleted_segments = 3;
	T_EQ(trailer_round_trip(&t, &out, &n), 0);
	T_EQ(out.budget_deleted_segments, 3);
	T_EQ(out.s3_evicted, 1);
}

/* d9__utc_tm (the agent threads' gmtime_r, without glibc's time-zone lock) gives glibc's answer
 * field for field: the epoch's edges, leap days and centuries, the year 2038, negative times,
 * far years, then a million pseudo-random seconds over +-10^12 s; and NULL where glibc does
 * (with TZ=UTC: the test machine's zone may count leap seconds). */
static void utc_same(int64_t t)
{
	struct tm a, b;
	time_t tt = (time_t)t;
	struct tm *ra = gmtime_r(&tt, &a), *rb = d9__utc_tm(t, &b);

	if (!ra || !rb) {
		if (!!ra != !!rb)
			T_FAIL("t=%lld: glibc %s, d9__utc_tm %s", (long long)t, ra ? "a time" : "NULL",
				rb ? "a time" : "NULL");
		return;
	}
	if (a.tm_sec != b.tm_sec || a.tm_min != b.tm_min || a.tm_hour != b.tm_hour ||
		a.tm_mday != b.tm_mday || a.tm_mon != b.tm_mon || a.tm_year != b.tm_year ||
		a.tm_wday != b.tm_wday || a.tm_yday != b.tm_yday || a.tm_isdst != b.tm_isdst ||
		a.tm_gmtoff != b.tm_gmtoff || strcmp(a.tm_zone, b.tm_zone))
		T_FAIL("t=%lld: glibc %d-%d-%d %d:%d:%d wday %d yday %d, d9__utc_tm %d-%d-%d %d:%d:%d "
			"wday %d yday %d", (long long)t, a.tm_year, a.tm_mon, a.tm_mday, a.tm_hour,
			a.tm_min, a.tm_sec, a.tm_wday, a.tm_yday, b.tm_year, b.tm_mon, b.tm_mday,
			b.tm_hour, b.tm_min, b.tm_sec, b.tm_wday, b.tm_yday);
}

TEST(utc_tm_as_glibc)
{
	/* a zone with leap seconds (TZ=right/..., or /etc/localtime linked to one) makes glibc's
	 * gmtime count them; POSIX time and the agent do not */
	setenv("TZ", "UTC", 1);
	tzset();
	static const int64_t edges[] = { 0, -1, 1, 86399, 86400, -86400, -86401, 951782400,
		951868800, 4107542400, 4107456000, 2147483647, 2147483648, -2147483648LL,
		253402300799LL, 253402300800LL, -62135596800LL, -62135596801LL, 67767976233316800LL,
		67768036191676799LL, 67768036191676800LL, -67768040609740800LL, -67768040609740801LL,
		INT64_MAX, INT64_MIN };
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		utc_same(edges[i]);
	for (int i = 0; i < 1000000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		utc_same((int64_t)(x % 2000000000001ull) - 1000000000000LL);
	}
}

int main(int argc, char **argv)
{
	return t_main(argc, argv);
}
