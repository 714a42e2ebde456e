/* What the configuration needs from the plugin loader beyond clformer/plugin.h: loading
 * one entry of a YAML's `plugins:` list, so that config/ does not need to know where
 * plugin files are looked for. Not installed. */
#ifndef CLF_PLUGIN_LOADER_H
#define CLF_PLUGIN_LOADER_H

#include <stddef.h>

#include "clformer/plugin.h"

/* entry is a path (relative to base_dir unless it starts with '/') or a bare name (no
 * '/': clformer-plugin-<entry>.so on the search path, plugin_dir first, may be NULL or
 * ""). Loads it (clf_plugin_load_file) and writes its absolute path to real_path. Errors
 * name the file or the name and why, without the YAML position (the caller adds it). */
clf_status clf_plugin_load_listed(const char *entry, const char *base_dir, const char *plugin_dir,
                                  char *real_path, size_t size);

#endif
