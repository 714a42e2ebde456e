// spm_shim.cc - the C view of the SentencePiece library (see spm_shim.h). Every entry
// catches all C++ exceptions (std::bad_alloc included) and reports failed library
// statuses through clf_error, with the library's message on one line.
#include "text/spm_shim.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

struct clf_spm {
    sentencepiece::SentencePieceProcessor proc;
};

namespace
{

// The library's message on one line (its messages may hold line breaks).
std::string one_line(const char *msg)
{
    std::string s = msg ? msg : "";
    for (char &c : s)
        if (c == '\n' || c == '\r')
            c = ' ';
    while (!s.empty() && s.back() == ' ')
        s.pop_back();
    return s;
}

clf_status from_exception(const char *what)
{
    try {
        throw;
    } catch (const std::bad_alloc &) {
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory", what);
    } catch (const std::exception &e) {
        return clf_error(CLF_ERR_INTERNAL, "%s: %s", what, one_line(e.what()).c_str());
    } catch (...) {
        return clf_error(CLF_ERR_INTERNAL, "%s: unknown C++ exception", what);
    }
}

// s as a malloc'd buffer (with a NUL after its n bytes).
clf_status copy_out(const std::string &s, const char *what, char **data, size_t *n)
{
    char *p = static_cast<char *>(std::malloc(s.size() + 1));
    if (!p)
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory", what);
    std::memcpy(p, s.data(), s.size());
    p[s.size()] = '\0';
    *data = p;
    if (n)
        *n = s.size();
    return CLF_OK;
}

// A failed library status as CLF_ERR_INPUT "<what>: <the library's message>".
template <typename Status> clf_status failed(const Status &st, const char *what)
{
    return clf_error(CLF_ERR_INPUT, "%s: %s", what, one_line(st.message()).c_str());
}

// text[0..len) encoded into *v, as ids (Piece int) or as pieces (Piece std::string). Throws
// what the library throws: the caller catches.
template <typename Piece>
clf_status encode(const clf_spm *spm, const char *text, size_t len, std::vector<Piece> *v)
{
    auto st = spm->proc.Encode(absl::string_view(text, len), v);
    return st.ok() ? CLF_OK : failed(st, "SentencePiece encode");
}

// The n ids (Piece int, Item int32_t) or pieces (Piece std::string, Item a C string) at items,
// decoded into *text (malloc'd, NUL-terminated).
template <typename Piece, typename Item>
clf_status decode(const clf_spm *spm, const Item *items, int n, char **text)
{
    *text = nullptr;
    try {
        std::vector<Piece> v(items, items + n);
        std::string s;
        auto st = spm->proc.Decode(v, &s);
        if (!st.ok())
            return failed(st, "SentencePiece decode");
        return copy_out(s, "SentencePiece decode", text, nullptr);
    } catch (...) {
        return from_exception("SentencePiece decode");
    }
}

} // namespace

