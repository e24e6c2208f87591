/* inputs.c: expands TRACE arguments into segment files. A directory contributes its segment
 * files (regular files only) and those of its d9-uid-<uid> subdirectories (where processes that
 * gave up root write: agent/DESIGN.md, "Privilege drops"), sorted by file name, which for one
 * process series is the order they were written, also when the series moved into a
 * subdirectory. */
#include "inputs.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

static int is_segment_name(const char *name)
{
	return ends_with(name, ".bin") || ends_with(name, ".bin.gz") || ends_with(name, ".active");
}

static int add(struct d9__inputs *in, const char *path)
{
	char **np = realloc(in->paths, (in->n + 1) * sizeof(*np));

	if (!np)
		return -ENOMEM;
	in->paths = np;
	in->paths[in->n] = strdup(path);
	if (!in->paths[in->n])
		return -ENOMEM;
	in->n++;
	return 0;
}

/* By file name, then by the whole path. */
static int cmp_str(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	const char *bx = strrchr(x, '/'), *by = strrchr(y, '/');
	int c = strcmp(bx ? bx + 1 : x, by ? by + 1 : y);

	return c ? c : strcmp(x, y);
}

/* Adds the segment files of directory dir (not its subdirectories but d9-uid-*, one level). */
static int add_dir(struct d9__inputs *in, const char *dir, int top, int *bad)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d) {
		if (top || errno != ENOENT) {
			fprintf(stderr, "d9-analyze: %s: %s\n", dir, strerror(errno));
			(*bad)++;
		}
		return 0;
	}
	while ((e = readdir(d))) {
		char path[4096];
		struct stat es;
		if (top && !strncmp(e->d_name, "d9-uid-", 7)) {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			/* a directory, not a link to one: the agent makes them itself */
			if (lstat(path, &es) == 0 && S_ISDIR(es.st_mode) && add_dir(in, path, 0, bad)) {
				closedir(d);
				return -ENOMEM;
			}
			continue;
		}
		if (!is_segment_name(e->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		/* a FIFO or device named like a segment would block or never end the read
		 * (anyone can plant one in a shared directory); named files are taken as
		 * given, so `d9-analyze <(zcat ...)` still works */
		int st_err = stat(path, &es) != 0 ? errno : 0;
		if (st_err || !S_ISREG(es.st_mode)) {
			fprintf(stderr, "d9-analyze: %s: skipped: %s\n", path, st_err ?
				strerror(st_err) : S_ISDIR(es.st_mode) ? "a directory" :
				"not a regular file");
			(*bad)++; /* input that could not be read: exit status 4 */
			continue;
		}
		if (add(in, path)) {
			closedir(d);
			return -ENOMEM;
		}
	}
	closedir(d);
	return 0;
}

/* X.bin next to X.bin.gz: the process was killed between the compressor's rename of the
 * complete .gz (written and fsynced first) and its removal of the .bin. Both hold the same
 * segment; reading both would count every event twice. The .gz is kept (it may also carry
 * symbol records). Sorted order puts X.bin right before X.bin.gz. */
static void drop_compressed_twins(struct d9__inputs *in, size_t first)
{
	size_t w = first;

	for (size_t i = first; i < in->n; i++) {
		const char *p = in->paths[i];
		size_t n = strlen(p);
		if (i + 1 < in->n && ends_with(p, ".bin") && !strncmp(in->paths[i + 1], p, n) &&
			!strcmp(in->paths[i + 1] + n, ".gz")) {
			free(in->paths[i]);
			continue;
		}
		in->paths[w++] = in->paths[i];
	}
	in->n = w;
}

int d9__inputs_expand(struct d9__inputs *in, char **args, int nargs, int *bad)
{
	char s3dir[4096];

	in->paths = NULL;
	in->n = 0;
	*bad = 0;
	for (int i = 0; i < nargs; i++) {
		struct stat st;
		char *arg = args[i];
		if (!strncmp(arg, "s3://", 5)) {
			int err = d9__s3_fetch ? d9__s3_fetch(arg, s3dir, sizeof(s3dir), bad) : -ENOSYS;
			if (err == -ENOMEM)
				return err;
			if (err == 1)
				continue; /* nothing there: said, as for an empty directory */
			if (err) {
				if (err == -ENOSYS)
					fprintf(stderr, "d9-analyze: %s: no S3 support in this build\n", arg);
				(*bad)++;
				continue;
			}
			arg = s3dir; /* read like a directory of segments */
		}
		if (stat(arg, &st) != 0) {
			fprintf(stderr, "d9-analyze: %s: %s\n", arg, strerror(errno));
			(*bad)++;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (add(in, arg))
				return -ENOMEM;
			continue;
		}
		size_t first = in->n;
		if (add_dir(in, arg, 1, bad))
			return -ENOMEM;
		if (in->n > first) {
			qsort(in->paths + first, in->n - first, sizeof(char *), cmp_str);
			if (!in->every_file)
				drop_compressed_twins(in, first);
		}
		if (in->n == first)
			fprintf(stderr, "d9-analyze: %s: no segment files (*.bin, *.bin.gz, *.active)\n",
				arg);
	}
	return 0;
}

void d9__inputs_free(struct d9__inputs *in)
{
	for (size_t i = 0; i < in->n; i++)
		free(in->paths[i]);
	free(in->paths);
	in->paths = NULL;
	in->n = 0;
}
