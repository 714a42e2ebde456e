/* The op-plugin loader and the YAML that names plugin ops: hostile plugins (real shared
 * objects built by tests/plugin_hostile.cmake) are refused with a message naming the file
 * and the reason and leave nothing registered; the shipped plugins are found on the search
 * path; `plugins:` entries resolve relative to the YAML; a backend without an op's form
 * refuses the model before anything runs, naming the plugin, the op and the backend.
 * (The ops' numbers are checked by the plugin_ops suite and the PyTorch fixtures.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clformer/backend.h"
#include "clformer/config.h"
#include "clformer/model.h"
#include "clformer/plugin.h"
#include "clformer/weights.h"
#include "testutil.h"

#define HOSTILE(name) CLF_HOSTILE_PLUGIN_DIR "/clformer-plugin-" name ".so"
#define SHIPPED(name) CLF_BUILD_BACKEND_DIR "/clformer-plugin-" name ".so"

/* A small model whose sizes do not matter here; %s is spliced in at the end of model:. */
#define SMALL_MODEL                                                                                \
    "model:\n  src_vocab: 11\n  tgt_vocab: 13\n  max_len: 16\n  d_model: 8\n  layers: 1\n"         \
    "  heads: 2\n  d_ff: 12\n"

static void expect_refused(const char *path, const char *want)
{
    const clf_plugin_api *api = (const clf_plugin_api *)1;
    clf_status st = clf_plugin_load_file(path, &api);
    ck_assert_msg(st == CLF_ERR_INPUT, "%s: loaded (status %d)", path, (int)st);
    ck_assert_ptr_null(api);
    ck_assert_msg(strstr(clf_last_error(), want), "%s: '%s' lacks '%s'", path, clf_last_error(),
                  want);
    ck_assert_msg(strstr(clf_last_error(), path) || strstr(clf_last_error(), "clformer-plugin-"),
                  "the message does not name the file: %s", clf_last_error());
    ck_assert_msg(!strchr(clf_last_error(), '\n'), "not one line: %s", clf_last_error());
}

START_TEST(test_hostile_plugins_refused)
{
    char want[96];
    snprintf(want, sizeof want, "plugin ABI version 999, but this clformer needs version %d",
             CLF_PLUGIN_ABI);
    const struct {
        const char *path, *want;
    } cases[] = {
        {HOSTILE("no_entry"), "not a clformer plugin: no 'clf_plugin_entry' symbol"},
        {HOSTILE("wrong_abi"), want},
        {HOSTILE("collides_builtin"), "op 'relu' collides with clformer's built-in 'relu'"},
        {HOSTILE("bad_name"), "is named 'Bad-Name'"},
        {HOSTILE("half_cpu"), "half a CPU form"},
        {HOSTILE("no_forms"), "has no form for any backend"},
        {HOSTILE("bad_kind"), "has kind 42"},
        {HOSTILE("null_ops"), "plugin table is malformed"},
        {HOSTILE("entry_null"), "clf_plugin_entry() returned NULL"},
        {HOSTILE("dup_in_self"), "op 'twin_act' is listed twice"},
        {HOSTILE("not_elf"), "not a loadable plugin"},
        {CLF_HOSTILE_PLUGIN_DIR "/no-such-file.so", "cannot open plugin"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_refused(cases[i].path, cases[i].want);
    /* a refused plugin leaves nothing behind */
    const clf_plugin_op *op = (const clf_plugin_op *)1;
    CLF_ASSERT_OK(clf_plugin_find("twin_act", NULL, &op));
    ck_assert_ptr_null(op);
}
END_TEST

/* A FIFO named as a plugin or a backend is refused at once: dlopen would wait on it. */
START_TEST(test_fifo_refused_without_waiting)
{
    char dir[64], fifo[128];
    snprintf(dir, sizeof dir, "/tmp/clf-plugin-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/clformer-plugin-fifo.so", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    alarm(10); /* a blocked open fails the test instead of hanging the suite */
    const clf_plugin_api *papi = NULL;
    ck_assert_int_eq(clf_plugin_load_file(fifo, &papi), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "not a regular file (a FIFO)"), "%s", clf_last_error());
    const clf_backend_api *bapi = NULL;
    ck_assert_int_eq(clf_backend_load_file(fifo, &bapi), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "cannot open backend") &&
                      strstr(clf_last_error(), "not a regular file (a FIFO)"),
                  "%s", clf_last_error());
    alarm(0);
    unlink(fifo);
    rmdir(dir);
}
END_TEST

START_TEST(test_collision_with_shipped_plugin)
{
    const clf_plugin_op *gelu = NULL;
    CLF_ASSERT_OK(clf_plugin_find("gelu", "", &gelu));
    ck_assert_ptr_nonnull(gelu);
    ck_assert_ptr_nonnull(strstr(clf_plugin_path_of(gelu), "clformer-plugin-activations.so"));
    expect_refused(HOSTILE("collides_shipped"), "op 'gelu' collides with the op of that name in");
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "clformer-plugin-activations.so"));
    /* the registered op is still the shipped one */
    const clf_plugin_op *again = NULL;
    CLF_ASSERT_OK(clf_plugin_find("gelu", NULL, &again));
    ck_assert_ptr_eq(gelu, again);
}
END_TEST

