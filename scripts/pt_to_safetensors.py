#!/usr/bin/env python3
"""Converts a PyTorch checkpoint to safetensors, for clformer.

    scripts/pt_to_safetensors.py IN.pt|pytorch_model.bin OUT.safetensors

IN is read with torch.load(weights_only=True) (no code in the file runs) and is either a bare
state_dict (what `torch.save(model.state_dict(), path)` and transformers' pytorch_model.bin
hold) or the tutorial's checkpoint dict, whose "model_state_dict" is taken (the optimizer
state and the rest are left out). Every tensor is written under its own name, contiguous,
in its own dtype; tensors that share storage (tied weights) are written once each. The
names are kept: the tutorial's match clformer's weight names (README, "Weights"), and a
transformers MarianMTModel's are what `clformer import marian` reads.

Errors (exit 1, one line on stderr): a file torch cannot load with weights_only=True, a
.bin or .pt that is not a state dict (a mapping of names to tensors), a name holding
something other than a tensor. OUT is written to OUT.tmp.<pid> and renamed: never half a
file. Needs python3-torch (Debian) and nothing else.
"""
import json
import os
import struct
import sys

DTYPES = {}  # torch dtype -> safetensors dtype name, filled in main() once torch is loaded


def fail(msg):
    print("pt_to_safetensors: " + msg, file=sys.stderr)
    sys.exit(1)


def state_dict_of(obj, path):
    if isinstance(obj, dict) and "model_state_dict" in obj:
        obj = obj["model_state_dict"]
    if not isinstance(obj, dict) or not obj:
        fail("%s: not a state dict (expected a mapping of names to tensors, or a dict with "
             "\"model_state_dict\"; got %s)" % (path, type(obj).__name__))
    return obj


def write_safetensors(tensors, out):
    """tensors: list of (name, dtype name, shape, bytes); the header padded to 8 bytes."""
    header, offset = {}, 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = "%s.tmp.%d" % (out, os.getpid())
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for _, _, _, data in tensors:
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        fail("%s: cannot write: %s" % (out, e.strerror))


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip().split("\n\n")[1].strip(), file=sys.stderr)
        sys.exit(2)
    src, out = sys.argv[1], sys.argv[2]
    import torch
    DTYPES.update({torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
                   torch.float64: "F64", torch.int64: "I64", torch.int32: "I32",
                   torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"})
    try:
        obj = torch.load(src, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        fail("%s: no such file" % src)
    except Exception as e:  # torch raises many kinds for a file it cannot read
        fail("%s: cannot be loaded with torch.load(weights_only=True): %s"
             % (src, str(e).splitlines()[0] if str(e) else type(e).__name__))
    sd = state_dict_of(obj, src)
    tensors = []
    for name, t in sd.items():
        if not isinstance(name, str) or not isinstance(t, torch.Tensor):
            fail("%s: entry %r is a %s, not a tensor: not a state dict"
                 % (src, name, type(t).__name__))
        if t.dtype not in DTYPES:
            fail("%s: tensor %s has dtype %s, which safetensors cannot hold" % (src, name, t.dtype))
        c = t.detach().contiguous()
        data = c.view(torch.uint8).numpy().tobytes() if c.numel() else b""
        tensors.append((name, DTYPES[t.dtype], tuple(c.shape), data))
    write_safetensors(tensors, out)
    print("%s: %d tensors -> %s" % (src, len(tensors), out))


if __name__ == "__main__":
    main()
