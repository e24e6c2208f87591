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
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/fsuid.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
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

/* A relative directory is the one it names from where the program started: the program may
 * change its working directory later (daemons chdir("/")), while the agent's threads keep the one
 * they started with (chroot, below), and both must mean the same directory. -1 when the working
 * directory cannot be had or the whole would not fit: the path is then refused. */
static int make_absolute(char *dir, size_t cap)
{
	char cwd[PATH_MAX];

	if (dir[0] == '/')
		return 0;
	if (!getcwd(cwd, sizeof(cwd)) || cwd[0] != '/')
		return -1;
	size_t n = strlen(cwd);
	if (!strcmp(dir, ".")) {
		if (n >= cap)
			return -1;
		memcpy(dir, cwd, n + 1);
		return 0;
	}
	const char *rel = !strncmp(dir, "./", 2) ? dir + 2 : dir;
	size_t m = strlen(rel);
	if (n + 1 + m >= cap)
		return -1;
	memmove(dir + n + 1 - (n == 1), rel, m + 1); /* cwd "/" adds no slash of its own */
	memcpy(dir, cwd, n);
	if (n > 1)
		dir[n] = '/';
	return 0;
}

static const char *relative_refused = "it is relative and the working directory cannot be had "
	"(removed, or too long) to say what it names";

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
			if (make_absolute(c->dir, sizeof(c->dir)))
				return relative_refused;
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
	if (make_absolute(c->dir, sizeof(c->dir)))
		return relative_refused;
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

/* start-up says why tracing is off; the writer, making the directory again, says so itself; a
 * change of user before the start keeps the reason (quiet 2: d9__trace_dir_refusal) */
static char refusal[8448]; /* two paths at most */
#define DIR_ERROR(...)                                                                    \
	do {                                                                               \
		if (!quiet)                                                                \
			d9__log(D9_LOG_ERROR, __VA_ARGS__);                                \
		else if (quiet == 2)                                                       \
			snprintf(refusal, sizeof(refusal), __VA_ARGS__);                   \
	} while (0)

const char *d9__trace_dir_refusal(void)
{
	return refusal[0] ? refusal : NULL;
}

/* ---- privilege drops (agent/DESIGN.md, "Privilege drops") -------------------------------------
 * A process that gives up root (nginx workers become www-data) can no longer enter the trace
 * directory, which is root's and 0700. Before the drop, still privileged, the agent makes
 * <dir>/d9-uid-<uid> (0700, owned by the target user: nobody else gains any access, and the
 * target user cannot reach it by path through the 0700 parent; a program without CAP_CHOWN
 * left gets it root's, with an ACL that lets that user alone in) and keeps a descriptor of it.
 * From then on the directory is named "/proc/self/fd/<n>": the kernel lets a process follow its
 * own descriptors there whatever its credentials, so every path-based operation of the writer,
 * the compressor and recovery works unchanged. d9-analyze given <dir> reads the d9-uid-*
 * subdirectories too. The descriptor is the agent's own: checked (device, inode) before use. */
static struct d9__file sub_cur = { .fd = -1 }, sub_next = { .fd = -1 };
/* the user each is for: the owner its files get (d9__trace_dir_owner) */
static uid_t sub_cur_owner = (uid_t)-1, sub_next_owner = (uid_t)-1;
/* A subdirectory root could not give to the target user (a program that gave up CAP_CHOWN before
 * its setuid, as dnsmasq does: it keeps CAP_SETUID alone): left root's, with an access ACL that
 * lets that user alone in (trace_dir_for_uid; an owner sets its file's ACL with no capability),
 * only in root's 0700 trace directory; the user it serves. */
static struct sub_open {
	int open;
	uid_t user;
} sub_cur_open, sub_next_open;

/* The ACL of such a directory, as the kernel keeps it (system.posix_acl_access, little-endian):
 * the owner rwx, that user rwx, the owning group and others nothing, mask rwx: mode 0770. */
#define ACL_XATTR "system.posix_acl_access"
#define SUB_ACL_MODE 0770
struct acl_entry {
	uint16_t tag, perm;
	uint32_t id;
};
struct acl_bytes {
	uint32_t version;
	struct acl_entry e[5];
};
_Static_assert(sizeof(struct acl_bytes) == 44, "the kernel's posix_acl_xattr layout");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "posix_acl_xattr is little-endian");