START_TEST(test_shipped_plugins_and_search)
{
    const clf_plugin_api *a = NULL, *b = NULL;
    CLF_ASSERT_OK(clf_plugin_load_file(SHIPPED("activations"), &a));
    CLF_ASSERT_OK(clf_plugin_load_file(SHIPPED("activations"), &b));
    ck_assert_ptr_eq(a, b); /* one handle per file */
    ck_assert_int_eq(a->abi_version, CLF_PLUGIN_ABI);
    static const struct {
        const char *name;
        clf_plugin_kind kind;
    } shipped[] = {{"gelu", CLF_PLUGIN_ACTIVATION},        {"gelu_tanh", CLF_PLUGIN_ACTIVATION},
                   {"silu", CLF_PLUGIN_ACTIVATION},        {"swiglu", CLF_PLUGIN_GATED_ACTIVATION},
                   {"geglu", CLF_PLUGIN_GATED_ACTIVATION}, {"rms", CLF_PLUGIN_NORM},
                   {"squared_relu", CLF_PLUGIN_ACTIVATION}};
    for (size_t i = 0; i < sizeof shipped / sizeof shipped[0]; i++) {
        const clf_plugin_op *op = NULL;
        CLF_ASSERT_OK(clf_plugin_find(shipped[i].name, "", &op));
        ck_assert_msg(op, "op '%s' not found on the search path", shipped[i].name);
        ck_assert_int_eq(op->kind, shipped[i].kind);
        ck_assert_msg(op->cpu.act_forward || op->cpu.norm_forward, "%s: no CPU form", op->name);
        ck_assert_msg(op->opencl_source, "%s: no OpenCL form", op->name);
    }
    const clf_plugin_op *none = (const clf_plugin_op *)1;
    CLF_ASSERT_OK(clf_plugin_find("no_such_op", "", &none));
    ck_assert_ptr_null(none);
}
END_TEST

/* Writes text to <dir>/model.yaml in a fresh temporary directory; returns the yaml path. */
static void write_yaml(char *dir, size_t dsize, char *path, size_t psize, const char *text)
{
    snprintf(dir, dsize, "/tmp/clf-plugin-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, psize, "%s/model.yaml", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void remove_dir(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_yaml_plugins_list)
{
    char dir[64], path[128], text[1024];
    clf_config cfg;
    /* a hostile plugin in the list: the error is at its line, with the loader's reason */
    snprintf(text, sizeof text, "plugins:\n  - %s\n" SMALL_MODEL, HOSTILE("wrong_abi"));
    write_yaml(dir, sizeof dir, path, sizeof path, text);
    ck_assert_int_eq(clf_config_load(path, &cfg), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), ":2:5: plugins[0]: ") &&
                      strstr(clf_last_error(), "plugin ABI version 999"),
                  "%s", clf_last_error());
    remove_dir(dir);

    /* a path relative to the YAML's directory (not the working directory) */
    write_yaml(dir, sizeof dir, path, sizeof path,
               "plugins: [./ex.so]\n" SMALL_MODEL "  activation: squared_relu\n");
    char link[128];
    snprintf(link, sizeof link, "%s/ex.so", dir);
    ck_assert_int_eq(symlink(SHIPPED("example"), link), 0);
    CLF_ASSERT_OK(clf_config_load(path, &cfg));
    ck_assert_int_eq(cfg.n_plugins, 1);
    ck_assert_int_eq(cfg.model.activation, CLF_ACT_PLUGIN);
    ck_assert_str_eq(cfg.model.activation_op->name, "squared_relu");
    ck_assert_str_eq(clf_model_activation_name(&cfg.model), "squared_relu");
    remove_dir(dir);

    /* a bare name is clformer-plugin-<name>.so on the search path; a missing one says so */
    CLF_ASSERT_OK(clf_config_parse_string(
        "plugins: [rmsnorm]\n" SMALL_MODEL "  layernorm: {style: rms, eps: 1.0e-5}\n", NULL, &cfg));
    ck_assert_ptr_nonnull(cfg.model.norm_op);
    ck_assert_int_eq(clf_model_norm_has_bias(&cfg.model), 0);
    ck_assert_int_eq(clf_config_parse_string("plugins: [nosuch]\n" SMALL_MODEL, NULL, &cfg),
                     CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "plugins[0]: no clformer-plugin-nosuch.so on the "
                                           "plugin search path"),
                  "%s", clf_last_error());
    ck_assert_int_eq(clf_config_parse_string("plugins: ./x.so\n" SMALL_MODEL, NULL, &cfg),
                     CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "plugins: expected a list of plugin paths"), "%s",
                  clf_last_error());
}
END_TEST

