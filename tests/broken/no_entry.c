/* A shared object that is not a clformer backend: it lacks clf_backend_entry. */
int clf_not_a_backend(void);
int clf_not_a_backend(void)
{
    return 42;
}
