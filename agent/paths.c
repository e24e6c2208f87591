/* paths.c: where the segment files go, and whether it is safe to write there. At load it reads
 * D9_TRACE_PATH without creating anything (config.c prints what is wrong); at start it creates the
 * trace directory (0700) and refuses one that another user could write to, because the writer
 * creates, renames and deletes files in it by name. It never creates anything in /dev, /proc or
 * /sys. README.md ("Trace directory") documents the rules a user sees. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

/* The message of d9__path_check when it names a part of the path (load time: one thread). */
static char why_buf[PATH_MAX + 128];

static const char *kind_name(mode_t m)
{
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	return "not a regular file";
}

/* /dev (but /dev/shm, which is there for files), /proc, /sys and the pseudo file systems that
 * are mounted elsewhere. The test is made on the deepest part of dir that exists, after symbolic
 * links, so /var/run/../../dev or a link into /proc is caught too. Returns NULL, or the reason. */
static const char *system_dir(const char *dir)
{
	static const char *const tops[] = { "/dev", "/proc", "/sys" };
	char part[PATH_MAX], real[PATH_MAX];
	struct statfs fs;

	if (snprintf(part, sizeof(part), "%s", dir) >= (int)sizeof(part))
		return NULL; /* too long to resolve: the creation fails later with ENAMETOOLONG */
	while (!realpath(part, real)) {
		if (errno != ENOENT || !strcmp(part, ".") || !strcmp(part, "/"))
			return NULL; /* cannot tell (EACCES, a removed cwd): the checks at start apply */
		char *slash = strrchr(part, '/');
		if (!slash)
			snprintf(part, sizeof(part), ".");
		else if (slash == part)
			part[1] = 0;
		else
			*slash = 0;
	}
	for (size_t i = 0; i < sizeof(tops) / sizeof(tops[0]); i++) {
		size_t n = strlen(tops[i]);
		if (strncmp(real, tops[i], n) || (real[n] && real[n] != '/'))
			continue;
		if (i == 0 && !strncmp(real, "/dev/shm", 8) && (!real[8] || real[8] == '/'))
			break;
		snprintf(why_buf, sizeof(why_buf), "%s: d9 never creates files under %s", real, tops[i]);
		return why_buf;
	}
	if (statfs(real, &fs) == 0) {
		switch ((unsigned long)fs.f_type) {
		case PROC_SUPER_MAGIC: case SYSFS_MAGIC: case DEVPTS_SUPER_MAGIC: case CGROUP_SUPER_MAGIC:
		case CGROUP2_SUPER_MAGIC: case DEBUGFS_MAGIC: case SECURITYFS_MAGIC: case TRACEFS_MAGIC:
		case BPF_FS_MAGIC:
			snprintf(why_buf, sizeof(why_buf), "%s is on a kernel pseudo file system", real);
			return why_buf;
		}
	}
	return NULL;
}

/* The first part of path that exists and is not a directory (stat failed with ENOTDIR). */
static const char *not_a_dir(const char *path)
{
	char part[PATH_MAX];
	struct stat st;

	for (size_t i = 1; path[i] && i < sizeof(part); i++) {
		if (path[i] != '/')
			continue;
		memcpy(part, path, i);
		part[i] = 0;
		if (stat(part, &st) == 0 && !S_ISDIR(st.st_mode)) {
			snprintf(why_buf, sizeof(why_buf), "%s is not a directory", part);
			return why_buf;
		}
	}
	return "a part of the path is not a directory";
}

/* Drops trailing slashes (but of "/"): with one, open(O_NOFOLLOW) would follow a final link. */
static void trim_slashes(char *p)
{
	size_t n = strlen(p);

	while (n > 1 && p[n - 1] == '/')
		p[--n] = 0;
}

const char *d9__path_check(struct d9__config *c)
{
	const char *p = c->trace_path;
	size_t len = strlen(p);
	struct stat st;

	if (stat(p, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			/* a directory: the segments go inside it, as trace.<pid>.<seq>.bin */
			snprintf(c->dir, sizeof(c->dir), "%s", p);
			trim_slashes(c->dir);
			snprintf(c->stem, sizeof(c->stem), "trace");
			return system_dir(c->dir);
		}
		if (!S_ISREG(st.st_mode)) {
			snprintf(why_buf, sizeof(why_buf), "it is %s, not a file or directory",
				kind_name(st.st_mode));
			return why_buf;
		}
	} else if (errno == ENOTDIR) {
		return not_a_dir(p);
	}
	if (len && p[len - 1] == '/')
		return "it ends with / but is not an existing directory";

	/* <dir>/<stem>.<anything>: the stem is the name up to its first dot */
	const char *slash = strrchr(p, '/');
	const char *name = slash ? slash + 1 : p;
	if (slash)
		snprintf(c->dir, sizeof(c->dir), "%.*s", (int)(slash - p + (slash == p)), p);
	else
		snprintf(c->dir, sizeof(c->dir), ".");
	trim_slashes(c->dir);
	const char *dot = strchr(name, '.');
	size_t n = dot && dot != name ? (size_t)(dot - name) : strlen(name);
	if (n >= sizeof(c->stem))
		return "the file name is too long";
	memcpy(c->stem, name, n);
	c->stem[n] = 0;
	return system_dir(c->dir);
}

