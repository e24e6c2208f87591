/* mem.c: the memory the agent keeps for the program's threads (the runtime adapters' coroutine
 * records, their descriptor and pointer tables, the live coroutine table), mapped, never the C
 * library's malloc. Those are made on the program's threads, at a spawn or a first wait, and the
 * allocator's blocks there would sit among the program's own; nginx spent about 200 instructions
 * more in malloc and free per request for the agent's long-lived blocks near the top of its heap
 * (agent/COST.md section 29). The definitions have their own mapped log (defs.c).
 *
 * Small blocks come from eight size classes (32 bytes to 4 KiB with the header), each with a
 * free list, carved from 256 KiB mappings: a freed block goes back to its class, so the memory
 * follows the most that was ever live at once, as the C library's would. A larger block is a
 * mapping of its own, grown by mremap. One mutex: every call is on a slow path (a spawn, an exit,
 * a table's growth). errno is kept: the callers are the program's calls. */
#include "internal.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CLASS_MIN 5 /* 32 bytes */
#define CLASSES 8 /* 32 .. 4096 bytes */
#define CHUNK (256u << 10)
#define MAGIC 0xd9a110c8u

/* In front of every block: 16 bytes, so the caller's memory stays 16-aligned. */
struct hdr {
	size_t len; /* the whole block, header included: its class's size or its mapping's length */
	uint32_t cls; /* CLASSES: a mapping of its own */
	uint32_t magic;
};

struct freeb {
	struct freeb *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct freeb *lists[CLASSES];
static uint8_t *carve_at, *carve_end;
static size_t live; /* blocks handed out and not freed (tests/unit/test-mem.c) */

static void *map(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static size_t page_round(size_t n)
{
	size_t pg = 4096;

	return (n + pg - 1) & ~(pg - 1);
}

/* The smallest class that holds n bytes with the header (CLASSES: none). */
static unsigned class_of(size_t n)
{
	unsigned c = 0;

	if (n > ((size_t)1 << (CLASS_MIN + CLASSES - 1)))
		return CLASSES;
	while (c < CLASSES && ((size_t)1 << (CLASS_MIN + c)) < n + sizeof(struct hdr))
		c++;
	return c;
}

/* A block of class c, zeroed, or NULL (mu held). */
static struct hdr *class_take(unsigned c)
{
	size_t len = (size_t)1 << (CLASS_MIN + c);
	struct hdr *h;

	if (lists[c]) {
		struct freeb *b = lists[c];
		lists[c] = b->next;
		h = (struct hdr *)b;
		memset(h, 0, len);
	} else {
		if ((size_t)(carve_end - carve_at) < len) {
			uint8_t *p = map(CHUNK);
			if (!p)
				return NULL;
			carve_at = p; /* the old chunk's rest is left unused */
			carve_end = p + CHUNK;
		}
		h = (struct hdr *)carve_at; /* a fresh mapping: zeroed */
		carve_at += len;
	}
	h->len = len;
	h->cls = c;
	h->magic = MAGIC;
	return h;
}

void *d9__mem_alloc(size_t n)
{
	int saved = errno;
	unsigned c = class_of(n);
	struct hdr *h;

	if (c < CLASSES) {
		d9__lock(&mu);
		h = class_take(c);
		d9__unlock(&mu);
	} else {
		size_t len = n > SIZE_MAX / 2 ? 0 : page_round(n + sizeof(struct hdr));
		h = len ? map(len) : NULL;
		if (h) {
			h->len = len;
			h->cls = CLASSES;
			h->magic = MAGIC;
		}
	}
	if (h)
		__atomic_add_fetch(&live, 1, __ATOMIC_RELAXED);
	errno = saved;
	return h ? h + 1 : NULL;
}

/* The header of p, or NULL when p is not a block of ours or a class's block already freed (then
 * nothing is done with it: a leak, never a crash). A mapping of its own freed twice is not caught:
 * the first free unmapped its header. */
static struct hdr *hdr_of(void *p)
{
	struct hdr *h = p ? (struct hdr *)p - 1 : NULL;

	return h && h->magic == MAGIC && h->cls <= CLASSES ? h : NULL;
}

void d9__mem_free(void *p)
{
	struct hdr *h = hdr_of(p);
	int saved = errno;

	if (!h)
		return;
	__atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
	if (h->cls == CLASSES) {
		h->magic = 0;
		munmap(h, h->len);
	} else {
		h->magic = 0;
		d9__lock(&mu);
		struct freeb *b = (struct freeb *)h;
		b->next = lists[h->cls];
		lists[h->cls] = b;
		d9__unlock(&mu);
	}
	errno = saved;
}

void *d9__mem_realloc(void *p, size_t n)
{
	struct hdr *h = hdr_of(p);

	if (!p)
		return d9__mem_alloc(n);
	if (!h)
		return NULL;
	size_t have = h->len - sizeof(struct hdr);
	if (n <= have)
		return p;
	if (h->cls == CLASSES && class_of(n) == CLASSES && n <= SIZE_MAX / 2) {
		int saved = errno;
		size_t len = page_round(n + sizeof(struct hdr));
		void *m = mremap(h, h->len, len, MREMAP_MAYMOVE);
		errno = saved;
		if (m == MAP_FAILED)
			return NULL;
		h = m;
		h->len = len;
		return h + 1;
	}
	void *q = d9__mem_alloc(n);
	if (!q)
		return NULL;
	memcpy(q, p, have);
	d9__mem_free(p);
	return q;
}

/* In a forked child (one thread). A thread of the parent that was inside may have left a class's
 * list or the chunk half-updated: those are given up (a chunk at most) instead of trusted. */
void d9__mem_child(void)
{
	if (pthread_mutex_trylock(&mu) != 0) {
		memset(lists, 0, sizeof(lists));
		carve_at = carve_end = NULL;
	}
	pthread_mutex_init(&mu, NULL);
}
