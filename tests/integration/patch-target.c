/* patch-target.c: the program test-preload-patch.sh patches (through patch-preload.c, never the
 * agent). Functions of known prologue shapes are written in assembly, so that their first bytes
 * do not depend on the compiler: frame pointer with endbr64 and sub rsp, a rip-relative load,
 * a jcc and a call among the first bytes, a tail jump, a function too short to patch, a loop back
 * into its first bytes, a cold part that jumps back into them; plus two C functions (one static).
 * It calls each with known arguments and prints "name(arg) = value" lines: a hook adds 1000000
 * to what the original returns, so the output shows which calls went through a hook, and that
 * the original still computes the right value. Nothing here knows of d9. */
#include <stdio.h>
#include <stdlib.h>

long fp_func(long x);
long rip_func(long x);
long rip_long_func(long x);
long jcc_func(long x);
long call_func(long x);
long tail_func(long x);
long short_func(long x);
long loop_func(long x);
long cold_func(long x);
long expect_func(long x);
long helper_func(long x);
long jt_func(long x);
long c_switch(long x);
long c_func(long x);

__asm__(
	".text\n"
	/* x * 3 + 1, in a frame: endbr64; push rbp; mov rbp, rsp; sub rsp, 16 */
	".globl fp_func\n.type fp_func, @function\n.p2align 4\n"
	"fp_func:\n"
	"	endbr64\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	sub $16, %rsp\n"
	"	mov %rdi, -8(%rbp)\n"
	"	mov -8(%rbp), %rax\n"
	"	lea (%rax,%rax,2), %rax\n"
	"	add $1, %rax\n"
	"	leave\n"
	"	ret\n"
	".size fp_func, .-fp_func\n"
	/* x + rip_data (7): a rip-relative load first */
	".globl rip_func\n.type rip_func, @function\n.p2align 4\n"
	"rip_func:\n"
	"	mov rip_data(%rip), %rax\n"
	"	add %rdi, %rax\n"
	"	ret\n"
	".size rip_func, .-rip_func\n"
	/* the same, long enough for a 14-byte jump: its rip-relative load cannot move far */
	".globl rip_long_func\n.type rip_long_func, @function\n.p2align 4\n"
	"rip_long_func:\n"
	"	mov rip_data(%rip), %rax\n"
	"	add %rdi, %rax\n"
	"	add $0, %rax\n"
	"	add $0, %rax\n"
	"	ret\n"
	".size rip_long_func, .-rip_long_func\n"
	/* x == 0 ? 42 : x - 1: test; je (short, forward out of the copied bytes) */
	".globl jcc_func\n.type jcc_func, @function\n.p2align 4\n"
	"jcc_func:\n"
	"	test %rdi, %rdi\n"
	"	je 1f\n"
	"	lea -1(%rdi), %rax\n"
	"	ret\n"
	"1:	mov $42, %eax\n"
	"	ret\n"
	".size jcc_func, .-jcc_func\n"
	/* helper(x) + x: push rbx; mov rbx, rdi; call helper_func (copied: returns into the
	 * trampoline) */
	".globl call_func\n.type call_func, @function\n.p2align 4\n"
	"call_func:\n"
	"	push %rbx\n"
	"	mov %rdi, %rbx\n"
	"	call helper_func\n"
	"	add %rbx, %rax\n"
	"	pop %rbx\n"
	"	ret\n"
	".size call_func, .-call_func\n"
	/* helper(x): a tail jump (jmp rel32, spelled out: the assembler would shorten it) and a
	 * padding byte */
	".globl tail_func\n.type tail_func, @function\n.p2align 4\n"
	"tail_func:\n"
	"	.byte 0xe9\n"
	"	.long helper_func - . - 4\n"
	"	int3\n"
	".size tail_func, .-tail_func\n"
	/* x * 2 */
	".globl helper_func\n.type helper_func, @function\n.p2align 4\n"
	"helper_func:\n"
	"	lea (%rdi,%rdi), %rax\n"
	"	ret\n"
	".size helper_func, .-helper_func\n"
	/* x: 4 bytes, shorter than any jump */
	".globl short_func\n.type short_func, @function\n.p2align 4\n"
	"short_func:\n"
	"	mov %rdi, %rax\n"
	"	ret\n"
	".size short_func, .-short_func\n"
	/* x + (x - 1) + ... + 1: the loop's head is at +2, inside the first 5 bytes */
	".globl loop_func\n.type loop_func, @function\n.p2align 4\n"
	"loop_func:\n"
	"	xor %eax, %eax\n"
	"2:	add %rdi, %rax\n"
	"	dec %rdi\n"
	"	jnz 2b\n"
	"	ret\n"
	".size loop_func, .-loop_func\n"
	/* adds 1 (and 2 in the cold part) until >= 10: the cold part jumps back to +3 */
	".globl cold_func\n.type cold_func, @function\n.p2align 4\n"
	"cold_func:\n"
	"	mov %rdi, %rax\n"
	"3:	add $1, %rax\n"
	"	cmp $10, %rax\n"
	"	jl cold_func.cold\n"
	"	ret\n"
	".size cold_func, .-cold_func\n"
	".type cold_func.cold, @function\n.p2align 4\n"
	"cold_func.cold:\n"
	"	add $2, %rax\n"
	"	jmp 3b\n"
	".size cold_func.cold, .-cold_func.cold\n"
	/* x * 3 + 1 like fp_func, patched with wrong expected bytes */
	".globl expect_func\n.type expect_func, @function\n.p2align 4\n"
	"expect_func:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	lea 1(%rdi,%rdi,2), %rax\n"
	"	pop %rbp\n"
	"	ret\n"
	".size expect_func, .-expect_func\n"
	/* adds 1 until >= 5, looping through a jump table (PIC: offsets from the table) whose
	 * entries land at +3, inside the first 5 bytes: no direct branch goes there */
	".globl jt_func\n.type jt_func, @function\n.p2align 4\n"
	"jt_func:\n"
	"	mov %rdi, %rax\n"
	"6:	add $1, %rax\n"
	"	cmp $5, %rax\n"
	"	jge 7f\n"
	"	lea jt_table(%rip), %rdx\n"
	"	mov %eax, %ecx\n"
	"	and $1, %ecx\n"
	"	movslq (%rdx,%rcx,4), %rcx\n"
	"	add %rdx, %rcx\n"
	"	jmp *%rcx\n"
	"7:	ret\n"
	".size jt_func, .-jt_func\n"
	".section .rodata\n.p2align 2\n"
	"jt_table: .long 6b - jt_table, 6b - jt_table\n"
	".data\n.p2align 3\n"
	"rip_data: .quad 7\n"
	".text\n");

