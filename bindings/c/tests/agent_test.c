/*
 * The C ABI from C (and, compiled with g++, from C++), as .ci/bindings-c.sh
 * runs it against a real publisher, under valgrind:
 *
 *   agent_test test BASE_URL PUBLIC_KEY LIST LISTED_URL BENIGN_URL GOLDEN_SNAPSHOT CACHE_DIR
 *       the sans-I/O functions (on the golden snapshot of
 *       format/tests/data/golden), then the agent: update, a listed URL
 *       unsafe, a benign one safe, an invalid URL, buffers too small, NULL
 *       arguments, background updates, the cache directory, threads, and an
 *       unreachable publisher (unverified, blocked when failing closed).
 *   agent_test fork BASE_URL PUBLIC_KEY LIST LISTED_URL
 *       an agent used in a child of fork() that its parent made: refused at
 *       once, never a hang; one made in the child works. Not under valgrind
 *       (the child holds what the parent's threads owned, lost to it).
 *   agent_test xlang BASE_URL PUBLIC_KEY DIR
 *       one JSON line per input of DIR/inputs.txt (hex lines), the same as
 *       `cargo run -p blocksieve-tests --example xlang -- reference ...`.
 *
 * Exits 0 when every check passed, 1 otherwise (each failure is printed
 * with its line and the library's last error), 2 on bad usage.
 */
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The signing key of the golden snapshots: SigningKey::from_secret_bytes([0x42; 32]). */
static const char *const GOLDEN_KEY = "IVL40Zt5HSRFMkLhXy6rbLfP+ntqXtMAl5YOBpiB2xI=";

static int canonical_is(const char *url, const char *expected) {
    char out[256];
    size_t len = 0;
    blocksieve_status status = blocksieve_canonicalize(url, strlen(url), out, sizeof out, &len);
    return status == BLOCKSIEVE_OK && len == strlen(expected) && strcmp(out, expected) == 0;
}

