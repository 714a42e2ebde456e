/* Tests of clformer/fs.h: atomic writes leave the old file or the new one and never a
 * temporary file, whole-file reads keep to their limit, and a lock file is held by one
 * holder at a time. Paths that are not regular files (FIFOs, sockets, directories, device
 * nodes, symbolic links) are refused, read or written, without waiting and without being
 * replaced, by fs.c and by every reader and the CLI through it. Each test works in a fresh
 * temporary directory; the device nodes are its own (mknod), never the system's. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clformer/config.h"
#include "clformer/dataset.h"
#include "clformer/fs.h"
#include "clformer/json.h"
#include "clformer/tensor.h"
#include "clformer/tokenizer.h"
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

    /* path is a directory: refused before anything is created, the directory untouched */
    const char *dir = clf_test_tmp_path("d");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    clf_test_write_text(clf_test_tmp_path("d/inside"), "x");
    ck_assert_int_eq(clf_fs_write_atomic_bytes(dir, "new", 3), CLF_ERR_IO);
    assert_error_has(dir);
    assert_error_has(strerror(EISDIR));
    assert_content(clf_test_tmp_path("d/inside"), "x");
    ck_assert_int_eq(clf_test_tmpdir_entries(), 2);             /* f.txt and d */
    ck_assert_int_eq(unlink(clf_test_tmp_path("d/inside")), 0); /* the teardown is flat */
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
    /* a device (a stream that never ends, no size to check first) is refused unread */
    ck_assert_int_eq(clf_fs_read_all("/dev/zero", 100000, &data, &n), CLF_ERR_INPUT);
    ck_assert_ptr_null(data);
    assert_error_has("/dev/zero");
    assert_error_has("not a regular file (a character device)");

    const char *missing = clf_test_tmp_path("missing");
    ck_assert_int_eq(clf_fs_read_all(missing, 100, &data, &n), CLF_ERR_IO);
    assert_error_has(missing);
    assert_error_has(strerror(ENOENT));

    ck_assert_int_eq(clf_fs_read_all(clf_test_tmpdir(), 100, &data, &n), CLF_ERR_IO);
    assert_error_has(strerror(EISDIR));
    ck_assert_ptr_null(data);
}
END_TEST

/* ---- paths that are not regular files ---- */

/* A test that would hang on a FIFO is killed (SIGALRM) instead, and fails. */
#define HANG_LIMIT_S 20

/* Fails unless path (not followed) is of the kind S_IFIFO, S_IFDIR, ... */
static void assert_kind(const char *path, mode_t kind)
{
    struct stat sb;
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert_msg((sb.st_mode & S_IFMT) == kind, "%s changed kind: mode %o", path,
                  (unsigned)sb.st_mode);
}

static const char *make_fifo(const char *name)
{
    const char *path = clf_test_tmp_path(name);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    return path;
}

/* A listening-free Unix socket bound at tmpdir/name (its file stays after the close). */
static const char *make_socket(const char *name)
{
    const char *path = clf_test_tmp_path(name);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(path), sizeof a.sun_path);
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    close(fd);
    return path;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* A write to path is refused with st, one line naming path and holding why, and path is
 * still of the kind it was (S_IFIFO, ...). */
static void assert_write_refused(const char *path, clf_status st, const char *why, mode_t kind)
{
    ck_assert_int_eq(clf_fs_write_atomic_bytes(path, "new", 3), st);
    assert_error_has(path);
    assert_error_has(why);
    assert_kind(path, kind);
}

