/* Tests of clformer/fs.h: atomic writes leave the old file or the new one and never a
 * temporary file, whole-file reads keep to their limit, and a lock file is held by one
 * holder at a time. Each test works in a fresh temporary directory. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clformer/fs.h"
#include "testutil.h"

static const char OLD_TEXT[] = "the old content\n";

/* Fails unless path holds exactly text. */
static void assert_content(const char *path, const char *text)
{
    size_t n = 0;
    char *got = clf_test_read_file(path, &n);
    ck_assert_msg(n == strlen(text) && memcmp(got, text, n) == 0, "%s holds \"%s\", not \"%s\"",
                  path, got, text);
    free(got);
}

static void assert_error_has(const char *part)
{
    ck_assert_msg(strstr(clf_last_error(), part) != NULL, "error \"%s\" lacks \"%s\"",
                  clf_last_error(), part);
    ck_assert_msg(strchr(clf_last_error(), '\n') == NULL, "error is not one line: %s",
                  clf_last_error());
}

static void setup(void)
{
    clf_test_make_tmpdir("clf-fs");
}

static void teardown(void)
{
    clf_test_remove_tmpdir();
}

/* ---- atomic write ---- */

START_TEST(test_write_replaces_whole_file)
{
    const char *path = clf_test_tmp_path("f.txt");
    CLF_ASSERT_OK(clf_fs_write_atomic_bytes(path, OLD_TEXT, strlen(OLD_TEXT)));
    assert_content(path, OLD_TEXT);
    /* a shorter file replaces a longer one entirely (no tail of the old one) */
    CLF_ASSERT_OK(clf_fs_write_atomic_bytes(path, "new", 3));
    assert_content(path, "new");
    CLF_ASSERT_OK(clf_fs_write_atomic_bytes(path, NULL, 0));
    assert_content(path, "");
    ck_assert_int_eq(clf_test_tmpdir_entries(), 1); /* no temporary file left behind */
}
END_TEST

/* Writes half of its text, then gives up as a caller does on its own error. */
static clf_status write_half_then_fail(FILE *f, void *ctx)
{
    const char *text = ctx;
    fwrite(text, 1, strlen(text) / 2, f);
    fflush(f); /* the half is on disk, in the temporary file */
    return clf_error(CLF_ERR_INPUT, "the caller's own reason");
}

START_TEST(test_failing_callback_keeps_old_file)
{
    const char *path = clf_test_tmp_path("f.txt");
    CLF_ASSERT_OK(clf_fs_write_atomic_bytes(path, OLD_TEXT, strlen(OLD_TEXT)));
    ck_assert_int_eq(clf_fs_write_atomic(path, write_half_then_fail, "a new content, never seen"),
                     CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "the caller's own reason"); /* the callback's error */
    assert_content(path, OLD_TEXT);
    ck_assert_int_eq(clf_test_tmpdir_entries(), 1);
}
END_TEST

static clf_status write_64k(FILE *f, void *ctx)
{
    (void)ctx;
    static char block[1 << 16];
    memset(block, 'x', sizeof block);
    fwrite(block, 1, sizeof block, f); /* result unchecked: clf_fs_write_atomic checks */
    return CLF_OK;
}

/* A write that fails halfway (the file size limit, as a full disk would): the old file
 * stays, the partial temporary file is removed. No Check assertion runs under the limit:
 * Check's own message file is subject to it too. */
static clf_status write_64k_to(void *path)
{
    return clf_fs_write_atomic(path, write_64k, NULL);
}

START_TEST(test_write_error_keeps_old_file)
{
    const char *path = clf_test_tmp_path("f.txt");
    CLF_ASSERT_OK(clf_fs_write_atomic_bytes(path, OLD_TEXT, strlen(OLD_TEXT)));
    ck_assert_int_eq(clf_test_write_under_size_limit(write_64k_to, (void *)path), CLF_ERR_IO);
    assert_error_has(path);
    assert_error_has("cannot write");
    assert_error_has(strerror(EFBIG));
    assert_content(path, OLD_TEXT);
    ck_assert_int_eq(clf_test_tmpdir_entries(), 1);
}
END_TEST