static void acl_for(struct acl_bytes *a, uid_t uid)
{
	*a = (struct acl_bytes){ 2, { { 0x01, 7, (uint32_t)-1 }, { 0x02, 7, uid },
		{ 0x04, 0, (uint32_t)-1 }, { 0x10, 7, (uint32_t)-1 }, { 0x20, 0, (uint32_t)-1 } } };
}

static int acl_is_for(int fd, const char *path, uid_t uid)
{
	struct acl_bytes want, got;
	ssize_t n;

	acl_for(&want, uid);
	memset(&got, 0, sizeof(got));
	n = fd >= 0 ? fgetxattr(fd, ACL_XATTR, &got, sizeof(got)) :
		getxattr(path, ACL_XATTR, &got, sizeof(got));
	return n == (ssize_t)sizeof(got) && !memcmp(&got, &want, sizeof(got));
}

int d9__dir_acl_form(int fd, const char *path, const struct stat *st, uid_t uid)
{
	return st->st_uid == 0 && (st->st_mode & 07777) == SUB_ACL_MODE && acl_is_for(fd, path, uid);
}
static char orig_dir[sizeof(((struct d9__config *)0)->dir)], sub_cur_name[sizeof(orig_dir)];
static char next_dir[sizeof(orig_dir)];

/* A subdirectory descriptor the writer let go of on an agent thread with a table of its own
 * (fdown.c): the number is in the program's table, where only a program's thread can close it;
 * the next d9__trace_dir_for_uid (on one) does. */
static pthread_mutex_t retired_mu = PTHREAD_MUTEX_INITIALIZER;
static struct d9__file retired = { .fd = -1 };

/* Closes the subdirectory descriptor the writer let go of, if any: on a program's thread, whose
 * table the number is in. */
static void retired_close(void)
{
	d9__lock(&retired_mu);
	struct d9__file old = retired;
	retired.fd = -1;
	d9__unlock(&retired_mu);
	d9__file_close(&old);
}

static void sub_let_go(struct d9__file *f)
{
	if (f->fd < 0 || !d9__self.fd_private) {
		d9__file_close(f);
		return;
	}
	d9__lock(&retired_mu);
	int kept = retired.fd < 0;
	if (kept)
		retired = *f;
	d9__unlock(&retired_mu);
	if (!kept) /* another one still waits (a change of user that timed out): left open */
		d9__log_once(D9_LOG_WARN, "d9's descriptor %d of a trace directory it no longer uses "
			"stays open", f->fd);
	f->fd = -1;
}

/* sub_cur's check from the calling thread, with its stat: on an agent thread with a table of
 * its own the number is the program's table's, looked at through its /proc name (the thread
 * group's table: as c->dir itself is). 0 or a negative errno. */
static int sub_check(struct stat *st)
{
	char path[64];

	if (!d9__self.fd_private) {
		int err = d9__file_check(&sub_cur);
		if (!err && fstat(sub_cur.fd, st) != 0)
			err = -errno;
		return err;
	}
	if (sub_cur.fd < 0)
		return -EBADF;
	if (!d9__fd_still_host(sub_cur.fd))
		return -ESTALE; /* the program took the number */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", sub_cur.fd);
	if (stat(path, st) != 0)
		return -errno;
	return st->st_dev == sub_cur.dev && st->st_ino == sub_cur.ino ? 0 : -ESTALE;
}

/* Whether c->dir is the subdirectory descriptor's name. */
static int in_subdir(const struct d9__config *c)
{
	return sub_cur.fd >= 0 && !strcmp(c->dir, sub_cur_name);
}

/* The checks of d9__trace_dir_prepare for the subdirectory: still the descriptor we opened, a
 * directory of the effective user that nobody else can write to. Returns 0 or a negative errno. */