/* C as gcc makes it (-O2): a static function (a local symbol) called by a global one; noipa,
 * so that c_func calls c_static itself and not a specialized clone */
static __attribute__((noipa)) long c_static(long x)
{
	long s = 0;

	for (long i = 0; i < x; i++)
		s += (i * i) ^ x;
	return s;
}

__attribute__((noipa)) long c_func(long x)
{
	return c_static(x) + x;
}

/* a switch gcc compiles to a jump table (PIC or absolute): its cases land after the first
 * bytes, so the table check must not refuse it */
static volatile long g_zero; /* 0, read at run time: no case folds into a table of values */

__attribute__((noipa)) long c_switch(long x)
{
	long y = x + g_zero;

	switch (x) {
	case 0: return y + 11;
	case 1: return y * 7;
	case 2: return y + 100;
	case 3: return y << 4;
	case 4: return y ^ 0x55;
	case 5: return y - 3;
	case 6: return y * y;
	case 7: return 1000 - y;
	default: return -y;
	}
}

/* the calls go through volatile pointers: the compiler must not fold or inline them */
static long call(long (*volatile f)(long), long x)
{
	return f(x);
}

int main(void)
{
	static const struct { const char *name; long (*f)(long); long arg; } t[] = {
		{ "fp_func", fp_func, 5 }, { "rip_func", rip_func, 5 },
		{ "rip_long_func", rip_long_func, 5 }, { "jcc_func", jcc_func, 0 },
		{ "jcc_func", jcc_func, 9 }, { "call_func", call_func, 5 },
		{ "tail_func", tail_func, 5 }, { "short_func", short_func, 5 },
		{ "loop_func", loop_func, 5 }, { "cold_func", cold_func, 1 },
		{ "expect_func", expect_func, 5 }, { "c_func", c_func, 6 },
		{ "c_static", c_static, 6 }, { "jt_func", jt_func, 1 },
		{ "c_switch", c_switch, 4 }, { "c_switch", c_switch, 9 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		printf("%s(%ld) = %ld\n", t[i].name, t[i].arg, call(t[i].f, t[i].arg));
	/* twice more through the same patched entry: a trampoline runs as often as needed */
	printf("fp_func(7) = %ld\n", call(fp_func, 7));
	printf("call_func(1) = %ld\n", call(call_func, 1));
	return fflush(stdout) ? EXIT_FAILURE : EXIT_SUCCESS;
}
