/* clf_plugin_entry exists but returns NULL. Refused. */
#include "hostile.h"

HOSTILE_EXPORT const clf_plugin_api *clf_plugin_entry(void)
{
    return NULL;
}