START_TEST(test_write_refuses_what_is_not_a_file)
{
    alarm(HANG_LIMIT_S);
    const char *fifo = make_fifo("fifo");
    assert_write_refused(fifo, CLF_ERR_INPUT, "not a regular file (a FIFO): not replaced", S_IFIFO);
    assert_write_refused(make_socket("sock"), CLF_ERR_INPUT, "(a socket)", S_IFSOCK);
    const char *dir = clf_test_tmp_path("dir"); /* empty: rename() would replace it */
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    assert_write_refused(dir, CLF_ERR_IO, strerror(EISDIR), S_IFDIR);

    /* a symbolic link is followed to what it names: a FIFO is still refused */
    const char *to_fifo = clf_test_tmp_path("to-fifo");
    ck_assert_int_eq(symlink("fifo", to_fifo), 0);
    assert_write_refused(to_fifo, CLF_ERR_INPUT, "(a FIFO)", S_IFLNK);
    assert_kind(fifo, S_IFIFO);

    /* a link to nothing is refused, not written through (nothing is created at its target) */
    const char *dangling = clf_test_tmp_path("dangling");
    ck_assert_int_eq(symlink("nowhere", dangling), 0);
    assert_write_refused(dangling, CLF_ERR_INPUT, "a symbolic link that leads nowhere", S_IFLNK);
    ck_assert_int_ne(access(clf_test_tmp_path("nowhere"), F_OK), 0);

    /* clf_fs_link_atomic and clf_fs_check_output make the same check */
    const char *file = clf_test_tmp_path("file");
    clf_test_write_text(file, OLD_TEXT);
    ck_assert_int_eq(clf_fs_link_atomic(file, fifo), CLF_ERR_INPUT);
    assert_error_has("(a FIFO)");
    assert_kind(fifo, S_IFIFO);
    ck_assert_int_eq(clf_fs_check_output(fifo), CLF_ERR_INPUT);
    ck_assert_int_eq(clf_fs_check_output(dir), CLF_ERR_IO);
    CLF_ASSERT_OK(clf_fs_check_output(file));
    CLF_ASSERT_OK(clf_fs_check_output(clf_test_tmp_path("missing")));
    ck_assert_int_eq(clf_test_tmpdir_entries(), 6); /* no temporary file left behind */
}
END_TEST

