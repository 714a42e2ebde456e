/* A growing array's room (grow.h). */
#include "base/grow.h"

#include <stdlib.h>

int clf_grow(void **items, int *cap, int need, size_t item_size, int first)
{
    if (need <= *cap)
        return 1;
    int c = *cap ? *cap : first;
    while (c < need)
        c *= 2;
    void *p = realloc(*items, (size_t)c * item_size);
    if (!p)
        return 0;
    *items = p;
    *cap = c;
    return 1;
}