/* A bare name in plugins: is looked up on the same search path as the backends, in the
 * same order: --plugin-dir, then CLF_PLUGIN_PATH, then the build tree (which it shadows). */
START_TEST(test_yaml_bare_name_search_order)
{
    char dir[64], path[128], link[128];
    clf_config cfg;
    write_yaml(dir, sizeof dir, path, sizeof path, "plugins: [mine]\n" SMALL_MODEL);
    snprintf(link, sizeof link, "%s/clformer-plugin-mine.so", dir);
    ck_assert_int_eq(symlink(SHIPPED("example"), link), 0);
    ck_assert_int_eq(clf_config_load(path, &cfg), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "plugins[0]: no clformer-plugin-mine.so on the "
                                           "plugin search path (give a path with a '/', or "
                                           "set --plugin-dir or CLF_PLUGIN_PATH)"),
                  "%s", clf_last_error());
    CLF_ASSERT_OK(clf_config_load_with_plugins(path, dir, &cfg));
    ck_assert_int_eq(cfg.n_plugins, 1);
    ck_assert_ptr_nonnull(strstr(cfg.plugins[0], "clformer-plugin-example.so"));
    char env[96];
    snprintf(env, sizeof env, "/nonexistent:%s", dir);
    setenv("CLF_PLUGIN_PATH", env, 1);
    CLF_ASSERT_OK(clf_config_load(path, &cfg));
    ck_assert_int_eq(cfg.n_plugins, 1);
    unsetenv("CLF_PLUGIN_PATH");
    remove_dir(dir);

    /* the directory given first shadows the shipped rmsnorm of the build tree */
    write_yaml(dir, sizeof dir, path, sizeof path, "plugins: [rmsnorm]\n" SMALL_MODEL);
    snprintf(link, sizeof link, "%s/clformer-plugin-rmsnorm.so", dir);
    ck_assert_int_eq(symlink(HOSTILE("wrong_abi"), link), 0);
    ck_assert_int_eq(clf_config_load_with_plugins(path, dir, &cfg), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "plugins[0]: ") &&
                      strstr(clf_last_error(), "plugin ABI version 999"),
                  "%s", clf_last_error());
    remove_dir(dir);
}
END_TEST

START_TEST(test_yaml_op_kinds)
{
    clf_config cfg;
    ck_assert_int_eq(clf_config_parse_string(SMALL_MODEL "  activation: rms\n", NULL, &cfg),
                     CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "model.activation: 'rms' is a norm op of ") &&
                      strstr(clf_last_error(), "not an activation"),
                  "%s", clf_last_error());
    ck_assert_int_eq(
        clf_config_parse_string(SMALL_MODEL "  layernorm: {style: swiglu}\n", NULL, &cfg),
        CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "model.layernorm.style: 'swiglu' is a gated "
                                           "activation op of ") &&
                      strstr(clf_last_error(), "not a norm style"),
                  "%s", clf_last_error());
    /* found without a plugins: list: the shipped plugins are on the search path */
    CLF_ASSERT_OK(clf_config_parse_string(SMALL_MODEL "  activation: swiglu\n", NULL, &cfg));
    ck_assert_int_eq(clf_model_ffn_gated(&cfg.model), 1);
    CLF_ASSERT_OK(clf_config_parse_string(SMALL_MODEL "  activation: relu\n", NULL, &cfg));
    ck_assert_int_eq(cfg.model.activation, CLF_ACT_RELU);
    ck_assert_ptr_null(cfg.model.activation_op);
}
END_TEST