static int entries_of(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* A symbolic link to a regular file is written through: its target is replaced, the link
 * stays, and the temporary file was beside the target (the rename is within its
 * directory). */
START_TEST(test_write_through_symlink)
{
    const char *sub = clf_test_tmp_path("sub"), *target = clf_test_tmp_path("sub/t.txt");
    const char *link = clf_test_tmp_path("link"), *link2 = clf_test_tmp_path("link2");
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    clf_test_write_text(target, OLD_TEXT);
    ck_assert_int_eq(symlink("sub/t.txt", link), 0);
    ck_assert_int_eq(symlink("link", link2), 0); /* a chain of two */
    CLF_ASSERT_OK(clf_fs_write_atomic_bytes(link, "new", 3));
    assert_kind(link, S_IFLNK);
    assert_content(target, "new");
    CLF_ASSERT_OK(clf_fs_write_atomic_bytes(link2, "newer", 5));
    assert_kind(link2, S_IFLNK);
    assert_kind(link, S_IFLNK);
    assert_content(target, "newer");
    char to[64];
    ssize_t n = readlink(link, to, sizeof to - 1);
    ck_assert_int_eq(n, 9);
    to[n] = '\0';
    ck_assert_str_eq(to, "sub/t.txt");
    ck_assert_int_eq(entries_of(sub), 1);
    ck_assert_int_eq(clf_test_tmpdir_entries(), 3);
    ck_assert_int_eq(unlink(target), 0);
}
END_TEST

static mode_t mode_of(const char *path)
{
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    return sb.st_mode & 07777;
}

/* A replaced file keeps its permission bits (0600 stays 0600 under a umask that would give
 * 0644; set-id bits are dropped) and, when root writes it, its owner and group. */
START_TEST(test_write_keeps_mode_and_owner)
{
    const char *path = clf_test_tmp_path("f.txt");
    umask(022);
    CLF_ASSERT_OK(clf_fs_write_atomic_bytes(path, OLD_TEXT, strlen(OLD_TEXT)));
    ck_assert_uint_eq(mode_of(path), 0644); /* a new file: 0666 less the umask */
    ck_assert_int_eq(chmod(path, 0600), 0);
    CLF_ASSERT_OK(clf_fs_write_atomic_bytes(path, "new", 3));
    ck_assert_uint_eq(mode_of(path), 0600);
    ck_assert_int_eq(chmod(path, 0751), 0);
    CLF_ASSERT_OK(clf_fs_write_atomic_bytes(path, "newer", 5));
    ck_assert_uint_eq(mode_of(path), 0751);
    assert_content(path, "newer");
    ck_assert_int_eq(chmod(path, 04751), 0); /* a set-id bit is not handed on */
    CLF_ASSERT_OK(clf_fs_write_atomic_bytes(path, "newer", 5));
    ck_assert_uint_eq(mode_of(path), 0751);
    if (geteuid() != 0) {
        fprintf(stderr, "fs: test_write_keeps_mode_and_owner: not root, the owner part is "
                        "skipped\n");
        return;
    }
    ck_assert_int_eq(chown(path, 4321, 4322), 0);
    CLF_ASSERT_OK(clf_fs_write_atomic_bytes(path, "again", 5));
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_uint_eq(sb.st_uid, 4321);
    ck_assert_uint_eq(sb.st_gid, 4322);
    ck_assert_uint_eq(sb.st_mode & 07777, 0751);
}
END_TEST

/* A character device made here (major 1, minor 3: what /dev/null is), never the system's:
 * it is refused as an output and as an input, and is still the device after. Needs root
 * (mknod); skipped, with a line on stderr, otherwise. */
START_TEST(test_device_node_refused)
{
    alarm(HANG_LIMIT_S);
    const char *dev = clf_test_tmp_path("null");
    if (geteuid() != 0 || mknod(dev, S_IFCHR | 0666, makedev(1, 3)) != 0) {
        fprintf(stderr, "fs: test_device_node_refused skipped: cannot mknod (%s)\n",
                geteuid() != 0 ? "not root" : strerror(errno));
        return;
    }
    ck_assert_int_eq(clf_fs_write_atomic_bytes(dev, "new", 3), CLF_ERR_INPUT);
    assert_error_has(dev);
    assert_error_has("not a regular file (a character device): not replaced");
    char *data = NULL;
    size_t n = 0;
    ck_assert_int_eq(clf_fs_read_all(dev, 100, &data, &n), CLF_ERR_INPUT);
    assert_error_has("(a character device): not read");
    struct stat sb;
    ck_assert_int_eq(lstat(dev, &sb), 0);
    ck_assert(S_ISCHR(sb.st_mode));
    ck_assert_uint_eq(major(sb.st_rdev), 1);
    ck_assert_uint_eq(minor(sb.st_rdev), 3);
    ck_assert_int_eq(clf_test_tmpdir_entries(), 1);
}
END_TEST

START_TEST(test_read_refuses_what_is_not_a_file)
{
    alarm(HANG_LIMIT_S);
    char *data = NULL;
    size_t n = 0;
    int fd = 0;
    uint64_t size = 1;
    const char *fifo = make_fifo("fifo");
    ck_assert_int_eq(clf_fs_read_all(fifo, 100, &data, &n), CLF_ERR_INPUT);
    ck_assert_ptr_null(data);
    assert_error_has(fifo);
    assert_error_has("not a regular file (a FIFO): not read");
    ck_assert_int_eq(clf_fs_open_regular(fifo, 100, &fd, &size), CLF_ERR_INPUT);
    ck_assert_int_eq(fd, -1);
    const char *to_fifo = clf_test_tmp_path("to-fifo");
    ck_assert_int_eq(symlink("fifo", to_fifo), 0);
    ck_assert_int_eq(clf_fs_read_all(to_fifo, 100, &data, &n), CLF_ERR_INPUT);
    assert_error_has("(a FIFO)");
    ck_assert_int_eq(clf_fs_read_all(make_socket("sock"), 100, &data, &n), CLF_ERR_INPUT);
    assert_error_has("(a socket)");

    /* a device that gives bytes for ever is refused before one is read, at once */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(clf_fs_read_all("/dev/urandom", SIZE_MAX, &data, &n), CLF_ERR_INPUT);
    ck_assert_msg(seconds_since(&t0) < 0.5, "/dev/urandom refused after %.2f s",
                  seconds_since(&t0));
    assert_error_has("/dev/urandom: not a regular file (a character device)");

    /* a regular file: a blocking descriptor and its size; over the limit: refused */
    const char *file = clf_test_tmp_path("file");
    clf_test_write_text(file, OLD_TEXT);
    CLF_ASSERT_OK(clf_fs_open_regular(file, sizeof OLD_TEXT, &fd, &size));
    ck_assert_int_ge(fd, 0);
    ck_assert_uint_eq(size, strlen(OLD_TEXT));
    ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    close(fd);
    ck_assert_int_eq(clf_fs_open_regular(file, 3, &fd, &size), CLF_ERR_INPUT);
    ck_assert_int_eq(fd, -1);
    assert_error_has("more than the limit of 3");
}
END_TEST

/* Every reader of a file refuses a FIFO at once, naming it: weights, a YAML config, a
 * tokenizer.json, a SentencePiece model (alone and with a Marian vocab.json), a vocab.json,
 * a dataset, a JSON file. */
START_TEST(test_readers_refuse_a_fifo)
{
    alarm(HANG_LIMIT_S);
    const char *fifo_st = make_fifo("w.safetensors"), *fifo_yaml = make_fifo("c.yaml");
    const char *fifo_json = make_fifo("t.json"), *fifo_spm = make_fifo("s.model");
    const char *fifo_tsv = make_fifo("d.tsv");
    const char *wordlevel = CLF_FIXTURES_DIR "/tokenizer/wordlevel.json";
    const char *spm = CLF_FIXTURES_DIR "/spm/tiny.model";

    clf_safetensors *f = NULL;
    ck_assert_int_eq(clf_safetensors_open(fifo_st, &f), CLF_ERR_INPUT);
    assert_error_has(fifo_st);
    assert_error_has("(a FIFO)");
    clf_config cfg;
    ck_assert_int_eq(clf_config_load(fifo_yaml, &cfg), CLF_ERR_INPUT);
    assert_error_has(fifo_yaml);
    assert_error_has("(a FIFO)");
    struct json_t *root = NULL;
    ck_assert_int_eq(clf_json_parse_file(fifo_json, 1000, &root), CLF_ERR_INPUT);
    assert_error_has("(a FIFO)");

    clf_tokenizer *tok = NULL;
    const char *tok_inputs[][2] = {
        {fifo_json, NULL}, {fifo_spm, NULL}, {fifo_spm, wordlevel}, {spm, fifo_json}};
    for (size_t i = 0; i < sizeof tok_inputs / sizeof *tok_inputs; i++) {
        const char *a = tok_inputs[i][0], *b = tok_inputs[i][1];
        ck_assert_int_eq(b ? clf_tokenizer_load_mapped(a, b, &tok) : clf_tokenizer_load(a, &tok),
                         CLF_ERR_INPUT);
        ck_assert_ptr_null(tok);
        assert_error_has(a == spm ? b : a);
        assert_error_has("(a FIFO)");
    }

    CLF_ASSERT_OK(clf_tokenizer_load(wordlevel, &tok));
    clf_dataset_opts o = {.src_path = fifo_tsv, .src_tok = tok, .tgt_tok = tok};
    clf_dataset *d = NULL;
    ck_assert_int_eq(clf_dataset_load(&o, &d), CLF_ERR_INPUT);
    assert_error_has(fifo_tsv);
    assert_error_has("(a FIFO)");
    clf_tokenizer_free(tok);
}
END_TEST

/* /dev/urandom as a SentencePiece model (by its name, or behind a .model link) is refused
 * before a byte of it is read: at once, not after reading up to the model's size limit. */
START_TEST(test_spm_model_from_urandom_refused_at_once)
{
    alarm(HANG_LIMIT_S);
    const char *link = clf_test_tmp_path("u.model");
    ck_assert_int_eq(symlink("/dev/urandom", link), 0);
    const char *paths[] = {link, "/dev/urandom"};
    for (int i = 0; i < 2; i++) {
        clf_tokenizer *tok = NULL;
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        ck_assert_int_eq(clf_tokenizer_load(paths[i], &tok), CLF_ERR_INPUT);
        ck_assert_msg(seconds_since(&t0) < 0.5, "%s refused after %.2f s", paths[i],
                      seconds_since(&t0));
        assert_error_has(paths[i]);
        assert_error_has("(a character device)");
    }
}
END_TEST

/* ---- the same through the CLI ---- */

/* A CLI run that would hang on a FIFO is killed after this many seconds, and fails. */
#define CLI_LIMIT_S 60

/* Fails unless err is exactly one line holding part. */
static void assert_one_line_has(const char *err, const char *part)
{
    ck_assert_msg(strstr(err, part) != NULL, "stderr \"%s\" lacks \"%s\"", err, part);
    const char *nl = strchr(err, '\n');
    ck_assert_msg(nl && nl[1] == '\0', "stderr is not one line: %s", err);
}

/* `clformer init -o FIFO` exits 2 with one line naming it, and the FIFO stays; a symbolic
 * link to a file is written through. */
START_TEST(test_cli_output_not_a_file)
{
    char args[1024], err[2048];
    const char *fifo = make_fifo("out.safetensors");
    snprintf(args, sizeof args, "init -c '%s/tiny.yaml' -o '%s'", CLF_CONFIGS_DIR, fifo);
    ck_assert_int_eq(clf_test_run_cli_within(CLI_LIMIT_S, args, err, sizeof err), 2);
    assert_one_line_has(err, fifo);
    assert_one_line_has(err, "not a regular file (a FIFO): not replaced");
    assert_kind(fifo, S_IFIFO);

    const char *target = clf_test_tmp_path("w.safetensors"), *link = clf_test_tmp_path("l");
    clf_test_write_text(target, OLD_TEXT);
    ck_assert_int_eq(symlink("w.safetensors", link), 0);
    snprintf(args, sizeof args, "init -c '%s/tiny.yaml' -o '%s'", CLF_CONFIGS_DIR, link);
    ck_assert_int_eq(clf_test_run_cli_within(CLI_LIMIT_S, args, err, sizeof err), 0);
    assert_kind(link, S_IFLNK);
    clf_safetensors *f = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(target, &f));
    clf_safetensors_close(f);
    ck_assert_int_eq(clf_test_tmpdir_entries(), 3);
}
END_TEST

