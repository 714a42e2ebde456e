/* clformer/weights.h - the model's parameters under the tutorial PyTorch names.
 *
 * The expected tensors (names and shapes) follow from the model config; a weights file
 * must hold exactly those (F32, or F16/BF16 converted on load). A missing, extra or
 * mis-shaped tensor is an error naming it. With positional: learned the list has
 * src_pos.embedding.weight and tgt_pos.embedding.weight [max_len, d] after the two token
 * embeddings. A tied matrix (tie_embeddings) is one parameter, tgt_embed.embedding.weight:
 * projection_layer.proj.weight (decoder, all) and src_embed.embedding.weight (all) are then
 * not in the list. A file may store it under any one of those names (safetensors'
 * save_model keeps one, projection_layer.proj.weight), or under several if they are equal
 * (PyTorch's state_dict() of a tied model lists them all); copies that differ are an
 * error, and so is a file with none of them. */
#ifndef CLFORMER_WEIGHTS_H
#define CLFORMER_WEIGHTS_H

#include <stdint.h>

#include "clformer/config.h"
#include "clformer/export.h"
#include "clformer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum clf_init_kind {
    CLF_INIT_XAVIER = 0,  /* matrices, embeddings: U(-a, a), a = sqrt(6/(fan_in+fan_out)) */
    CLF_INIT_LINEAR_BIAS, /* nn.Linear's default bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
    CLF_INIT_ONES,        /* norm alpha */
    CLF_INIT_ZEROS        /* norm bias */
} clf_init_kind;

typedef struct clf_weight_spec {
    char name[CLF_TENSOR_NAME_MAX];
    int ndim;         /* 1 or 2 */
    int64_t shape[2]; /* [out, in] for Linear weights */
    clf_init_kind init;
    int fan_in; /* for CLF_INIT_LINEAR_BIAS */
} clf_weight_spec;

/* The parameter list for cfg, in a fixed order (embeddings, encoder layers, encoder.norm,
 * decoder layers, decoder.norm, projection). *out is malloc'd; free() it. */
CLF_API clf_status clf_weight_specs(const clf_model_config *cfg, clf_weight_spec **out, int *count);

/* The precision of the weight matrices that linear layers multiply with (everything else
 * stays F32): `--weight-type`, `clformer quantize --type`. */
typedef enum clf_weight_type {
    CLF_WEIGHT_F32 = 0,
    CLF_WEIGHT_F16,  /* IEEE half copy, read by the few-row products */
    CLF_WEIGHT_BF16, /* bfloat16 copy, read by the few-row products */
    CLF_WEIGHT_INT8  /* per-output-channel symmetric int8, every product */
} clf_weight_type;

/* "f32", "f16", "bf16", "int8" */
CLF_API const char *clf_weight_type_name(clf_weight_type t);
/* The type spelled s (as clf_weight_type_name writes it); CLF_ERR_INPUT naming s else. */
CLF_API clf_status clf_weight_type_parse(const char *s, clf_weight_type *out);

/* The metadata key a quantized file records its type under, and the suffix of the
 * per-output-channel scales of an I8 tensor: "<name>.scale", F32 [rows]. */
#define CLF_WEIGHT_TYPE_META "clformer.weight_type"
#define CLF_SCALE_SUFFIX     ".scale"

/* Every parameter as F32, in clf_weight_specs order: a host copy, or (clf_weights_map) the
 * file they are read from on demand. */
typedef struct clf_weights_source clf_weights_source;
typedef struct clf_weights {
    int count;
    clf_weight_spec *specs;
    float **data; /* data[i]: numel(specs[i]) floats, owned; NULL after clf_weights_map */
    clf_weights_source *source; /* clf_weights_map: the mapped file, else NULL */
    /* clf_weights_load: the type the file was quantized to (its CLF_WEIGHT_TYPE_META, or
     * int8 when it holds I8 tensors), CLF_WEIGHT_F32 otherwise. The data above is always
     * F32: I8 tensors are dequantized (q * scale), F16/BF16 converted. */
    clf_weight_type stored_type;
} clf_weights;