extern "C" {

clf_status clf_spm_load(const void *data, size_t n, const char *name, clf_spm **out)
{
    *out = nullptr;
    clf_spm *spm = nullptr;
    try {
        spm = new clf_spm;
        auto st = spm->proc.LoadFromSerializedProto(
            absl::string_view(static_cast<const char *>(data), n));
        if (!st.ok()) {
            delete spm;
            return clf_error(CLF_ERR_INPUT, "%s: not a valid SentencePiece model: %s", name,
                             one_line(st.message()).c_str());
        }
        *out = spm;
        return CLF_OK;
    } catch (...) {
        delete spm;
        return from_exception(name);
    }
}

void clf_spm_free(clf_spm *spm)
{
    delete spm;
}

clf_status clf_spm_serialize(const clf_spm *spm, char **data, size_t *n)
{
    *data = nullptr;
    try {
        return copy_out(spm->proc.serialized_model_proto(), "SentencePiece model", data, n);
    } catch (...) {
        return from_exception("SentencePiece model");
    }
}

int clf_spm_size(const clf_spm *spm)
{
    return spm->proc.GetPieceSize();
}

int32_t clf_spm_piece_id(const clf_spm *spm, const char *piece, size_t len)
{
    try {
        absl::string_view p(piece, len);
        int id = spm->proc.PieceToId(p);
        // PieceToId answers unk_id for a piece the model lacks.
        if (id < 0 || (id == spm->proc.unk_id() && spm->proc.IdToPiece(id) != p))
            return -1;
        return id;
    } catch (...) {
        return -1;
    }
}

const char *clf_spm_piece(const clf_spm *spm, int32_t id)
{
    if (id < 0 || id >= spm->proc.GetPieceSize())
        return nullptr;
    try {
        return spm->proc.IdToPiece(id).c_str();
    } catch (...) {
        return nullptr;
    }
}

void clf_spm_specials(const clf_spm *spm, int32_t *unk, int32_t *bos, int32_t *eos, int32_t *pad)
{
    *unk = spm->proc.unk_id();
    *bos = spm->proc.bos_id();
    *eos = spm->proc.eos_id();
    *pad = spm->proc.pad_id();
}

int clf_spm_is_special(const clf_spm *spm, int32_t id)
{
    if (id < 0 || id >= spm->proc.GetPieceSize())
        return 0;
    try {
        return spm->proc.IsUnknown(id) || spm->proc.IsControl(id);
    } catch (...) {
        return 0;
    }
}

clf_status clf_spm_encode(const clf_spm *spm, const char *text, size_t len, int32_t **ids, int *n)
{
    *ids = nullptr;
    *n = 0;
    try {
        std::vector<int> v;
        clf_status st = encode(spm, text, len, &v);
        if (st != CLF_OK || v.empty())
            return st;
        int32_t *p = static_cast<int32_t *>(std::malloc(v.size() * sizeof *p));
        if (!p)
            return clf_error(CLF_ERR_NOMEM, "SentencePiece encode: out of memory");
        for (size_t i = 0; i < v.size(); i++)
            p[i] = v[i];
        *ids = p;
        *n = static_cast<int>(v.size());
        return CLF_OK;
    } catch (...) {
        return from_exception("SentencePiece encode");
    }
}

clf_status clf_spm_decode(const clf_spm *spm, const int32_t *ids, int n, char **text)
{
    return decode<int>(spm, ids, n, text);
}

clf_status clf_spm_encode_pieces(const clf_spm *spm, const char *text, size_t len, char **pool,
                                 int *n)
{
    *pool = nullptr;
    *n = 0;
    try {
        std::vector<std::string> v;
        clf_status st = encode(spm, text, len, &v);
        if (st != CLF_OK || v.empty())
            return st;
        std::string all;
        for (const auto &p : v) {
            all += p;
            all.push_back('\0');
        }
        char *p = static_cast<char *>(std::malloc(all.size()));
        if (!p)
            return clf_error(CLF_ERR_NOMEM, "SentencePiece encode: out of memory");
        std::memcpy(p, all.data(), all.size());
        *pool = p;
        *n = static_cast<int>(v.size());
        return CLF_OK;
    } catch (...) {
        return from_exception("SentencePiece encode");
    }
}

clf_status clf_spm_decode_pieces(const clf_spm *spm, const char *const *pieces, int n, char **text)
{
    return decode<std::string>(spm, pieces, n, text);
}

clf_status clf_spm_train(const char *const *inputs, int n_inputs, int vocab_size,
                         const char *model_type, char **data, size_t *n)
{
    *data = nullptr;
    *n = 0;
    try {
        std::string input;
        for (int i = 0; i < n_inputs; i++) {
            // The trainer's "input" is a comma-separated list.
            if (std::strchr(inputs[i], ','))
                return clf_error(CLF_ERR_INPUT,
                                 "%s: the SentencePiece trainer cannot read a file whose "
                                 "name holds a comma",
                                 inputs[i]);
            input += (i ? "," : "") + std::string(inputs[i]);
        }
        std::unordered_map<std::string, std::string> args = {
            {"input", input},
            {"vocab_size", std::to_string(vocab_size)},
            {"model_type", model_type},
            // the word level's [UNK] [PAD] [SOS] [EOS] ids, so that a model config's
            // pad_id (default 1) fits either kind
            {"unk_id", "0"},
            {"pad_id", "1"},
            {"bos_id", "2"},
            {"eos_id", "3"},
            {"minloglevel", "2"}, // errors only: they come back in the status anyway
        };
        std::string model;
        auto st = sentencepiece::SentencePieceTrainer::Train(args, nullptr, &model);
        if (!st.ok())
            return failed(st, "SentencePiece training");
        return copy_out(model, "SentencePiece training", data, n);
    } catch (...) {
        return from_exception("SentencePiece training");
    }
}

} // extern "C"
