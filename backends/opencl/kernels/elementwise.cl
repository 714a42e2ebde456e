/* elementwise.cl - add and the GEMM epilogue. */

/* out, a, b: [n]; out = a + b (out may alias a or b). Grid-stride loop. */
__kernel void add(__global float *out, ulong out_off, __global const float *a, ulong a_off,
                  __global const float *b, ulong b_off, ulong n)
{
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0))
        out[out_off + i] = a[a_off + i] + b[b_off + i];
}

/* c: batch matrices [m, n] at c_off + bt * stride_c, rows ldc apart; bias: [n] (optional).
 *   c = prescale(c) + bias[j], then max(c, 0) if relu
 * prescale is the identity after a GEMM (CLBlast already applied alpha and beta); with
 * k == 0 (no GEMM to run) it is beta * c, and exactly 0 when beta == 0 so that garbage
 * (NaN) in c is dropped, as BLAS does. Grid-stride loop over batch * m * n elements. */
__kernel void bias_relu(__global float *c, ulong c_off, ulong ldc, ulong stride_c, int m, int n,
                        int batch, __global const float *bias, ulong bias_off, int has_bias,
                        int relu, int prescale, float beta)
{
    const ulong mn = (ulong)m * (ulong)n, total = mn * (ulong)batch;
    for (ulong t = get_global_id(0); t < total; t += get_global_size(0)) {
        const ulong bt = t / mn, ij = t % mn;
        const ulong i = ij / (ulong)n, j = ij % (ulong)n;
        __global float *p = c + c_off + bt * stride_c + i * ldc + j;
        float v = *p;
        if (prescale)
            v = beta == 0.0f ? 0.0f : beta * v;
        if (has_bias)
            v += bias[bias_off + j];
        if (relu)
            v = fmax(v, 0.0f);
        *p = v;
    }
}