/* The output path is looked at again right before the rename: `clformer init -o OUT`, held
 * by CLF_FAULT=write_slow between writing its temporary file and renaming it, finds OUT
 * made a FIFO in that window (OUT a regular file before, or nothing) and exits 2 with one
 * line naming it; the FIFO stays and no temporary file is left. */
START_TEST(test_output_swapped_before_rename)
{
    char yaml[600], err_path[600], tmp_prefix[600], err[2048];
    snprintf(yaml, sizeof yaml, "%s/tiny.yaml", CLF_CONFIGS_DIR);
    const char *out = clf_test_tmp_path("out.safetensors");
    snprintf(err_path, sizeof err_path, "%s", clf_test_tmp_path("err.txt"));
    snprintf(tmp_prefix, sizeof tmp_prefix, "out.safetensors.tmp.");
    for (int existed = 0; existed <= 1; existed++) {
        unlink(out);
        if (existed)
            clf_test_write_text(out, OLD_TEXT);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (fd < 0 || dup2(fd, 2) < 0)
                _exit(99);
            setenv("CLF_FAULT", "write_slow:1500", 1);
            setenv("CLF_PLUGIN_PATH", "", 1);
            execl(CLF_CLI_PATH, "clformer", "init", "-c", yaml, "-o", out, (char *)NULL);
            _exit(98);
        }
        /* the temporary file appears, then the pause: swap the name for a FIFO */
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int seen = 0;
        while (!seen && seconds_since(&t0) < HANG_LIMIT_S) {
            DIR *d = opendir(clf_test_tmpdir());
            ck_assert_ptr_nonnull(d);
            for (struct dirent *e; (e = readdir(d));)
                seen |= strncmp(e->d_name, tmp_prefix, strlen(tmp_prefix)) == 0;
            closedir(d);
            if (!seen)
                usleep(2000);
        }
        ck_assert_msg(seen, "no temporary file of %s appeared", out);
        unlink(out);
        ck_assert_int_eq(mkfifo(out, 0600), 0);
        int status = 0;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        clf_test_take_file(err_path, err, sizeof err);
        ck_assert_msg(WEXITSTATUS(status) == 2, "exit %d: %s", WEXITSTATUS(status), err);
        assert_one_line_has(err, out);
        assert_one_line_has(err, "became a FIFO while it was being written: not replaced");
        assert_kind(out, S_IFIFO);
        ck_assert_int_eq(clf_test_tmpdir_entries(), 1); /* the FIFO, no temporary file */
    }
}
END_TEST

