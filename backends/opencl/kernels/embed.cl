/* embed.cl - token embedding with positional encoding. */

/* out: [rows, dim]; ids: I32 [rows]; table: [vocab, dim]; pe: [max_len, dim] (optional).
 *   out[r, d] = table[clamp(ids[r]), d] * scale + pe[pos0 + r % seq_len, d]
 * Out-of-range ids are clamped to [0, vocab) so a bad id never reads outside the table.
 * With has_pos (clf_embed_args.pos_add) pos_add[pos_off], clamped to [0, pos_max], is added
 * to pos0 first.
 * Grid-stride loop over rows * dim elements. Offsets are in elements. */
__kernel void embed(__global float *out, ulong out_off, __global const int *ids, ulong ids_off,
                    __global const float *table, ulong table_off, __global const float *pe,
                    ulong pe_off, int has_pe, int rows, int seq_len, int pos0, int dim, int vocab,
                    float scale, __global const int *pos_add, ulong pos_off, int has_pos,
                    int pos_max)
{
    if (has_pos)
        pos0 += clamp(pos_add[pos_off], 0, pos_max);
    const ulong n = (ulong)rows * (ulong)dim;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const int r = (int)(i / (ulong)dim), d = (int)(i % (ulong)dim);
        const int id = clamp(ids[ids_off + r], 0, vocab - 1);
        float v = table[table_off + (ulong)id * dim + d] * scale;
        if (has_pe)
            v += pe[pe_off + (ulong)(pos0 + r % seq_len) * dim + d];
        out[out_off + i] = v;
    }
}
