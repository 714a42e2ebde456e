/* Not a plugin: a shared object that exports no clf_plugin_entry. */
int clf_not_a_plugin(void);
int clf_not_a_plugin(void)
{
    return 42;
}