START_TEST(test_write_refusals_name_the_file)
{
    const char *path = clf_test_tmp_path("f.txt");
    CLF_ASSERT_OK(clf_fs_write_atomic_bytes(path, OLD_TEXT, strlen(OLD_TEXT)));

    /* the temporary name is taken by a directory: nothing can be created */
    char tmpname[600];
    snprintf(tmpname, sizeof tmpname, "%s.tmp.%ld", path, (long)getpid());
    ck_assert_int_eq(mkdir(tmpname, 0700), 0);
    ck_assert_int_eq(clf_fs_write_atomic_bytes(path, "new", 3), CLF_ERR_IO);
    assert_error_has(path);
    assert_error_has("cannot create");
    ck_assert_int_eq(rmdir(tmpname), 0); /* still the directory, not removed as ours */
    assert_content(path, OLD_TEXT);

    /* a directory that does not exist */
    const char *nodir = clf_test_tmp_path("no/such/dir/f.txt");
    ck_assert_int_eq(clf_fs_write_atomic_bytes(nodir, "new", 3), CLF_ERR_IO);
    assert_error_has(nodir);
    assert_error_has(strerror(ENOENT));

    /* the rename fails (path is a directory that is not empty): the temporary goes */
    const char *dir = clf_test_tmp_path("d");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    clf_test_write_text(clf_test_tmp_path("d/inside"), "x");
    ck_assert_int_eq(clf_fs_write_atomic_bytes(dir, "new", 3), CLF_ERR_IO);
    assert_error_has(dir);
    assert_error_has("cannot rename");
    assert_content(clf_test_tmp_path("d/inside"), "x");
    ck_assert_int_eq(clf_test_tmpdir_entries(), 2); /* f.txt and d */
}
END_TEST

/* A second process replacing the file again and again: a reader only ever sees one whole
 * version or the other. */
START_TEST(test_reader_never_sees_half_a_file)
{
    const char *path = clf_test_tmp_path("f.txt");
    static char a[1 << 16], b[1 << 16];
    memset(a, 'a', sizeof a);
    memset(b, 'b', sizeof b);
    CLF_ASSERT_OK(clf_fs_write_atomic_bytes(path, a, sizeof a));
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        for (int i = 0; i < 200; i++)
            if (clf_fs_write_atomic_bytes(path, i % 2 ? a : b, sizeof a) != CLF_OK)
                _exit(1);
        _exit(0);
    }
    int torn = 0, status = 0, reads = 0;
    pid_t done = 0;
    while (!torn && (done = waitpid(child, &status, WNOHANG)) == 0) {
        char *data = NULL;
        size_t n = 0;
        CLF_ASSERT_OK(clf_fs_read_all(path, sizeof a, &data, &n));
        torn = n != sizeof a || (memcmp(data, a, n) != 0 && memcmp(data, b, n) != 0);
        free(data);
        reads++;
    }
    if (done == 0)
        ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_msg(!torn, "a reader saw a partly written file (read %d)", reads);
    ck_assert_int_eq(clf_test_tmpdir_entries(), 1);
}
END_TEST

/* ---- atomic hard link ---- */

static ino_t inode_of(const char *path)
{
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    return sb.st_ino;
}

/* The name is swapped from one file to another, never absent, and relinking a name to the
 * file it already names leaves no temporary name behind (rename() of two names of one
 * file does nothing). */
START_TEST(test_link_swaps_the_name)
{
    const char *a = clf_test_tmp_path("a"), *b = clf_test_tmp_path("b");
    const char *last = clf_test_tmp_path("last");
    clf_test_write_text(a, "first");
    clf_test_write_text(b, "second");
    CLF_ASSERT_OK(clf_fs_link_atomic(a, last));
    ck_assert(inode_of(last) == inode_of(a));
    CLF_ASSERT_OK(clf_fs_link_atomic(b, last));
    ck_assert(inode_of(last) == inode_of(b));
    assert_content(last, "second");
    assert_content(a, "first"); /* the old target is untouched */
    CLF_ASSERT_OK(clf_fs_link_atomic(b, last));
    ck_assert_int_eq(clf_test_tmpdir_entries(), 3);
    /* a target that does not exist: the name keeps its file */
    const char *none = clf_test_tmp_path("none");
    ck_assert_int_eq(clf_fs_link_atomic(none, last), CLF_ERR_IO);
    assert_error_has(last);
    assert_error_has(strerror(ENOENT));
    assert_content(last, "second");
    ck_assert_int_eq(clf_test_tmpdir_entries(), 3);
}
END_TEST

/* ---- whole-file read ---- */

