/* The CPU backend's oneDNN matmuls: the products of int8 weights (cpu_gemm_i8.c) and, on a
 * CPU with AVX512_BF16, those of BF16 weights with many rows (cpu_gemm_bf16.c). One engine
 * and stream per backend, and a primitive per shape and kind kept in a small cache: making
 * one costs about as much as running it. */
#include <dnnl.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

/* The int8 weights' packed layout (cpu_i8_pack.c describes it): what oneDNN's brgemm
 * matmul reads without copying the weights first. */
#define CPU_I8_PACKED_TAG dnnl_BA16a64b4a

#define DNNL_CACHE 48 /* primitives kept: a decoding step has about 6 shapes, an encoder 6 */

typedef struct dnnl_prim {
    int used;
    cpu_matmul_kind kind;
    cpu_matmul_shape sh;
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, dst;
} dnnl_prim;

struct cpu_dnnl_cache {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_prim prims[DNNL_CACHE];
    int next; /* the entry replaced next when the cache is full */
};

static void prim_free(dnnl_prim *p)
{
    if (p->src)
        dnnl_memory_destroy(p->src);
    if (p->wei)
        dnnl_memory_destroy(p->wei);
    if (p->dst)
        dnnl_memory_destroy(p->dst);
    if (p->prim)
        dnnl_primitive_destroy(p->prim);
    memset(p, 0, sizeof *p);
}

void cpu_dnnl_close(cpu_dnnl *q)
{
    if (!q)
        return;
    if (q->cache) {
        for (int i = 0; i < DNNL_CACHE; i++)
            prim_free(&q->cache->prims[i]);
        if (q->cache->stream)
            dnnl_stream_destroy(q->cache->stream);
        if (q->cache->engine)
            dnnl_engine_destroy(q->cache->engine);
        free(q->cache);
    }
    free(q->src);
    free(q->wsrc);
    free(q->row_scale);
    free(q->acc);
    free(q);
}

clf_status cpu_dnnl_open(cpu_dnnl **out)
{
    *out = NULL;
    cpu_dnnl *q = calloc(1, sizeof *q);
    if (!q || !(q->cache = calloc(1, sizeof *q->cache))) {
        free(q);
        return clf_error(CLF_ERR_NOMEM, "cpu: out of memory");
    }
    q->packs = -1; /* asked on first use (cpu_dnnl_i8_packs) */
    if (dnnl_engine_create(&q->cache->engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&q->cache->stream, q->cache->engine, dnnl_stream_default_flags) !=
            dnnl_success) {
        cpu_dnnl_close(q);
        return clf_error(CLF_ERR_BACKEND, "cpu: oneDNN: cannot create a CPU engine and stream");
    }
    *out = q;
    return CLF_OK;
}

/* [k, n] s8 weights (W^T) in the packed layout */
static dnnl_status_t packed_weights_md(dnnl_memory_desc_t *md, int n, int k)
{
    dnnl_dims_t dw = {k, n};
    return dnnl_memory_desc_init_by_tag(md, 2, dw, dnnl_s8, CPU_I8_PACKED_TAG);
}

/* The cached primitive for this kind and shape, made on first use. */
static clf_status prim_get(struct cpu_dnnl_cache *c, cpu_matmul_kind kind,
                           const cpu_matmul_shape *sh, dnnl_prim **out)
{
    for (int i = 0; i < DNNL_CACHE; i++) {
        dnnl_prim *p = &c->prims[i];
        if (p->used && p->kind == kind && memcmp(&p->sh, sh, sizeof *sh) == 0) {
            *out = p;
            return CLF_OK;
        }
    }
    dnnl_prim *p = &c->prims[c->next];
    c->next = (c->next + 1) % DNNL_CACHE;
    prim_free(p);
    const int bf16 = kind == CPU_MATMUL_BF16;
    dnnl_memory_desc_t md_a, md_w, md_c;
    /* op(A) [m, k] and op(B) [k, n] by strides over their stored rows (a transposed
     * operand is its stored matrix read down the columns), or B in the packed layout; C
     * dense */
    dnnl_dims_t da = {sh->m, sh->k}, dw = {sh->k, sh->n}, dc = {sh->m, sh->n}, sc = {sh->n, 1};
    dnnl_dims_t sa = {sh->lda, 1}, sw = {sh->ldb, 1};
    if (sh->trans_a)
        sa[0] = 1, sa[1] = sh->lda;
    if (sh->trans_b)
        sw[0] = 1, sw[1] = sh->ldb;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_matmul_desc_t mm;
    if (dnnl_memory_desc_init_by_strides(&md_a, 2, da, bf16 ? dnnl_bf16 : dnnl_u8, sa) !=
            dnnl_success ||
        (kind == CPU_MATMUL_INT8_PACKED
             ? packed_weights_md(&md_w, sh->n, sh->k)
             : dnnl_memory_desc_init_by_strides(&md_w, 2, dw, bf16 ? dnnl_bf16 : dnnl_s8, sw)) !=
            dnnl_success ||
        dnnl_memory_desc_init_by_strides(&md_c, 2, dc, bf16 ? dnnl_f32 : dnnl_s32, sc) !=
            dnnl_success ||
        dnnl_matmul_desc_init(&mm, &md_a, &md_w, NULL, &md_c) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &mm, NULL, c->engine, NULL) != dnnl_success ||
        dnnl_primitive_create(&p->prim, pd) != dnnl_success ||
        dnnl_memory_create(&p->src, &md_a, c->engine, DNNL_MEMORY_NONE) != dnnl_success ||
        dnnl_memory_create(&p->wei, &md_w, c->engine, DNNL_MEMORY_NONE) != dnnl_success ||
        dnnl_memory_create(&p->dst, &md_c, c->engine, DNNL_MEMORY_NONE) != dnnl_success) {
        if (pd)
            dnnl_primitive_desc_destroy(pd);
        prim_free(p);
        return clf_error(CLF_ERR_BACKEND, "cpu: gemm: oneDNN has no %s matmul for m=%d n=%d k=%d",
                         bf16 ? "bf16" : "int8", sh->m, sh->n, sh->k);
    }
    dnnl_primitive_desc_destroy(pd);
    p->used = 1;
    p->kind = kind;
    p->sh = *sh;
    *out = p;
    return CLF_OK;
}

