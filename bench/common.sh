# The set-up bench/run.sh and bench/train.sh share, sourced from the repository root with
# the script's arguments: [threads] [config] (defaults: all cores, configs/base-prenorm.yaml).
# Sets threads, config, clf (the CLI in ${BUILD:-build}) and out (runs/bench), and writes
# the random weights both frameworks load to $out/weights.safetensors.

# Some shells preset OPENBLAS_CORETYPE=Haswell, which halves OpenBLAS on AVX-512 machines:
# let OpenBLAS pick the core (the CPU backend's description reports which one it uses).
unset OPENBLAS_CORETYPE
. scripts/env.sh
threads=${1:-$(nproc)}
config=${2:-configs/base-prenorm.yaml}
clf=${BUILD:-build}/bin/clformer
out=runs/bench
mkdir -p "$out"
"$clf" init -c "$config" --seed 1 -o "$out/weights.safetensors"