/* The name whose tensor `name` is with cfg's tie_embeddings ("tgt_embed.embedding.weight"
 * for a tied projection or source embedding), or NULL when name is a tensor of its own. */
CLF_API const char *clf_weights_tied_to(const clf_model_config *cfg, const char *name);

/* Loads and checks a safetensors file against cfg. Tensors named "optim.*" (optimizer
 * state in training checkpoints) and the tutorial's PE buffers "src_pos.pe"/"tgt_pos.pe"
 * are ignored; any other tensor the config does not expect is an error. A 2-D weight may
 * be I8 with its scales "<name>.scale" (F32 [rows], finite, >= 0; clformer quantize's
 * files): it is dequantized; a scale missing, of another dtype or shape, is an error
 * naming it. */
CLF_API clf_status clf_weights_load(const char *path, const clf_model_config *cfg,
                                    clf_weights **out);
/* clf_weights_load's checks of the file (names, shapes, dtypes, I8 scales, tied copies), its
 * values left in it: the file stays mapped, every data[i] is NULL, and clf_weights_read
 * converts a parameter's elements when they are needed (checking them finite then, with
 * clf_weights_load's errors). clf_model_create_inference takes such weights: the host then
 * never holds every F32 value at once, and with int8 the matrices go from the file to
 * their int8 copy without an F32 copy on the device. */
CLF_API clf_status clf_weights_map(const char *path, const clf_model_config *cfg,
                                   clf_weights **out);
/* Elements [first, first + count) of parameter i as F32 into dst: from data[i], else
 * converted from the mapped file (CLF_ERR_INPUT naming the tensor for a non-finite value,
 * or a bad scale of an I8 tensor). */
CLF_API clf_status clf_weights_read(const clf_weights *w, int i, int64_t first, int64_t count,
                                    float *dst);
/* Writes the tensors of the safetensors file in_path to out_path (atomically) with the
 * matrices that linear layers multiply with (2-D tensors other than embedding tables) as
 * type: F16 or BF16 tensors of the same name, or an I8 tensor of the same name plus
 * "<name>.scale" F32 [rows] (clf_quantize_rows_i8), and CLF_WEIGHT_TYPE_META = the type's
 * name. Other tensors are copied as they are; optimizer state ("optim.*") is dropped. A
 * matrix that is not F32/F16/BF16 (an already quantized file), or a value the type cannot
 * hold (F16 beyond 65504, a non-finite number) is CLF_ERR_INPUT naming the tensor.
 * flags CLF_QUANTIZE_EMBEDDINGS: the embedding tables too, for a smaller file (a tied model's
 * table is its largest tensor); clf_weights_load reads them back as F32, so lookups then see
 * the rounded values. 0: tables stay as they are. A tied model's table is one: a
 * projection_layer.proj.weight with no tgt_embed.embedding.weight in the file (safetensors'
 * save_model), and one that, like a src_embed.embedding.weight, is an exact copy of
 * tgt_embed.embedding.weight is left out (the table written once, as clformer writes it). */
#define CLF_QUANTIZE_EMBEDDINGS 1u
CLF_API clf_status clf_weights_quantize_file(const char *in_path, const char *out_path,
                                             clf_weight_type type, unsigned flags);
/* Reproducible initialisation from seed (same seed, same weights, any machine). */
CLF_API clf_status clf_weights_init(const clf_model_config *cfg, uint64_t seed, clf_weights **out);
/* Writes F32 safetensors (atomically), with optional metadata pairs. */
CLF_API clf_status clf_weights_save(const clf_weights *w, const char *path, const char *const *meta,
                                    int n_meta);
/* Views of w's parameters as F32 tensors (data points into w), e.g. to write them with
 * optimizer state in one clf_safetensors_write. *out is malloc'd; free() it. */
CLF_API clf_status clf_weights_as_tensors(const clf_weights *w, clf_tensor **out);
/* Elements of a parameter (its shape's product). */
CLF_API int64_t clf_weight_spec_numel(const clf_weight_spec *s);

/* Index of name, or -1. */
CLF_API int clf_weights_find(const clf_weights *w, const char *name);
CLF_API void clf_weights_free(clf_weights *w);

#ifdef __cplusplus
}
#endif
#endif