/* Parsing loads nothing: the plugins: entries and the op names stay as written, with their
 * positions, until clf_config_resolve_plugins, whose errors cite them as the parser's do;
 * weights refuse a config whose op names are not resolved. */
START_TEST(test_read_then_resolve)
{
    char dir[64], path[128], text[1024], want[256];
    clf_config cfg;
    snprintf(text, sizeof text, "plugins:\n  - %s\n" SMALL_MODEL "  activation: squared_relu\n",
             HOSTILE("wrong_abi"));
    write_yaml(dir, sizeof dir, path, sizeof path, text);
    CLF_ASSERT_OK(clf_config_read(path, &cfg)); /* the hostile .so is not opened */
    ck_assert_int_eq(cfg.n_plugins, 1);
    ck_assert_str_eq(cfg.plugins[0], HOSTILE("wrong_abi"));
    ck_assert_int_eq(cfg.plugin_pos[0].line, 2);
    ck_assert_int_eq(cfg.plugin_pos[0].column, 5);
    ck_assert_int_eq(cfg.model.activation, CLF_ACT_PLUGIN);
    ck_assert_ptr_null(cfg.model.activation_op);
    ck_assert_str_eq(cfg.model.activation_op_name, "squared_relu");
    ck_assert_str_eq(clf_model_activation_name(&cfg.model), "squared_relu");
    ck_assert_int_eq(cfg.activation_pos.line, 11);
    ck_assert_int_eq(cfg.activation_pos.column, 15);
    clf_weight_spec *specs = NULL;
    int n = 0;
    ck_assert_int_eq(clf_weight_specs(&cfg.model, &specs, &n), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "weights: op plugin 'squared_relu' is not resolved (call "
                                       "clf_config_resolve_plugins first)");
    ck_assert_int_eq(clf_config_resolve_plugins(&cfg, NULL), CLF_ERR_INPUT);
    snprintf(want, sizeof want, "%s:2:5: plugins[0]: ", path);
    ck_assert_msg(strstr(clf_last_error(), want) == clf_last_error() &&
                      strstr(clf_last_error(), "plugin ABI version 999"),
                  "%s", clf_last_error());
    remove_dir(dir);

    /* a name no plugin provides: the resolve step cites the node's line and column */
    CLF_ASSERT_OK(clf_config_read_string(SMALL_MODEL "  layernorm: {style: fancy}\n", "<m>", &cfg));
    ck_assert_str_eq(clf_model_norm_style_name(&cfg.model), "fancy");
    ck_assert_int_eq(clf_config_resolve_plugins(&cfg, NULL), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(),
                         "<m>:9:22: model.layernorm.style: unknown norm style "
                         "'fancy': not built in (tutorial or standard)") == clf_last_error(),
                  "%s", clf_last_error());

    /* resolved, the same config as the one-step parse */
    clf_config once;
    CLF_ASSERT_OK(clf_config_read_string(SMALL_MODEL "  activation: swiglu\n", NULL, &cfg));
    CLF_ASSERT_OK(clf_config_resolve_plugins(&cfg, NULL));
    CLF_ASSERT_OK(clf_config_parse_string(SMALL_MODEL "  activation: swiglu\n", NULL, &once));
    ck_assert_ptr_eq(cfg.model.activation_op, once.model.activation_op);
    ck_assert_int_eq(clf_model_ffn_gated(&cfg.model), 1);
    CLF_ASSERT_OK(clf_weight_specs(&cfg.model, &specs, &n));
    free(specs);
}
END_TEST

/* The resolved config names the .so of every plugin op it uses, and reads back the same. */
START_TEST(test_dump_names_plugins)
{
    clf_config cfg, back;
    CLF_ASSERT_OK(clf_config_parse_string(SMALL_MODEL "  activation: geglu\n"
                                                      "  layernorm: {style: rms}\n",
                                          NULL, &cfg));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    CLF_ASSERT_OK(clf_config_dump(&cfg, f));
    fclose(f);
    ck_assert_msg(strstr(text, "clformer-plugin-activations.so") &&
                      strstr(text, "clformer-plugin-rmsnorm.so") &&
                      strstr(text, "activation: geglu") && strstr(text, "style: rms"),
                  "%s", text);
    CLF_ASSERT_OK(clf_config_parse_string(text, "dump", &back));
    free(text);
    ck_assert_int_eq(back.n_plugins, 2);
    ck_assert_ptr_eq(back.model.activation_op, cfg.model.activation_op);
    ck_assert_ptr_eq(back.model.norm_op, cfg.model.norm_op);
}
END_TEST

