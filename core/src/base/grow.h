/* A growing array's room (private to core). */
#ifndef CLF_BASE_GROW_H
#define CLF_BASE_GROW_H

#include <stddef.h>

/* Makes room for need items of item_size bytes in *items (realloc), whose room *cap is
 * doubled from its current size (from first when it is 0) until it holds need. Returns 1,
 * or 0 when out of memory (*items and *cap unchanged). */
int clf_grow(void **items, int *cap, int need, size_t item_size, int first);

#endif