/* `clformer import marian HF_DIR` with one of HF_DIR's files a FIFO (the others links to
 * the fixture's) exits 2 at once with one line naming it, and writes nothing. */
START_TEST(test_cli_import_refuses_a_fifo)
{
    static const char *const files[] = {"config.json",       "generation_config.json",
                                        "model.safetensors", "source.spm",
                                        "target.spm",        "vocab.json"};
    const size_t count = sizeof files / sizeof *files;
    const char *hf = clf_test_tmp_path("hf"), *out = clf_test_tmp_path("out");
    char path[512], src[512], args[1200], err[2048];
    ck_assert_int_eq(mkdir(hf, 0700), 0);
    for (size_t fifo = 0; fifo < count; fifo++) {
        for (size_t i = 0; i < count; i++) {
            snprintf(path, sizeof path, "%s/%s", hf, files[i]);
            snprintf(src, sizeof src, "%s/marian/hf/%s", CLF_FIXTURES_DIR, files[i]);
            unlink(path);
            ck_assert_int_eq(i == fifo ? mkfifo(path, 0600) : symlink(src, path), 0);
        }
        snprintf(args, sizeof args, "import marian '%s' -o '%s'", hf, out);
        int rc = clf_test_run_cli_within(CLI_LIMIT_S, args, err, sizeof err);
        ck_assert_msg(rc == 2, "%s a FIFO: exit %d: %s", files[fifo], rc, err);
        snprintf(path, sizeof path, "%s/%s", hf, files[fifo]);
        assert_one_line_has(err, path);
        assert_one_line_has(err, "(a FIFO)");
        ck_assert_int_ne(access(out, F_OK), 0);
    }
    clf_test_remove_dir(hf);
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

CLF_TEST_SUITE_MAIN(
    "fs",
    CLF_TCASE_FIXTURE("fs", 0, setup, teardown, {test_write_replaces_whole_file},
                      {test_failing_callback_keeps_old_file}, {test_write_error_keeps_old_file},
                      {test_write_refusals_name_the_file}, {test_reader_never_sees_half_a_file},
                      {test_link_swaps_the_name}, {test_read_all_within_limit},
                      {test_read_all_refusals}, {test_write_refuses_what_is_not_a_file},
                      {test_write_through_symlink}, {test_write_keeps_mode_and_owner},
                      {test_device_node_refused}, {test_read_refuses_what_is_not_a_file},
                      {test_readers_refuse_a_fifo}, {test_spm_model_from_urandom_refused_at_once},
                      {test_cli_output_not_a_file}, {test_output_swapped_before_rename},
                      {test_cli_import_refuses_a_fifo}, {test_lock_held_once},
                      {test_lock_dies_with_its_holder}))