/* Weights: linear_3 for a gated FFN, no norm biases for rms; a file with the wrong set is
 * refused naming the tensor and why. */
START_TEST(test_weight_names)
{
    clf_config cfg, plain;
    clf_weight_spec *specs = NULL;
    int n = 0, gates = 0, biases = 0;
    CLF_ASSERT_OK(clf_config_parse_string(SMALL_MODEL "  activation: swiglu\n"
                                                      "  layernorm: {style: rms}\n",
                                          NULL, &cfg));
    CLF_ASSERT_OK(clf_weight_specs(&cfg.model, &specs, &n));
    for (int i = 0; i < n; i++) {
        gates += strstr(specs[i].name, "feed_forward_block.linear_3.") != NULL;
        biases += strstr(specs[i].name, "norm.bias") != NULL;
    }
    free(specs);
    ck_assert_int_eq(gates, 4); /* weight and bias, one encoder and one decoder layer */
    ck_assert_int_eq(biases, 0);
    /* relu weights under a swiglu config: linear_3 is missing */
    CLF_ASSERT_OK(clf_config_parse_string(SMALL_MODEL, NULL, &plain));
    clf_weights *w = NULL, *w2 = NULL;
    CLF_ASSERT_OK(clf_weights_init(&plain.model, 1, &w));
    char file[] = "/tmp/clf-plugin-w-XXXXXX";
    int fd = mkstemp(file);
    ck_assert_int_ge(fd, 0);
    close(fd);
    CLF_ASSERT_OK(clf_weights_save(w, file, NULL, 0));
    ck_assert_int_eq(clf_weights_load(file, &cfg.model, &w2), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "linear_3"), "%s", clf_last_error());
    /* swiglu weights under a relu config: linear_3 is extra, and why */
    clf_weights_free(w);
    CLF_ASSERT_OK(clf_config_parse_string(SMALL_MODEL "  activation: swiglu\n", NULL, &cfg));
    CLF_ASSERT_OK(clf_weights_init(&cfg.model, 1, &w));
    CLF_ASSERT_OK(clf_weights_save(w, file, NULL, 0));
    ck_assert_int_eq(clf_weights_load(file, &plain.model, &w2), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "linear_3") && strstr(clf_last_error(), "not gated"),
                  "%s", clf_last_error());
    clf_weights_free(w);
    unlink(file);
}
END_TEST

/* A model on a backend its plugin op has no form for is refused before it runs. */
static clf_status create_on(const char *backend, const char *yaml, char *err, size_t errsize)
{
    clf_config cfg;
    clf_weights *w = NULL;
    const clf_backend_api *api = NULL;
    clf_backend *be = NULL;
    clf_model *m = NULL;
    clf_status st = clf_config_parse_string(yaml, NULL, &cfg);
    if (st == CLF_OK)
        st = clf_weights_init(&cfg.model, 1, &w);
    if (st == CLF_OK) {
        clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI};
        st = clf_backend_open_named(backend, CLF_BUILD_BACKEND_DIR, &o, &api, &be);
    }
    if (st == CLF_OK)
        st = clf_model_create(&cfg.model, w, api, be, &m);
    snprintf(err, errsize, "%s", st == CLF_OK ? "" : clf_last_error());
    clf_model_free(m);
    if (be)
        api->close(be);
    clf_weights_free(w);
    return st;
}

START_TEST(test_backend_without_form)
{
    char yaml[1024], err[2048];
    snprintf(yaml, sizeof yaml, "plugins: [%s]\n" SMALL_MODEL "  activation: cpu_only_act\n",
             HOSTILE("cpu_only"));
    CLF_ASSERT_OK(create_on("cpu", yaml, err, sizeof err));
    if (!clf_test_opencl_opens("plugin"))
        return;
    ck_assert_int_eq(create_on("opencl", yaml, err, sizeof err), CLF_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err, "cpu_only_act") && strstr(err, "opencl") &&
                      strstr(err, "clformer-plugin-cpu_only.so"),
                  "%s", err);
    /* an OpenCL form that does not compile: the build log, before anything runs */
    snprintf(yaml, sizeof yaml, "plugins: [%s]\n" SMALL_MODEL "  activation: ocl_broken_act\n",
             HOSTILE("ocl_broken"));
    CLF_ASSERT_OK(create_on("cpu", yaml, err, sizeof err));
    ck_assert_int_ne(create_on("opencl", yaml, err, sizeof err), CLF_OK);
    ck_assert_msg(strstr(err, "ocl_broken_act") && strstr(err, "clformer-plugin-ocl_broken.so"),
                  "%s", err);
}
END_TEST