static void test_sans_io(const char *golden_path) {
    char out[1024];
    size_t len = 0;
    const char *url = "HTTP://www.GOOgle.com/a/../b/";
    const char *canonical = "http://www.google.com/b/";

    /* Canonicalization, and the buffer rules. */
    CHECK(canonical_is(url, canonical));
    CHECK(canonical_is("http://3279880203/blah", "http://195.127.0.11/blah"));
    CHECK(blocksieve_canonicalize(url, strlen(url), NULL, 0, &len) == BLOCKSIEVE_BUFFER_TOO_SMALL);
    CHECK(len == strlen(canonical));
    memset(out, 'x', sizeof out);
    CHECK(blocksieve_canonicalize(url, strlen(url), out, strlen(canonical), &len) ==
          BLOCKSIEVE_BUFFER_TOO_SMALL);
    CHECK(len == strlen(canonical) && out[0] == '\0' && out[1] == 'x');
    CHECK(strstr(last_error(), "buffer holds") != NULL);
    CHECK(blocksieve_canonicalize(url, strlen(url), out, strlen(canonical) + 1, &len) == BLOCKSIEVE_OK);
    CHECK(strcmp(out, canonical) == 0 && last_error()[0] == '\0');

    /* Invalid URLs and arguments. */
    const char *mailto = "mailto:someone@example.com";
    CHECK(blocksieve_canonicalize(mailto, strlen(mailto), out, sizeof out, &len) == BLOCKSIEVE_INVALID_URL);
    CHECK(strncmp(last_error(), "invalid url: ", 13) == 0);
    CHECK(blocksieve_canonicalize(NULL, 5, out, sizeof out, &len) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(strcmp(last_error(), "url is NULL") == 0);
    CHECK(blocksieve_canonicalize(url, strlen(url), out, sizeof out, NULL) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_canonicalize(url, strlen(url), NULL, 8, &len) == BLOCKSIEVE_INVALID_ARGUMENT);
    /* Bytes that are not UTF-8 are read as their percent-escapes. */
    const char not_utf8[] = "http://a.example/\xff\xfe";
    CHECK(blocksieve_canonicalize(not_utf8, sizeof not_utf8 - 1, out, sizeof out, &len) == BLOCKSIEVE_OK);
    CHECK(strcmp(out, "http://a.example/%FF%FE") == 0);

    /* Expressions and their full hashes, in the same order. */
    const char *page = "http://a.b.c/1/2.html?param=1";
    CHECK(blocksieve_expressions(page, strlen(page), out, sizeof out, &len) == BLOCKSIEVE_OK);
    int lines = 0;
    for (size_t i = 0; i < len; i++) {
        lines += out[i] == '\n';
    }
    CHECK(lines == 8);
    CHECK(strncmp(out, "a.b.c/1/2.html?param=1\na.b.c/1/2.html\n", 38) == 0);
    uint8_t hashes[30 * BLOCKSIEVE_FULL_HASH_BYTES];
    CHECK(blocksieve_full_hashes(page, strlen(page), NULL, 0, &len) == BLOCKSIEVE_BUFFER_TOO_SMALL);
    CHECK(len == 8 * BLOCKSIEVE_FULL_HASH_BYTES);
    CHECK(blocksieve_full_hashes(page, strlen(page), hashes, sizeof hashes, &len) == BLOCKSIEVE_OK);
    CHECK(len == 8 * BLOCKSIEVE_FULL_HASH_BYTES);
    CHECK(blocksieve_full_hashes(mailto, strlen(mailto), hashes, sizeof hashes, &len) ==
          BLOCKSIEVE_INVALID_URL);

    /* Snapshot verification: the golden snapshot, cut, expired, other keys. */
    size_t snapshot_len = 0;
    unsigned char *snapshot = read_file(golden_path, &snapshot_len);
    CHECK(snapshot != NULL && snapshot_len > 100);
    if (snapshot == NULL) {
        return;
    }
    const char *keys[1] = {GOLDEN_KEY};
    blocksieve_snapshot_info info;
    CHECK(blocksieve_snapshot_verify(snapshot, snapshot_len, keys, 1, 1800000000u, &info) == BLOCKSIEVE_OK);
    CHECK(strcmp(info.list_name, "golden") == 0);
    CHECK(info.version == 7 && info.entry_count == 200 && info.full_hash_count == 200);
    CHECK(info.created_at == 1800000000u && info.expires_at == 4102444800u);
    CHECK(blocksieve_snapshot_verify(snapshot, snapshot_len - 1, keys, 1, 1800000000u, &info) ==
          BLOCKSIEVE_BAD_DATA);
    CHECK(blocksieve_snapshot_verify(snapshot, snapshot_len, keys, 1, 4102444801u, &info) ==
          BLOCKSIEVE_BAD_DATA);
    CHECK(strstr(last_error(), "expired") != NULL);
    snapshot[snapshot_len - 1] ^= 1;
    CHECK(blocksieve_snapshot_verify(snapshot, snapshot_len, keys, 1, 1800000000u, &info) ==
          BLOCKSIEVE_BAD_DATA);
    snapshot[snapshot_len - 1] ^= 1;
    const char *bad_keys[1] = {"bm90IGEga2V5"};
    CHECK(blocksieve_snapshot_verify(snapshot, snapshot_len, bad_keys, 1, 1800000000u, &info) ==
          BLOCKSIEVE_MISCONFIGURED);
    CHECK(blocksieve_snapshot_verify(snapshot, snapshot_len, NULL, 1, 1800000000u, &info) ==
          BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_snapshot_verify(snapshot, snapshot_len, keys, 0, 1800000000u, &info) ==
          BLOCKSIEVE_MISCONFIGURED);
    CHECK(blocksieve_snapshot_verify(snapshot, snapshot_len, keys, 1, 1800000000u, NULL) ==
          BLOCKSIEVE_INVALID_ARGUMENT);
    free(snapshot);

    /* The last error into a buffer too small for it. */
    CHECK(blocksieve_canonicalize(NULL, 0, out, sizeof out, &len) == BLOCKSIEVE_INVALID_ARGUMENT);
    char tiny[4];
    CHECK(blocksieve_last_error(tiny, sizeof tiny, &len) == BLOCKSIEVE_BUFFER_TOO_SMALL);
    CHECK(len == strlen("url is NULL") && tiny[0] == '\0');
}

static blocksieve_config config_for(const char *base_url, const char *const *lists, const char *const *keys) {
    blocksieve_config config;
    memset(&config, 0, sizeof config);
    config.base_url = base_url;
    config.lists = lists;
    config.lists_len = 1;
    config.trusted_keys = keys;
    config.trusted_keys_len = 1;
    config.failure_policy = BLOCKSIEVE_FAIL_OPEN;
    return config;
}

struct checker {
    blocksieve_agent *agent;
    const char *listed;
    const char *benign;
    int wrong;
};

/* Many threads may check URLs on one agent at once. */
static void *check_concurrently(void *arg) {
    struct checker *c = (struct checker *)arg;
    for (int i = 0; i < 20; i++) {
        blocksieve_verdict v;
        const char *url = i % 2 ? c->listed : c->benign;
        blocksieve_verdict_kind expected = i % 2 ? BLOCKSIEVE_UNSAFE : BLOCKSIEVE_SAFE;
        if (blocksieve_agent_check(c->agent, url, strlen(url), &v, NULL, 0, NULL, 0) != BLOCKSIEVE_OK ||
            v.kind != expected) {
            c->wrong++;
        }
    }
    return NULL;
}

static void test_agent(const char *base_url, const char *key, const char *list, const char *listed,
                       const char *benign, const char *cache_dir) {
    const char *lists[1] = {list};
    const char *keys[1] = {key};
    blocksieve_agent *agent = NULL;
    blocksieve_verdict verdict;
    char list_out[BLOCKSIEVE_LIST_NAME_CAPACITY];
    char expression[1024];
    size_t count = 0;
    memset(&verdict, 0, sizeof verdict);
    memset(list_out, 0, sizeof list_out);
    memset(expression, 0, sizeof expression);

    /* Bad configurations fail with a status and leave no handle. */
    blocksieve_config config = config_for(base_url, lists, keys);
    CHECK(blocksieve_agent_new(NULL, &agent) == BLOCKSIEVE_INVALID_ARGUMENT && agent == NULL);
    CHECK(blocksieve_agent_new(&config, NULL) == BLOCKSIEVE_INVALID_ARGUMENT);
    const char *bad_lists[1] = {"Not A List"};
    config.lists = bad_lists;
    CHECK(blocksieve_agent_new(&config, &agent) == BLOCKSIEVE_MISCONFIGURED && agent == NULL);
    CHECK(strstr(last_error(), "Not A List") != NULL);
    config = config_for("ftp://example.com", lists, keys);
    CHECK(blocksieve_agent_new(&config, &agent) == BLOCKSIEVE_MISCONFIGURED && agent == NULL);
    config = config_for(base_url, lists, keys);
    config.failure_policy = 7;
    CHECK(blocksieve_agent_new(&config, &agent) == BLOCKSIEVE_MISCONFIGURED && agent == NULL);

    /* A good one; nothing to answer from before the first update. */
    config = config_for(base_url, lists, keys);
    config.cache_dir = cache_dir;
    CHECK(blocksieve_agent_new(&config, &agent) == BLOCKSIEVE_OK && agent != NULL);
    if (agent == NULL) {
        return;
    }
    /* One agent per cache directory: a second is refused while it lives. */
    blocksieve_agent *second = NULL;
    CHECK(blocksieve_agent_new(&config, &second) == BLOCKSIEVE_MISCONFIGURED && second == NULL);
    CHECK(strstr(last_error(), "in use") != NULL && strstr(last_error(), cache_dir) != NULL);
    blocksieve_list_status status[2];
    CHECK(blocksieve_agent_status(agent, status, 2, &count) == BLOCKSIEVE_OK && count == 1);
    CHECK(strcmp(status[0].name, list) == 0 && !status[0].has_snapshot);
    CHECK(blocksieve_agent_check(agent, benign, strlen(benign), &verdict, NULL, 0, NULL, 0) ==
          BLOCKSIEVE_NOT_READY);

    /* The first update, and the status after it. */
    CHECK(blocksieve_agent_update(agent) == BLOCKSIEVE_OK);
    CHECK(blocksieve_agent_status(agent, NULL, 0, &count) == BLOCKSIEVE_BUFFER_TOO_SMALL && count == 1);
    CHECK(blocksieve_agent_status(agent, status, 2, &count) == BLOCKSIEVE_OK && count == 1);
    CHECK(status[0].has_snapshot && status[0].version > 0 && !status[0].stale);
    CHECK(status[0].expires_at > status[0].created_at && status[0].consecutive_failures == 0);
    CHECK(!status[0].last_update_failed);

    /* A listed URL is unsafe, confirmed by its full hash. */
    CHECK(blocksieve_agent_check(agent, listed, strlen(listed), &verdict, list_out, sizeof list_out,
                                 expression, sizeof expression) == BLOCKSIEVE_OK);
    CHECK(verdict.kind == BLOCKSIEVE_UNSAFE && verdict.block && !verdict.stale);
    CHECK(strcmp(list_out, list) == 0 && verdict.list_len == strlen(list));
    CHECK(verdict.expression_len == strlen(expression) && verdict.expression_len > 0);
    uint8_t hashes[30 * BLOCKSIEVE_FULL_HASH_BYTES];
    size_t hashes_len = 0;
    CHECK(blocksieve_full_hashes(listed, strlen(listed), hashes, sizeof hashes, &hashes_len) == BLOCKSIEVE_OK);
    int found = 0;
    for (size_t i = 0; i < hashes_len; i += BLOCKSIEVE_FULL_HASH_BYTES) {
        found |= memcmp(hashes + i, verdict.full_hash, BLOCKSIEVE_FULL_HASH_BYTES) == 0;
    }
    CHECK(found);

    /* Texts that do not fit are cut as snprintf cuts; the verdict stands,
     * with OK: a caller acting on the status alone still blocks. */
    char small[3], tiny[5];
    CHECK(blocksieve_agent_check(agent, listed, strlen(listed), &verdict, small, sizeof small, tiny,
                                 sizeof tiny) == BLOCKSIEVE_OK);
    CHECK(verdict.kind == BLOCKSIEVE_UNSAFE && verdict.block && verdict.list_len == strlen(list));
    CHECK(strlen(small) == 2 && strncmp(small, list, 2) == 0);
    CHECK(verdict.expression_len >= sizeof tiny && strlen(tiny) == 4 && strncmp(tiny, expression, 4) == 0);
    CHECK(blocksieve_agent_check(agent, listed, strlen(listed), &verdict, NULL, 0, NULL, 0) == BLOCKSIEVE_OK);
    CHECK(verdict.kind == BLOCKSIEVE_UNSAFE);

    /* A benign URL is safe; an invalid one is neither. */
    CHECK(blocksieve_agent_check(agent, benign, strlen(benign), &verdict, list_out, sizeof list_out,
                                 expression, sizeof expression) == BLOCKSIEVE_OK);
    CHECK(verdict.kind == BLOCKSIEVE_SAFE && !verdict.block && verdict.list_len == 0);
    CHECK(list_out[0] == '\0' && expression[0] == '\0');
    const char *invalid = "mailto:someone@example.com";
    CHECK(blocksieve_agent_check(agent, invalid, strlen(invalid), &verdict, NULL, 0, NULL, 0) ==
          BLOCKSIEVE_INVALID_URL);
    CHECK(strncmp(last_error(), "invalid url: ", 13) == 0);

    /* NULL arguments. */
    CHECK(blocksieve_agent_check(NULL, benign, strlen(benign), &verdict, NULL, 0, NULL, 0) ==
          BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_agent_check(agent, NULL, 3, &verdict, NULL, 0, NULL, 0) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_agent_check(agent, benign, strlen(benign), NULL, NULL, 0, NULL, 0) ==
          BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_agent_check(agent, benign, strlen(benign), &verdict, NULL, 5, NULL, 0) ==
          BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_agent_update(NULL) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_agent_status(agent, status, 1, NULL) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_agent_start_updates(NULL) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_agent_free(NULL) == BLOCKSIEVE_OK);

    /* Checks from several threads at once. */
    pthread_t threads[4];
    struct checker checkers[4];
    for (int i = 0; i < 4; i++) {
        checkers[i].agent = agent;
        checkers[i].listed = listed;
        checkers[i].benign = benign;
        checkers[i].wrong = 0;
        CHECK(pthread_create(&threads[i], NULL, check_concurrently, &checkers[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        CHECK(pthread_join(threads[i], NULL) == 0);
        CHECK(checkers[i].wrong == 0);
    }

    /* Background updates: once at a time, stopped by stop or free. */
    CHECK(blocksieve_agent_start_updates(agent) == BLOCKSIEVE_OK);
    CHECK(blocksieve_agent_start_updates(agent) == BLOCKSIEVE_MISCONFIGURED);
    CHECK(blocksieve_agent_stop_updates(agent) == BLOCKSIEVE_OK);
    CHECK(blocksieve_agent_start_updates(agent) == BLOCKSIEVE_OK);
    CHECK(blocksieve_agent_free(agent) == BLOCKSIEVE_OK);

    /* Freed, it holds the directory no more: a new agent on it answers
     * before any update. */
    agent = NULL;
    CHECK(blocksieve_agent_new(&config, &agent) == BLOCKSIEVE_OK);
    if (agent != NULL) {
        CHECK(blocksieve_agent_check(agent, listed, strlen(listed), &verdict, NULL, 0, NULL, 0) ==
              BLOCKSIEVE_OK);
        CHECK(verdict.kind == BLOCKSIEVE_UNSAFE);
        CHECK(blocksieve_agent_free(agent) == BLOCKSIEVE_OK);
    }

    /* With the publisher unreachable, a prefix hit is unverified, never
     * safe; fail-closed advises to block it. A miss needs no request. */
    config = config_for("http://127.0.0.1:1", lists, keys);
    config.cache_dir = cache_dir;
    config.failure_policy = BLOCKSIEVE_FAIL_CLOSED;
    agent = NULL;
    CHECK(blocksieve_agent_new(&config, &agent) == BLOCKSIEVE_OK);
    if (agent != NULL) {
        CHECK(blocksieve_agent_check(agent, listed, strlen(listed), &verdict, list_out, sizeof list_out,
                                     expression, sizeof expression) == BLOCKSIEVE_OK);
        CHECK(verdict.kind == BLOCKSIEVE_UNVERIFIED && verdict.block);
        CHECK(strcmp(list_out, list) == 0 && verdict.expression_len == 0);
        CHECK(blocksieve_agent_update(agent) == BLOCKSIEVE_OK); /* the cached snapshot stays */
        CHECK(blocksieve_agent_status(agent, status, 2, &count) == BLOCKSIEVE_OK && count == 1);
        CHECK(status[0].has_snapshot && status[0].last_update_failed && status[0].consecutive_failures == 1);
        CHECK(blocksieve_agent_free(agent) == BLOCKSIEVE_OK);
    }
}

/* The runtime's worker thread does not survive fork(): in a child, a call
 * on an agent made by its parent is refused at once (it used to wait
 * forever, past every timeout, for a thread that is not there), freeing it
 * returns, and an agent made in the child works. */
static void test_fork(const char *base_url, const char *key, const char *list, const char *listed) {
    const char *lists[1] = {list};
    const char *keys[1] = {key};
    blocksieve_config config = config_for(base_url, lists, keys);
    config.request_timeout_ms = 2000;
    blocksieve_agent *agent = NULL;
    CHECK(blocksieve_agent_new(&config, &agent) == BLOCKSIEVE_OK);
    if (agent == NULL) {
        return;
    }
    CHECK(blocksieve_agent_update(agent) == BLOCKSIEVE_OK);
    fflush(stdout);
    fflush(stderr);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        alarm(60); /* a hang ends the child by SIGALRM, failing the check below */
        blocksieve_verdict verdict;
        CHECK(blocksieve_agent_check(agent, listed, strlen(listed), &verdict, NULL, 0, NULL, 0) ==
              BLOCKSIEVE_INTERNAL);
        CHECK(strstr(last_error(), "fork") != NULL);
        CHECK(verdict.kind != BLOCKSIEVE_SAFE && verdict.block);
        CHECK(blocksieve_agent_update(agent) == BLOCKSIEVE_INTERNAL);
        CHECK(blocksieve_agent_start_updates(agent) == BLOCKSIEVE_INTERNAL);
        CHECK(blocksieve_agent_free(agent) == BLOCKSIEVE_OK);
        blocksieve_agent *own = NULL;
        CHECK(blocksieve_agent_new(&config, &own) == BLOCKSIEVE_OK);
        if (own != NULL) {
            CHECK(blocksieve_agent_update(own) == BLOCKSIEVE_OK);
            CHECK(blocksieve_agent_check(own, listed, strlen(listed), &verdict, NULL, 0, NULL, 0) ==
                  BLOCKSIEVE_OK);
            CHECK(verdict.kind == BLOCKSIEVE_UNSAFE);
            CHECK(blocksieve_agent_free(own) == BLOCKSIEVE_OK);
        }
        fflush(stderr);
        _exit(failures == 0 ? 0 : 1);
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "agent_test: the forked child was killed by signal %d (SIGALRM: it hung)\n",
                WTERMSIG(status));
    }
    /* The parent's agent is unaffected. */
    blocksieve_verdict verdict;
    CHECK(blocksieve_agent_check(agent, listed, strlen(listed), &verdict, NULL, 0, NULL, 0) == BLOCKSIEVE_OK);
    CHECK(verdict.kind == BLOCKSIEVE_UNSAFE);
    CHECK(blocksieve_agent_free(agent) == BLOCKSIEVE_OK);
}

/* xlang: JSON output. */

static int xlang(const char *base_url, const char *key, const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/inputs.txt", dir);
    size_t hex_len = 0;
    char *hex = (char *)read_file(path, &hex_len);
    if (hex == NULL) {
        fprintf(stderr, "xlang: cannot read %s\n", path);
        return 2;
    }
    const char *lists[1] = {"xlang"};
    const char *keys[1] = {key};
    blocksieve_config config = config_for(base_url, lists, keys);
    blocksieve_agent *agent = NULL;
    if (blocksieve_agent_new(&config, &agent) != BLOCKSIEVE_OK || blocksieve_agent_update(agent) != BLOCKSIEVE_OK) {
        fprintf(stderr, "xlang: %s\n", last_error());
        blocksieve_agent_free(agent);
        free(hex);
        return 1;
    }
    size_t input_cap = 256, canonical_cap = 256, list_cap = BLOCKSIEVE_LIST_NAME_CAPACITY, expression_cap = 256;
    char *input = (char *)malloc(input_cap);
    char *canonical = (char *)malloc(canonical_cap);
    char *list = (char *)malloc(list_cap);
    char *expression = (char *)malloc(expression_cap);
    int lines = 0, rc = 0;
    size_t pos = 0;
    while (pos < hex_len && rc == 0) {
        size_t input_len = 0;
        rc = xlang_next_input(hex, hex_len, &pos, &input, &input_cap, &input_len, lines + 1);
        if (rc != 0) break;
        xlang_print_hashes(input, input_len, &canonical, &canonical_cap);

        blocksieve_verdict v;
        blocksieve_status status =
            blocksieve_agent_check(agent, input, input_len, &v, list, list_cap, expression, expression_cap);
        if (status == BLOCKSIEVE_OK && v.expression_len >= expression_cap) {
            /* Cut to the buffer: ask again with room for the whole text. */
            expression_cap = v.expression_len + 1;
            expression = (char *)realloc(expression, expression_cap);
            status = blocksieve_agent_check(agent, input, input_len, &v, list, list_cap, expression, expression_cap);
        }
        rc = xlang_print_verdict(status, &v, list, expression, lines + 1);
        lines++;
    }
    fprintf(stderr, "xlang: %d lines\n", lines);
    free(input);
    free(canonical);
    free(list);
    free(expression);
    free(hex);
    if (blocksieve_agent_free(agent) != BLOCKSIEVE_OK) rc = 1;
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 9 && strcmp(argv[1], "test") == 0) {
        test_sans_io(argv[7]);
        test_agent(argv[2], argv[3], argv[4], argv[5], argv[6], argv[8]);
        printf("%s: %d checks, %d failed\n", argv[0], checks, failures);
        return failures == 0 ? 0 : 1;
    }
    if (argc == 6 && strcmp(argv[1], "fork") == 0) {
        test_fork(argv[2], argv[3], argv[4], argv[5]);
        printf("%s: fork: %d checks, %d failed\n", argv[0], checks, failures);
        return failures == 0 ? 0 : 1;
    }
    if (argc == 5 && strcmp(argv[1], "xlang") == 0) {
        return xlang(argv[2], argv[3], argv[4]);
    }
    fprintf(stderr,
            "usage: %s test BASE_URL PUBLIC_KEY LIST LISTED_URL BENIGN_URL GOLDEN_SNAPSHOT CACHE_DIR\n"
            "       %s fork BASE_URL PUBLIC_KEY LIST LISTED_URL\n"
            "       %s xlang BASE_URL PUBLIC_KEY DIR\n",
            argv[0], argv[0], argv[0]);
    return 2;
}
