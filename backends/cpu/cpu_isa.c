/* The CPU backend's kernel level, chosen once at open (clf_backend.isa): the best of
 * generic (portable C), AVX2 (with FMA and F16C) and AVX-512 (F, BW and VL) that this CPU
 * and its OS run, capped by the environment variable CLF_CPU_ISA. The F16/BF16 products
 * (cpu_gemv.c), the int8 few-row kernel (cpu_gemm_i8.c), decoding's attention
 * (cpu_attention_avx2.c) and the softmax (cpu_softmax.c) pick their SIMD kernels by it;
 * the build itself targets baseline x86-64. */
#include <stdlib.h>
#include <string.h>

#include "clformer/backend.h"
#include "cpu_internal.h"

#if CPU_X86
#include <cpuid.h>
#endif

static const char *const isa_names[] = {"generic", "avx2", "avx512"};

const char *cpu_isa_name(cpu_isa isa)
{
    return isa_names[isa];
}

#if CPU_X86
/* F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports has no "f16c". */
static int cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

/* The best level this CPU (and its OS, which must save the wider registers) runs. */
static cpu_isa isa_detect(void)
{
#if CPU_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma") && cpu_has_f16c())
        return CPU_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c())
        return CPU_ISA_AVX2;
#endif
    return CPU_ISA_GENERIC;
}

clf_status cpu_isa_choose(cpu_isa *out, int *capped)
{
    cpu_isa best = isa_detect();
    *out = best;
    *capped = 0;
    const char *env = getenv("CLF_CPU_ISA");
    if (!env || !env[0])
        return CLF_OK;
    *capped = 1;
    for (int i = 0; i <= CPU_ISA_AVX512; i++)
        if (strcmp(env, isa_names[i]) == 0) {
            /* a cap: asking for more than the CPU has gives what it has */
            *out = (cpu_isa)i < best ? (cpu_isa)i : best;
            return CLF_OK;
        }
    return clf_error(CLF_ERR_INPUT,
                     "cpu: CLF_CPU_ISA='%s' is not one of generic, avx2, avx512 (or unset for "
                     "the best this CPU has)",
                     env);
}