/* The CLI: a hostile plugin is one line on stderr and exit 2; nothing runs. */
START_TEST(test_cli_refuses_hostile)
{
    char dir[64], path[128], text[1024], args[512], err[2048];
    snprintf(text, sizeof text, "plugins: [%s]\n" SMALL_MODEL, HOSTILE("no_entry"));
    write_yaml(dir, sizeof dir, path, sizeof path, text);
    snprintf(args, sizeof args, "init -c %s -o %s/w.safetensors", path, dir);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "plugins[0]: ") && strstr(err, "no 'clf_plugin_entry' symbol"), "%s",
                  err);
    char wpath[160];
    snprintf(wpath, sizeof wpath, "%s/w.safetensors", dir);
    ck_assert_int_ne(access(wpath, F_OK), 0);
    remove_dir(dir);
    /* and `clformer info` lists the shipped plugins with their ops */
    ck_assert_int_eq(clf_test_run_cli("info > /tmp/clf-plugin-info.txt", err, sizeof err), 0);
    FILE *f = fopen("/tmp/clf-plugin-info.txt", "r");
    ck_assert_ptr_nonnull(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    unlink("/tmp/clf-plugin-info.txt");
    ck_assert_msg(strstr(buf, "swiglu (gated activation; cpu, opencl)") &&
                      strstr(buf, "rms (norm; cpu, opencl)"),
                  "%s", buf);
}
END_TEST

/* The README's copy of the example is the file itself, and the one-line build in its
 * header works outside clformer's build (against the headers only), giving a plugin that
 * loads and runs. */
START_TEST(test_example_plugin_as_documented)
{
    char *readme = clf_test_read_file(CLF_SOURCE_DIR "/README.md", NULL);
    char *example = clf_test_read_file(CLF_SOURCE_DIR "/plugins/example/squared_relu.c", NULL);
    ck_assert_msg(strstr(readme, example),
                  "README.md's copy of plugins/example/squared_relu.c differs from the file");
    free(readme);
    free(example);

    char dir[] = "/tmp/clf-plugin-ex-XXXXXX", cmd[1024], so[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(so, sizeof so, "%s/clformer-plugin-example.so", dir);
    snprintf(cmd, sizeof cmd,
             "cc -shared -fPIC -O2 -I%s/core/include %s/plugins/example/squared_relu.c -o %s",
             CLF_SOURCE_DIR, CLF_SOURCE_DIR, so);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
    const clf_plugin_api *api = NULL;
    CLF_ASSERT_OK(clf_plugin_load_file(so, &api));
    ck_assert_str_eq(api->ops[0].name, "squared_relu");
    float x[4] = {-2.0f, -0.0f, 0.5f, 3.0f}, y[4], dy[4] = {1, 1, 1, 1}, dx[4];
    api->ops[0].cpu.act_forward(y, x, 4);
    api->ops[0].cpu.act_backward(dx, dy, x, 4);
    const float want_y[4] = {0.0f, 0.0f, 0.25f, 9.0f}, want_dx[4] = {0.0f, 0.0f, 1.0f, 6.0f};
    for (int i = 0; i < 4; i++) {
        ck_assert_float_eq(y[i], want_y[i]);
        ck_assert_float_eq(dx[i], want_dx[i]);
    }
    remove_dir(dir);
}
END_TEST

CLF_TEST_MAIN(clf_test_run, "plugin", "loader", test_hostile_plugins_refused,
              test_fifo_refused_without_waiting, test_collision_with_shipped_plugin,
              test_shipped_plugins_and_search, test_yaml_plugins_list,
              test_yaml_bare_name_search_order, test_yaml_op_kinds, test_read_then_resolve,
              test_dump_names_plugins, test_weight_names, test_backend_without_form,
              test_cli_refuses_hostile, test_example_plugin_as_documented)