clf_status cpu_dnnl_matmul(cpu_dnnl *q, cpu_matmul_kind kind, const cpu_matmul_shape *sh, void *src,
                           const void *wei, void *dst, int threads)
{
    dnnl_prim *p = NULL;
    clf_status st = prim_get(q->cache, kind, sh, &p);
    if (st != CLF_OK)
        return st;
    /* oneDNN's regions take the calling thread's OpenMP thread count, which the thread
     * that opened the backend set (cpu_open) but another thread may not have */
    omp_set_num_threads(threads);
    dnnl_memory_set_data_handle(p->src, src);
    dnnl_memory_set_data_handle(p->wei, (void *)(uintptr_t)wei);
    dnnl_memory_set_data_handle(p->dst, dst);
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, p->src}, {DNNL_ARG_WEIGHTS, p->wei}, {DNNL_ARG_DST, p->dst}};
    if (dnnl_primitive_execute(p->prim, q->cache->stream, 3, args) != dnnl_success ||
        dnnl_stream_wait(q->cache->stream) != dnnl_success)
        return clf_error(CLF_ERR_BACKEND, "cpu: gemm: oneDNN %s matmul failed (m=%d n=%d k=%d)",
                         kind == CPU_MATMUL_BF16 ? "bf16" : "int8", sh->m, sh->n, sh->k);
    return CLF_OK;
}

int cpu_dnnl_i8_packs(cpu_dnnl *q)
{
    if (q->packs >= 0)
        return q->packs;
    /* what oneDNN's u8 x s8 matmul asks its weights to be when free to choose */
    dnnl_memory_desc_t md_a, md_w, md_c, want;
    dnnl_dims_t da = {32, 128}, dw = {128, 128}, dc = {32, 128};
    dnnl_primitive_desc_t pd = NULL;
    dnnl_matmul_desc_t mm;
    q->packs = 0;
    if (dnnl_memory_desc_init_by_tag(&md_a, 2, da, dnnl_u8, dnnl_ab) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&md_w, 2, dw, dnnl_s8, dnnl_format_tag_any) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&md_c, 2, dc, dnnl_s32, dnnl_ab) == dnnl_success &&
        packed_weights_md(&want, 128, 128) == dnnl_success &&
        dnnl_matmul_desc_init(&mm, &md_a, &md_w, NULL, &md_c) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &mm, NULL, q->cache->engine, NULL) == dnnl_success) {
        const dnnl_memory_desc_t *got = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        q->packs = got && dnnl_memory_desc_equal(got, &want);
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return q->packs;
}

clf_status cpu_dnnl_igemm(const cpu_matmul_shape *sh, const uint8_t *src, const int8_t *wei,
                          int32_t *dst, int threads)
{
    const int32_t zero = 0;
    omp_set_num_threads(threads); /* as for cpu_dnnl_matmul */
    if (dnnl_gemm_u8s8s32('N', 'T', 'F', sh->m, sh->n, sh->k, 1.0f, src, sh->lda, 0, wei, sh->ldb,
                          0, 0.0f, dst, sh->n, &zero) != dnnl_success)
        return clf_error(CLF_ERR_BACKEND, "cpu: gemm: oneDNN's int8 gemm failed (m=%d n=%d k=%d)",
                         sh->m, sh->n, sh->k);
    return CLF_OK;
}