int d9__mkdirs(const char *dir)
{
	char p[4096];
	size_t n = strlen(dir);
	struct stat st;

	if (n >= sizeof(p))
		return -ENAMETOOLONG;
	memcpy(p, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != 0)
			continue;
		char c = p[i];
		p[i] = 0;
		if (mkdir(p, 0700) != 0) {
			if (errno != EEXIST)
				return -errno;
			/* EEXIST says nothing about what is there: a file would give EACCES later */
			if (stat(p, &st) != 0)
				return -errno;
			if (!S_ISDIR(st.st_mode))
				return -ENOTDIR;
		}
		p[i] = c;
	}
	return 0;
}

/* A parent of dir that everybody can write to without the sticky bit: anyone could rename the
 * trace directory away and put their own in its place after the checks. A group-writable parent
 * is let through (/var/log is 0775 on some systems). Returns NULL, or that parent (in buf). */
static const char *open_parent(const char *dir, char *buf, size_t cap, mode_t *mode)
{
	struct stat st;

	if (cap < PATH_MAX || !realpath(dir, buf))
		return NULL;
	for (char *slash = strrchr(buf, '/'); slash; slash = strrchr(buf, '/')) {
		if (slash == buf) {
			if (!buf[1])
				break;
			buf[1] = 0; /* "/" */
		} else {
			*slash = 0;
		}
		if (stat(buf, &st) == 0 && (st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
			*mode = st.st_mode;
			return buf;
		}
	}
	return NULL;
}

/* start-up says why tracing is off; the writer, making the directory again, says so itself */
#define DIR_ERROR(...)                                                                    \
	do {                                                                               \
		if (!quiet)                                                                \
			d9__log(D9_LOG_ERROR, __VA_ARGS__);                                \
	} while (0)

int d9__trace_dir_prepare(const struct d9__config *c, int quiet)
{
	char parent[PATH_MAX];
	mode_t pmode = 0;
	const char *why = system_dir(c->dir); /* again: the path may have changed since load */
	struct stat st;
	int err;

	if (why) {
		DIR_ERROR("cannot write traces to %s: %s; tracing is off", c->dir, why);
		return -EPERM;
	}
	if ((err = d9__mkdirs(c->dir)) != 0)
		goto err_write;
	/* the directory itself, not what a link in its place points to */
	int fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		if (err == -ELOOP || (err == -ENOTDIR && lstat(c->dir, &st) == 0 && S_ISLNK(st.st_mode))) {
			DIR_ERROR("cannot write traces to %s: it is a symbolic link (name the "
				"directory it points to); tracing is off", c->dir);
			return err;
		}
		goto err_write;
	}
	err = fstat(fd, &st) != 0 ? -errno : 0;
	close(fd);
	if (err)
		goto err_write;
	uid_t me = geteuid();
	int shared = st.st_uid != me || (st.st_mode & (S_IWGRP | S_IWOTH));
	if (shared && !c->allow_shared_dir) {
		DIR_ERROR("refusing trace directory %s: owned by uid %u%s, mode %04o%s; other "
			"users could plant files or links in it; tracing is off (set D9_ALLOW_SHARED_DIR=1 "
			"to use it anyway)", c->dir, (unsigned)st.st_uid,
			st.st_uid != me ? " (not this process's)" : "", (unsigned)(st.st_mode & 07777),
			(st.st_mode & S_IWOTH) ? " (writable by others)" :
			(st.st_mode & S_IWGRP) ? " (writable by its group)" : "");
		return -EPERM;
	}
	if (!shared && open_parent(c->dir, parent, sizeof(parent), &pmode)) {
		if (!c->allow_shared_dir) {
			DIR_ERROR("refusing trace directory %s: its parent %s has mode %04o "
				"(writable by others, not sticky); other users could replace the directory; "
				"tracing is off (set D9_ALLOW_SHARED_DIR=1 to use it anyway)", c->dir, parent,
				(unsigned)(pmode & 07777));
			return -EPERM;
		}
		shared = 1;
	}
	if (shared)
		d9__log(D9_LOG_INFO, "D9_ALLOW_SHARED_DIR: using %s, which other users can write to", c->dir);
	if (faccessat(AT_FDCWD, c->dir, W_OK | X_OK, AT_EACCESS) != 0) {
		err = -errno;
		goto err_write;
	}
	return 0;

err_write:
	DIR_ERROR("cannot write traces to %s: %s; tracing is off", c->dir, strerror(-err));
	return err;
}