static int subdir_ready(const struct d9__config *c, int quiet)
{
	struct stat st;
	int err = sub_check(&st);
	/* whose it is: the effective user's; or, for root again (a saved uid: varnish's compiler
	 * children become root again before they change user), the user it was made for, whose
	 * files root's agent makes there are given to (d9__file_create) */
	uid_t me = geteuid(), owner = __atomic_load_n(&sub_cur_owner, __ATOMIC_ACQUIRE);
	uid_t user = me == 0 && owner != (uid_t)-1 ? owner : me;

	/* the user's own and nobody else's; or root's with the ACL that lets that user alone in */
	if (!err && (sub_cur_open.open ?
		sub_cur_open.user != user || !d9__dir_acl_form(-1, c->dir, &st, user) :
		st.st_uid != user || (st.st_mode & (S_IWGRP | S_IWOTH))))
		err = -EPERM;
	if (!err && faccessat(AT_FDCWD, c->dir, W_OK | X_OK, AT_EACCESS) != 0)
		err = -errno;
	if (err && !quiet)
		d9__log(D9_LOG_ERROR, "cannot write traces to %s/d9-uid-%u: %s; tracing is off",
			orig_dir, (unsigned)user, err == -ESTALE || err == -EBADF ?
			"the program closed d9's descriptor of it" : strerror(-err));
	return err;
}

int d9__trace_dir_check(const struct d9__config *c)
{
	struct stat st;

	/* after the program's chroot a thread whose root is the program's would follow the names
	 * into the jail (a writer the stop did not end in time): nothing is made there */
	if (__atomic_load_n(&d9__g.chrooted, __ATOMIC_ACQUIRE) && !d9__self.fs_private)
		return -EXDEV;
	return in_subdir(c) ? sub_check(&st) : 0;
}

/* ---- a program that changes its root directory (agent/DESIGN.md, "chroot") -------------------
 * By default tracing stops at the program's chroot (lifecycle.c). With D9_CHROOT=follow the
 * agent's threads keep the root they were started with (unshare(CLONE_FS)), so the chroot leaves
 * them where the trace directory is; the program's own threads do not: before the chroot the
 * agent holds a descriptor of the trace directory (the anchor), through which a later privilege
 * drop makes its d9-uid-N directory. */
static struct d9__file anchor = { .fd = -1 };

void d9__fs_private_begin(int filtered)
{
	/* only to follow a chroot (D9_CHROOT=follow): a root of its own outside the program's jail
	 * is a way out of it for the program (agent/DESIGN.md, chroot) */
	if (d9__self.fs_private || filtered || !d9__g.cfg.chroot_follow)
		return; /* its creator's own already; or a seccomp filter, which may kill at unshare */
	if (syscall(SYS_unshare, CLONE_FS) != 0)
		return;
	d9__self.fs_private = 1;
	/* not the program's working directory, which would stay busy for the thread's life (a
	 * daemon's chdir("/") would no longer free its mount); the agent's paths are absolute */
	if (syscall(SYS_chdir, "/") != 0)
		d9__log_once(D9_LOG_DEBUG, "an agent thread keeps the program's working directory");
}

