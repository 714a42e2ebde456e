/* clformer: the command-line front end. Each subcommand lives in tools/cmd_<name>.c. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clformer/fault.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
    int own_thread_policy; /* calls cli_thread_wait_policy itself, after parsing */
} command;

static const command commands[] = {
    {"info", clf_cmd_info, "version, backends found, their devices", 0},
    {"devices", clf_cmd_devices, "OpenCL platforms and devices (like clinfo -l)", 0},
    {"config", clf_cmd_config, "-c model.yaml --dump: the resolved config, or the error", 0},
    {"init", clf_cmd_init, "-c model.yaml --seed N -o w.safetensors: random weights", 0},
    {"forward", clf_cmd_forward, "-c model.yaml -w w.safetensors -i in -o out: run the model", 0},
    {"translate", clf_cmd_translate,
     "-m MODEL_DIR | -c model.yaml -w w --src-vocab s --tgt-vocab t: stdin -> stdout", 1},
    {"import", clf_cmd_import, "HF_DIR -o MODEL_DIR: a transformers MarianMTModel or M2M-100", 0},
    {"serve", clf_cmd_serve, "-m MODEL_DIR [--port P]: translation over HTTP (LibreTranslate API)",
     0},
    {"vocab", clf_cmd_vocab, "-o vocab.json FILE | --src-out s --tgt-out t TRAIN: vocabularies", 0},
    {"train", clf_cmd_train, "-c experiment.yaml [--resume]: train, validate, checkpoint", 0},
    {"bench", clf_cmd_bench, "-c model.yaml [--backend B]: tokens/s, GFLOP/s, memory", 0},
    {"quantize", clf_cmd_quantize, "-w IN -o OUT --type int8|bf16|f16: quantized weights", 0},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: clformer <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n`clformer <command> --help` for a command's options.\n"
               "Exit codes: 0 ok, 2 bad input, 3 backend/device failure.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("clformer %s\n", CLF_VERSION_STRING);
        return 0;
    }
    /* A file past the size limit (ulimit -f) is a failed write (EFBIG) that clformer
     * reports, naming the file, and cleans up after, as it does a full disk: not a
     * signal that kills the process halfway. */
    signal(SIGXFSZ, SIG_IGN);
    clf_status st = clf_fault_check_env(); /* a typo in CLF_FAULT would inject nothing */
    if (st != CLF_OK)
        return cli_fail(st);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            if (!commands[i].own_thread_policy)
                cli_thread_wait_policy(CLI_THREADS_BLAS);
            return commands[i].run(argc - 1, argv + 1);
        }
    fprintf(stderr, "clformer: unknown command '%s' (try `clformer --help`)\n", argv[1]);
    return 2;
}
