/* The one walk of the search path (clf_backend_search_dirs, clformer/backend.h) that looks
 * a file name up, shared by the backend loader (clformer-<name>.so) and the YAML's bare
 * `plugins:` names (clformer-plugin-<name>.so), so that both see the same directories in
 * the same order. Not installed. */
#ifndef CLF_SEARCH_PATH_H
#define CLF_SEARCH_PATH_H

#include <stddef.h>

/* How many directories of the search path are looked at: every user of it lists the same
 * ones, so a long CLF_PLUGIN_PATH is cut at the same place for backends and plugins. */
#define CLF_MAX_SEARCH_DIRS 32

/* Looks for the file name file in each directory of the search path (plugin_dir first,
 * may be NULL or ""), in order; the first that has it wins (earlier directories shadow
 * later ones). Found: 1, with "<dir>/<file>" in path. Not found: 0, and looked (may be
 * NULL) gets the directories searched, ", "-separated, cut where it is full ("" when
 * there were none). A directory whose joined path does not fit path_size (> 0) is passed
 * over. */
int clf_search_path_find(const char *plugin_dir, const char *file, char *path, size_t path_size,
                         char *looked, size_t looked_size);

#endif