int d9__trace_dir_anchor(const struct d9__config *c)
{
	int saved = errno, err = 0;
	struct stat st;

	if (anchor.fd < 0) { /* else a second chroot: the first one's anchor still names it */
		if (!orig_dir[0])
			snprintf(orig_dir, sizeof(orig_dir), "%s", c->dir);
		int fd = open(orig_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		err = fd < 0 ? -errno : d9__file_take(&anchor, fd, AT_FDCWD, orig_dir);
	}
	if (!err && !d9__file_enter(&anchor)) {
		if (fstat(anchor.fd, &st) != 0)
			err = -errno;
		else if (st.st_mode & 077)
			err = (int)(st.st_mode & 07777);
		d9__file_leave(&anchor);
	}
	errno = saved;
	return err;
}

void d9__paths_child(void)
{
	pthread_mutex_init(&retired_mu, NULL);
}

void d9__trace_dir_release(void)
{
	retired_close();
	d9__file_close(&anchor);
	d9__file_close(&sub_next);
	d9__file_close(&sub_cur);
	sub_next_open.open = sub_cur_open.open = 0;
}

/* The trace directory itself, for d9__trace_dir_for_uid: opened by its name, or after a chroot
 * (where the name means something else) a copy of the anchor. 0 or a negative errno. */
static int orig_open(struct d9__file *dir)
{
	if (anchor.fd < 0 && __atomic_load_n(&d9__g.chrooted, __ATOMIC_ACQUIRE))
		return -ENOENT; /* the name would lead to a directory inside the program's jail */
	if (anchor.fd >= 0) {
		int fd = d9__file_dup(&anchor);
		if (fd < 0)
			return -EBADF;
		*dir = (struct d9__file){ fd, anchor.dev, anchor.ino };
		return 0;
	}
	int fd = open(orig_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return d9__file_take(dir, fd, AT_FDCWD, orig_dir);
}

/* Gives the directory fd (ours, 0700) to uid: 0 once it is uid's; 1 when it is left ours in
 * the ACL form that lets uid alone in; or a negative errno. The program may have given up
 * CAP_CHOWN already (dnsmasq keeps only CAP_SETUID for its setuid): then, and only as root in
 * root's directory that nobody else may enter (parent_private), the ACL form (an owner sets its
 * directory's ACL with no capability). A directory already in that form is kept as it is. */
static int sub_give(int fd, uid_t uid, int parent_private)
{
	struct acl_bytes acl;

	if (fchown(fd, uid, (gid_t)-1) == 0)
		return 0;
	int err = -errno;
	if (err != -EPERM || !parent_private)
		return err;
	acl_for(&acl, uid);
	return fsetxattr(fd, ACL_XATTR, &acl, sizeof(acl), 0) == 0 ? 1 : -errno;
}

int d9__trace_dir_for_uid(const struct d9__config *c, uid_t uid)
{
	char name[32];
	struct stat st;
	struct d9__file dir;
	int err;

	if (!orig_dir[0])
		snprintf(orig_dir, sizeof(orig_dir), "%s", c->dir);
	retired_close();
	d9__file_close(&sub_next);
	sub_next_open.open = 0;
	/* the directory's own user (root) goes back to the directory itself. Its descriptor is
	 * the agent's (files.c) and held to the end: the program's close of the number waits, so
	 * that mkdirat and unlinkat below act in this directory only */
	if ((err = orig_open(&dir)) != 0)
		return err;
	if ((err = d9__file_enter(&dir)) != 0)
		goto err_close;
	int dfd = dir.fd;
	if (fstat(dfd, &st) != 0) {
		err = -errno;
		goto err_dir;
	}
	/* the ACL form below only as root, in root's directory that no one else may enter */
	int parent_private = geteuid() == 0 && st.st_uid == 0 && !(st.st_mode & 077);
	if (st.st_uid == uid) {
		d9__file_leave(&dir);
		d9__file_close(&dir);
		snprintf(next_dir, sizeof(next_dir), "%s", orig_dir);
		return in_subdir(c) ? 0 : 1;
	}
	if (in_subdir(c) && !d9__file_enter(&sub_cur)) {
		int there = fstat(sub_cur.fd, &st) == 0 &&
			(sub_cur_open.open ? sub_cur_open.user == uid : st.st_uid == uid);
		d9__file_leave(&sub_cur);
		if (there) {
			d9__file_leave(&dir);
			d9__file_close(&dir);
			return 1; /* already there (setgid, then setuid to the same user) */
		}
	}
	snprintf(name, sizeof(name), "d9-uid-%u", (unsigned)uid);
	int made = mkdirat(dfd, name, 0700) == 0;
	if (!made && errno != EEXIST) {
		err = -errno;
		goto err_dir;
	}
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES && !made) {
		/* one an earlier run gave to uid (its 0700), which root without CAP_DAC_OVERRIDE
		 * (dnsmasq's) cannot open: found as root (O_PATH needs only the parent's search
		 * permission), then opened as uid, whose it is (setfsuid: this thread only, with the
		 * CAP_SETUID that the change of user needs anyway) */
		int pfd = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (pfd >= 0) {
			int old = setfsuid(uid);
			fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			int e = errno;
			setfsuid((uid_t)old);
			close(pfd);
			errno = e;
		}
	}
	if (fd < 0) {
		err = -errno;
		goto err_made;
	}
	/* the agent's from here (files.c): a high number, close-on-exec, like every agent fd */
	if ((err = d9__file_take(&sub_next, fd, dfd, name)) != 0)
		goto err_made;
	if ((err = d9__file_enter(&sub_next)) != 0)
		goto err_sub;
	/* one left by an earlier run is taken only when it is that user's alone, or ours to give
	 * (0700, or in the ACL form below for that very user) */
	uid_t me = geteuid();
	int acl_form = 0;
	if (fstat(sub_next.fd, &st) != 0 || !S_ISDIR(st.st_mode) || (st.st_uid != uid && st.st_uid != me))
		err = -EPERM;
	else if (st.st_uid == uid)
		err = st.st_mode & 077 ? -EPERM : 0;
	else if ((st.st_mode & 077) &&
		!(acl_form = parent_private && d9__dir_acl_form(sub_next.fd, NULL, &st, uid)))
		err = -EPERM; /* ours, but open to others, not as below */
	else if (acl_form)
		err = 1; /* kept as it is: that user's processes may be writing there now */
	else
		err = sub_give(sub_next.fd, uid, parent_private);
	if (err == 1) {
		sub_next_open = (struct sub_open){ 1, uid };
		err = 0;
	}
	d9__file_leave(&sub_next);
	if (err)
		goto err_sub;
	d9__file_leave(&dir);
	d9__file_close(&dir);
	snprintf(next_dir, sizeof(next_dir), "/proc/self/fd/%d", sub_next.fd);
	sub_next_owner = uid;
	return 0;

err_sub:
	d9__file_close(&sub_next);
	sub_next_open.open = 0;
err_made:
	if (made)
		unlinkat(dfd, name, AT_REMOVEDIR);
err_dir:
	d9__file_leave(&dir);
err_close:
	d9__file_close(&dir);
	return err;
}

int d9__trace_dir_opened(void)
{
	return sub_cur.fd >= 0 && sub_cur_open.open && !strcmp(d9__g.cfg.dir, sub_cur_name);
}

void d9__trace_dir_use(struct d9__config *c)
{
	if (!next_dir[0])
		return;
	if (sub_next.fd >= 0) {
		sub_let_go(&sub_cur);
		sub_cur = sub_next;
		sub_cur_open = sub_next_open;
		sub_next.fd = -1;
		sub_next_open.open = 0;
		snprintf(sub_cur_name, sizeof(sub_cur_name), "%s", next_dir);
		__atomic_store_n(&sub_cur_owner, sub_next_owner, __ATOMIC_RELEASE);
	}
	snprintf(c->dir, sizeof(c->dir), "%s", next_dir);
	next_dir[0] = 0;
	if (strcmp(c->dir, sub_cur_name)) {
		sub_let_go(&sub_cur); /* back in the directory itself */
		sub_cur_open.open = 0;
	}
}

uid_t d9__trace_dir_owner(const char *path)
{
	const char *dir = d9__g.cfg.dir;
	size_t n = strlen(dir);

	if (!in_subdir(&d9__g.cfg) || strncmp(path, dir, n) || path[n] != '/' || strchr(path + n + 1, '/'))
		return (uid_t)-1;
	return __atomic_load_n(&sub_cur_owner, __ATOMIC_ACQUIRE);
}

const char *d9__trace_dir_shown(const struct d9__config *c)
{
	static char shown[sizeof(orig_dir) + 32];

	if (!in_subdir(c))
		return c->dir;
	uid_t owner = __atomic_load_n(&sub_cur_owner, __ATOMIC_ACQUIRE);
	/* the user it was made for (root again, a saved uid, still writes in another's) */
	snprintf(shown, sizeof(shown), "%s/d9-uid-%u", orig_dir,
		(unsigned)(owner != (uid_t)-1 ? owner : geteuid()));
	return shown;
}

int d9__trace_dir_prepare(const struct d9__config *c, int quiet)
{
	char parent[PATH_MAX];
	mode_t pmode = 0;
	struct stat st;
	int err;

	if (d9__trace_dir_check(c) == -EXDEV)
		return -EXDEV; /* inside the program's jail: the chroot's stop said why */
	if (in_subdir(c))
		return subdir_ready(c, quiet);
	const char *why = system_dir(c->dir); /* again: the path may have changed since load */
	if (why) {
		DIR_ERROR("cannot write traces to %s: %s; tracing is off", c->dir, why);
		return -EPERM;
	}
	if ((err = d9__mkdirs(c->dir)) != 0)
		goto err_write;
	/* the directory itself, not what a link in its place points to */
	struct d9__file dir;
	if ((err = d9__dir_open(&dir, AT_FDCWD, c->dir, 0, &st)) != 0) {
		if (err == -ELOOP || (err == -ENOTDIR && lstat(c->dir, &st) == 0 && S_ISLNK(st.st_mode))) {
			DIR_ERROR("cannot write traces to %s: it is a symbolic link (name the "
				"directory it points to); tracing is off", c->dir);
			return err;
		}
		goto err_write;
	}
	d9__file_close(&dir);
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