START_TEST(test_read_all_within_limit)
{
    const char *path = clf_test_tmp_path("r.bin");
    static const char bytes[] = {'a', '\0', 'b', '\n'};
    clf_test_write_file(path, bytes, sizeof bytes);
    char *data = NULL;
    size_t n = 99;
    CLF_ASSERT_OK(clf_fs_read_all(path, sizeof bytes, &data, &n));
    ck_assert_uint_eq(n, sizeof bytes);
    ck_assert_int_eq(memcmp(data, bytes, sizeof bytes), 0);
    ck_assert_int_eq(data[n], '\0'); /* terminated, for text parsers */
    free(data);

    /* one byte over the limit: refused, nothing returned */
    ck_assert_int_eq(clf_fs_read_all(path, sizeof bytes - 1, &data, &n), CLF_ERR_INPUT);
    ck_assert_ptr_null(data);
    ck_assert_uint_eq(n, 0);
    assert_error_has(path);
    assert_error_has("limit of 3");

    /* an empty file is an empty, terminated string */
    const char *empty = clf_test_tmp_path("empty");
    clf_test_write_file(empty, "", 0);
    CLF_ASSERT_OK(clf_fs_read_all(empty, 0, &data, &n));
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(data[0], '\0');
    free(data);
}
END_TEST

START_TEST(test_read_all_refusals)
{
    char *data = NULL;
    size_t n = 0;
    /* a stream that never ends (no size to check first) stops at the limit */
    ck_assert_int_eq(clf_fs_read_all("/dev/zero", 100000, &data, &n), CLF_ERR_INPUT);
    ck_assert_ptr_null(data);
    assert_error_has("/dev/zero");
    assert_error_has("limit of 100000");

    const char *missing = clf_test_tmp_path("missing");
    ck_assert_int_eq(clf_fs_read_all(missing, 100, &data, &n), CLF_ERR_IO);
    assert_error_has(missing);
    assert_error_has(strerror(ENOENT));

    ck_assert_int_eq(clf_fs_read_all(clf_test_tmpdir(), 100, &data, &n), CLF_ERR_IO);
    assert_error_has(strerror(EISDIR));
    ck_assert_ptr_null(data);
}
END_TEST

/* ---- lock files ---- */

START_TEST(test_lock_held_once)
{
    const char *path = clf_test_tmp_path("lock");
    clf_fs_lock *lock = NULL, *second = NULL;
    CLF_ASSERT_OK(clf_fs_lock_acquire(path, &lock));
    ck_assert_ptr_nonnull(lock);

    /* the file names the holder */
    char holder[64];
    snprintf(holder, sizeof holder, "process %ld on host ", (long)getpid());
    char *text = clf_test_read_file(path, NULL);
    ck_assert_msg(strncmp(text, holder, strlen(holder)) == 0, "lock file: %s", text);
    free(text);

    /* a second holder in this process is refused, naming the first */
    ck_assert_int_eq(clf_fs_lock_acquire(path, &second), CLF_ERR_IO);
    ck_assert_ptr_null(second);
    assert_error_has(path);
    assert_error_has("locked by ");
    assert_error_has(holder);

    /* and so is one in another process */
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        clf_fs_lock *l = NULL;
        _exit(clf_fs_lock_acquire(path, &l) == CLF_ERR_IO && !l && strstr(clf_last_error(), holder)
                  ? 0
                  : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "another process took a held lock");

    /* released: the file is gone and the lock can be taken again */
    clf_fs_lock_release(lock);
    ck_assert_int_ne(access(path, F_OK), 0);
    CLF_ASSERT_OK(clf_fs_lock_acquire(path, &second));
    clf_fs_lock_release(second);
    clf_fs_lock_release(NULL);
    ck_assert_int_eq(clf_test_tmpdir_entries(), 0);
}
END_TEST

/* A holder killed without releasing leaves its file behind but not its lock. */
START_TEST(test_lock_dies_with_its_holder)
{
    const char *path = clf_test_tmp_path("lock");
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        clf_fs_lock *l = NULL;
        if (clf_fs_lock_acquire(path, &l) != CLF_OK)
            _exit(1);
        raise(SIGKILL);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    ck_assert_int_eq(access(path, F_OK), 0); /* the stale file */
    clf_fs_lock *lock = NULL;
    CLF_ASSERT_OK(clf_fs_lock_acquire(path, &lock));
    clf_fs_lock_release(lock);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fs");
    TCase *t = tcase_create("fs");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, test_write_replaces_whole_file);
    tcase_add_test(t, test_failing_callback_keeps_old_file);
    tcase_add_test(t, test_write_error_keeps_old_file);
    tcase_add_test(t, test_write_refusals_name_the_file);
    tcase_add_test(t, test_reader_never_sees_half_a_file);
    tcase_add_test(t, test_link_swaps_the_name);
    tcase_add_test(t, test_read_all_within_limit);
    tcase_add_test(t, test_read_all_refusals);
    tcase_add_test(t, test_lock_held_once);
    tcase_add_test(t, test_lock_dies_with_its_holder);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return clf_test_main(suite());
}
