/*
 * The sans-I/O session of the C ABI from a native host with its own HTTP
 * stack (libcurl), in C (and, compiled with g++, C++), as
 * .ci/bindings-c.sh runs it against a real publisher, under valgrind:
 *
 *   session_test test BASE_URL PUBLIC_KEY LIST LISTED_URL BENIGN_URL SAVE_DIR
 *       update rounds (the snapshot, then nothing newer), a listed URL
 *       unsafe after one full-hash round trip carrying noise prefixes, a
 *       benign URL safe with no request, a cached answer with no request,
 *       responses the host mangles (503, garbage, oversized) and requests
 *       it cannot send: the list kept, the verdict unverified, never unsafe;
 *       misuse (NULL, dead and foreign handles, buffers too small); checks
 *       from several threads; the list saved to files in SAVE_DIR and
 *       restored by a new session (checks at once, the next round asks for
 *       deltas, no snapshot downloaded), tampered files refused.
 *   session_test xlang BASE_URL PUBLIC_KEY DIR
 *       one JSON line per input of DIR/inputs.txt (hex lines), the same as
 *       `cargo run -p blocksieve-tests --example xlang -- reference ...`.
 *
 * Exits 0 when every check passed, 1 otherwise (each failure is printed
 * with its line and the library's last error), 2 on bad usage.
 */
#include "check.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The host's clock and randomness: the library reads neither. */

static int64_t now_ms(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A fresh seed from the system's CSPRNG for every call that draws noise. */
static const uint8_t *fresh_seed(void) {
    static uint8_t seed[BLOCKSIEVE_SEED_BYTES];
    FILE *f = fopen("/dev/urandom", "rb");
    if (f == NULL || fread(seed, 1, sizeof seed, f) != sizeof seed) {
        fprintf(stderr, "cannot read /dev/urandom\n");
        exit(2);
    }
    fclose(f);
    return seed;
}

/* The host's HTTP stack: one libcurl easy handle, its connection reused. */

#define MAX_HEADERS 32

struct http {
    CURL *curl;
    long status;
    char *names[MAX_HEADERS];
    char *values[MAX_HEADERS];
    blocksieve_header headers[MAX_HEADERS];
    size_t header_count;
    unsigned char *body;
    size_t body_len, body_cap;
    char error[CURL_ERROR_SIZE];
    int sent;      /* requests sent */
    int snapshots; /* of which whole-snapshot requests */
};

static void clear_headers(struct http *h) {
    for (size_t i = 0; i < h->header_count; i++) {
        free(h->names[i]);
        free(h->values[i]);
    }
    h->header_count = 0;
}

static char *copy(const char *s, size_t len) {
    char *out = (char *)malloc(len + 1);
    if (out == NULL) exit(2);
    memcpy(out, s, len);
    out[len] = '\0';
    return out;
}

static size_t on_header(char *line, size_t size, size_t n, void *userdata) {
    struct http *h = (struct http *)userdata;
    size_t len = size * n;
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        clear_headers(h); /* a new response (after a 100 Continue, say) */
        return len;
    }
    const char *colon = (const char *)memchr(line, ':', len);
    if (colon == NULL || h->header_count == MAX_HEADERS) return len;
    size_t name_len = (size_t)(colon - line);
    const char *value = colon + 1;
    size_t value_len = len - name_len - 1;
    while (value_len > 0 && (*value == ' ' || *value == '\t')) value++, value_len--;
    while (value_len > 0 && (value[value_len - 1] == '\r' || value[value_len - 1] == '\n' ||
                             value[value_len - 1] == ' ')) {
        value_len--;
    }
    h->names[h->header_count] = copy(line, name_len);
    h->values[h->header_count] = copy(value, value_len);
    h->headers[h->header_count].name = h->names[h->header_count];
    h->headers[h->header_count].value = h->values[h->header_count];
    h->header_count++;
    return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *userdata) {
    struct http *h = (struct http *)userdata;
    size_t len = size * n;
    if (h->body_len + len > h->body_cap) {
        size_t cap = h->body_cap ? h->body_cap : 4096;
        while (cap < h->body_len + len) cap *= 2;
        unsigned char *grown = (unsigned char *)realloc(h->body, cap);
        if (grown == NULL) return 0;
        h->body = grown;
        h->body_cap = cap;
    }
    memcpy(h->body + h->body_len, data, len);
    h->body_len += len;
    return len;
}

/* Sends a request exactly as the library describes it. Returns 0 with the
 * response in `h`, or -1 with curl's error in `h->error`. */
static int send_request(struct http *h, const blocksieve_request *request) {
    const char *method = NULL, *url = NULL, *name = NULL, *value = NULL;
    const uint8_t *body = NULL;
    size_t header_count = 0, body_len = 0;
    if (blocksieve_request_method(request, &method) != BLOCKSIEVE_OK ||
        blocksieve_request_url(request, &url) != BLOCKSIEVE_OK ||
        blocksieve_request_header_count(request, &header_count) != BLOCKSIEVE_OK ||
        blocksieve_request_body(request, &body, &body_len) != BLOCKSIEVE_OK) {
        snprintf(h->error, sizeof h->error, "bad request handle: %s", last_error());
        return -1;
    }
    struct curl_slist *list = curl_slist_append(NULL, "Expect:");
    for (size_t i = 0; i < header_count; i++) {
        char line[1024];
        if (blocksieve_request_header(request, i, &name, &value) != BLOCKSIEVE_OK) continue;
        snprintf(line, sizeof line, "%s: %s", name, value);
        list = curl_slist_append(list, line);
    }
    clear_headers(h);
    h->body_len = 0;
    h->status = 0;
    h->error[0] = '\0';
    curl_easy_reset(h->curl);
    curl_easy_setopt(h->curl, CURLOPT_URL, url);
    curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(h->curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h->curl, CURLOPT_HEADERDATA, (void *)h);
    curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, (void *)h);
    curl_easy_setopt(h->curl, CURLOPT_ERRORBUFFER, h->error);
    curl_easy_setopt(h->curl, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(h->curl, CURLOPT_POST, 1L);
        curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE, (long)body_len);
        curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, (const char *)body);
    }
    CURLcode code = curl_easy_perform(h->curl);
    curl_slist_free_all(list);
    h->sent++;
    const char *route = strrchr(url, '/');
    if (route != NULL && strcmp(route, "/snapshot") == 0) h->snapshots++;
    if (code != CURLE_OK) {
        if (h->error[0] == '\0') snprintf(h->error, sizeof h->error, "%s", curl_easy_strerror(code));
        return -1;
    }
    curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &h->status);
    return 0;
}

static void http_init(struct http *h) {
    memset(h, 0, sizeof *h);
    h->curl = curl_easy_init();
    if (h->curl == NULL) exit(2);
}

static void http_free(struct http *h) {
    clear_headers(h);
    free(h->body);
    curl_easy_cleanup(h->curl);
}

/* The host's update round: every request of the round sent and its
 * response handed back, with the snapshot request of a NEED_SNAPSHOT in
 * the same round. Fills `results` (one per list) and returns the number. */
static size_t update_round(blocksieve_session *session, struct http *h, blocksieve_update_result *results) {
    blocksieve_request *requests[BLOCKSIEVE_MAX_LISTS];
    size_t count = 0;
    if (blocksieve_session_update_requests(session, requests, BLOCKSIEVE_MAX_LISTS, &count) != BLOCKSIEVE_OK) {
        return 0;
    }
    for (size_t i = 0; i < count; i++) {
        blocksieve_request *request = requests[i];
        while (request != NULL) {
            blocksieve_request *next = NULL;
            if (send_request(h, request) != 0) {
                blocksieve_session_handle_update_failure(session, request, h->error, &results[i]);
            } else {
                blocksieve_session_handle_update_response(session, request, (uint16_t)h->status, h->headers,
                                                          h->header_count, h->body, h->body_len, now_ms(),
                                                          &results[i], &next);
            }
            blocksieve_request_free(request);
            request = next;
        }
    }
    return count;
}

/* A check as the host runs it: a verdict at once, or one full-hash round
 * trip. Returns the status; `*requests` counts requests sent. */
static blocksieve_status check(blocksieve_session *session, struct http *h, const char *url, size_t url_len,
                               blocksieve_verdict *v, char *list, size_t list_cap, char *expression,
                               size_t expression_cap, int *requests) {
    blocksieve_query *query = NULL;
    blocksieve_status s = blocksieve_session_check(session, url, url_len, now_ms(), fresh_seed(), v, list,
                                                   list_cap, expression, expression_cap, &query);
    if (s != BLOCKSIEVE_OK || query == NULL) return s;
    const blocksieve_request *request = NULL;
    if (blocksieve_query_request(query, &request) != BLOCKSIEVE_OK) {
        blocksieve_query_free(query);
        return BLOCKSIEVE_INTERNAL;
    }
    (*requests)++;
    if (send_request(h, request) != 0) {
        return blocksieve_session_fail_check(session, query, h->error, now_ms(), fresh_seed(), v, list,
                                             list_cap, expression, expression_cap);
    }
    return blocksieve_session_complete_check(session, query, (uint16_t)h->status, h->headers, h->header_count,
                                             h->body, h->body_len, now_ms(), fresh_seed(), v, list, list_cap,
                                             expression, expression_cap);
}

static blocksieve_session_config config_for(const char *base_url, const char *const *lists,
                                            const char *const *keys) {
    blocksieve_session_config config;
    memset(&config, 0, sizeof config);
    config.base_url = base_url;
    config.lists = lists;
    config.lists_len = 1;
    config.trusted_keys = keys;
    config.trusted_keys_len = 1;
    config.failure_policy = BLOCKSIEVE_FAIL_OPEN;
    return config;
}

/* A session with its first snapshot loaded over `h`. */
static blocksieve_session *loaded(const blocksieve_session_config *config, struct http *h) {
    blocksieve_session *session = NULL;
    blocksieve_update_result results[BLOCKSIEVE_MAX_LISTS];
    CHECK(blocksieve_session_new(config, &session) == BLOCKSIEVE_OK);
    if (session == NULL) return NULL;
    CHECK(update_round(session, h, results) == 1 && results[0].kind == BLOCKSIEVE_UPDATE_UPDATED);
    return session;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The number of hash prefixes in a search request's JSON body. */
static int prefix_count(const uint8_t *body, size_t len) {
    char *text = copy((const char *)body, len);
    int quotes = 0;
    const char *p = strstr(text, "\"prefixes\":[");
    if (p != NULL) {
        for (p += 12; *p != '\0' && *p != ']'; p++) quotes += *p == '"';
    }
    free(text);
    return quotes / 2;
}

static blocksieve_session_stats stats_of(const blocksieve_session *session) {
    blocksieve_session_stats stats;
    memset(&stats, 0, sizeof stats);
    CHECK(blocksieve_session_get_stats(session, &stats) == BLOCKSIEVE_OK);
    return stats;
}

struct checker {
    blocksieve_session *session;
    const char *listed;
    const char *benign;
    int wrong;
};

/* Many threads may drive one session at once; its calls serialize. */
static void *check_concurrently(void *arg) {
    struct checker *c = (struct checker *)arg;
    struct http h;
    http_init(&h);
    for (int i = 0; i < 10; i++) {
        blocksieve_verdict v;
        int requests = 0;
        const char *url = i % 2 ? c->listed : c->benign;
        blocksieve_verdict_kind expected = i % 2 ? BLOCKSIEVE_UNSAFE : BLOCKSIEVE_SAFE;
        if (check(c->session, &h, url, strlen(url), &v, NULL, 0, NULL, 0, &requests) != BLOCKSIEVE_OK ||
            v.kind != expected) {
            c->wrong++;
        }
    }
    http_free(&h);
    return NULL;
}

static void test_config(const char *base_url, const char *key, const char *list) {
    const char *lists[1] = {list};
    const char *keys[1] = {key};
    blocksieve_session *session = NULL;
    blocksieve_session_config config = config_for(base_url, lists, keys);
    CHECK(blocksieve_session_new(NULL, &session) == BLOCKSIEVE_INVALID_ARGUMENT && session == NULL);
    CHECK(blocksieve_session_new(&config, NULL) == BLOCKSIEVE_INVALID_ARGUMENT);
    const char *bad_lists[1] = {"Not A List"};
    config.lists = bad_lists;
    CHECK(blocksieve_session_new(&config, &session) == BLOCKSIEVE_MISCONFIGURED && session == NULL);
    CHECK(strstr(last_error(), "Not A List") != NULL);
    config = config_for("ftp://publisher.example", lists, keys);
    CHECK(blocksieve_session_new(&config, &session) == BLOCKSIEVE_MISCONFIGURED && session == NULL);
    config = config_for("http://publisher.example", lists, keys);
    CHECK(blocksieve_session_new(&config, &session) == BLOCKSIEVE_MISCONFIGURED && session == NULL);
    CHECK(strstr(last_error(), "loopback") != NULL);
    config.dangerous_allow_plain_http = true;
    CHECK(blocksieve_session_new(&config, &session) == BLOCKSIEVE_OK && session != NULL);
    CHECK(blocksieve_session_free(session) == BLOCKSIEVE_OK);
    session = NULL;
    config = config_for(base_url, lists, keys);
    config.failure_policy = 7;
    CHECK(blocksieve_session_new(&config, &session) == BLOCKSIEVE_MISCONFIGURED && session == NULL);
    config = config_for(base_url, lists, keys);
    config.noise_prefixes = 65;
    CHECK(blocksieve_session_new(&config, &session) == BLOCKSIEVE_MISCONFIGURED && session == NULL);
    config = config_for(base_url, lists, keys);
    config.trusted_keys_len = 0;
    CHECK(blocksieve_session_new(&config, &session) == BLOCKSIEVE_MISCONFIGURED && session == NULL);
    const char *bad_keys[1] = {"bm90IGEga2V5"};
    config = config_for(base_url, lists, bad_keys);
    CHECK(blocksieve_session_new(&config, &session) == BLOCKSIEVE_MISCONFIGURED && session == NULL);
    config = config_for(base_url, lists, keys);
    config.lists_len = 0;
    CHECK(blocksieve_session_new(&config, &session) == BLOCKSIEVE_MISCONFIGURED && session == NULL);
}

static void test_session(const char *base_url, const char *key, const char *list, const char *listed,
                         const char *benign) {
    const char *lists[1] = {list};
    const char *keys[1] = {key};
    blocksieve_session_config config = config_for(base_url, lists, keys);
    blocksieve_session *session = NULL;
    blocksieve_verdict v;
    blocksieve_query *query = NULL;
    blocksieve_update_result results[BLOCKSIEVE_MAX_LISTS];
    char list_out[BLOCKSIEVE_LIST_NAME_CAPACITY], expression[1024];
    const char *text = NULL, *name = NULL, *value = NULL;
    const uint8_t *body = NULL;
    size_t count = 0, len = 0;
    uint64_t version = 0;
    struct http h;
    http_init(&h);
    memset(&v, 0, sizeof v);
    memset(results, 0, sizeof results);

    CHECK(blocksieve_session_new(&config, &session) == BLOCKSIEVE_OK && session != NULL);
    if (session == NULL) {
        http_free(&h);
        return;
    }

    /* Nothing to answer from before the first round; no request either. */
    CHECK(blocksieve_session_list_version(session, list, &version) == BLOCKSIEVE_NOT_READY);
    CHECK(blocksieve_session_list_version(session, "other", &version) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_session_check(session, benign, strlen(benign), now_ms(), fresh_seed(), &v, NULL, 0, NULL,
                                   0, &query) == BLOCKSIEVE_NOT_READY &&
          query == NULL);

    /* The first round's request: the whole snapshot, unconditional. */
    blocksieve_request *requests_out[BLOCKSIEVE_MAX_LISTS];
    CHECK(blocksieve_session_update_requests(session, NULL, 0, &count) == BLOCKSIEVE_BUFFER_TOO_SMALL &&
          count == 1);
    CHECK(blocksieve_session_update_requests(session, requests_out, BLOCKSIEVE_MAX_LISTS, &count) ==
              BLOCKSIEVE_OK &&
          count == 1);
    if (count == 1) {
        blocksieve_request *request = requests_out[0];
        CHECK(blocksieve_request_method(request, &text) == BLOCKSIEVE_OK && strcmp(text, "GET") == 0);
        CHECK(blocksieve_request_url(request, &text) == BLOCKSIEVE_OK && strncmp(text, base_url, strlen(base_url)) == 0);
        CHECK(ends_with(text, "/snapshot") && strstr(text, list) != NULL);
        CHECK(blocksieve_request_header_count(request, &count) == BLOCKSIEVE_OK && count == 0);
        CHECK(blocksieve_request_header(request, 0, &name, &value) == BLOCKSIEVE_INVALID_ARGUMENT);
        CHECK(strstr(last_error(), "out of range") != NULL);
        CHECK(blocksieve_request_body(request, &body, &len) == BLOCKSIEVE_OK && body == NULL && len == 0);
        /* Sent, its answer applied. */
        blocksieve_request *next = NULL;
        CHECK(send_request(&h, request) == 0 && h.status == 200);
        CHECK(blocksieve_session_handle_update_response(session, request, (uint16_t)h.status, h.headers,
                                                        h.header_count, h.body, h.body_len, now_ms(), &results[0],
                                                        &next) == BLOCKSIEVE_OK);
        CHECK(next == NULL && results[0].kind == BLOCKSIEVE_UPDATE_UPDATED && strcmp(results[0].list, list) == 0);
        CHECK(!results[0].has_previous && results[0].has_version && results[0].version > 0);
        CHECK(blocksieve_request_free(request) == BLOCKSIEVE_OK);
        /* A freed request is refused, not read. */
        CHECK(blocksieve_request_free(request) == BLOCKSIEVE_INVALID_ARGUMENT);
        CHECK(blocksieve_request_url(request, &text) == BLOCKSIEVE_INVALID_ARGUMENT);
        CHECK(strstr(last_error(), "not a live handle") != NULL);
    }
    CHECK(blocksieve_session_list_version(session, list, &version) == BLOCKSIEVE_OK &&
          version == results[0].version);

    /* The second round asks for the deltas since that version, with the
     * ETag; the publisher has nothing newer. */
    CHECK(blocksieve_session_update_requests(session, requests_out, 1, &count) == BLOCKSIEVE_OK && count == 1);
    if (count == 1) {
        blocksieve_request *request = requests_out[0];
        CHECK(blocksieve_request_url(request, &text) == BLOCKSIEVE_OK && strstr(text, "/updates/") != NULL);
        CHECK(blocksieve_request_header_count(request, &count) == BLOCKSIEVE_OK && count == 1);
        CHECK(blocksieve_request_header(request, 0, &name, &value) == BLOCKSIEVE_OK &&
              strcmp(name, "if-none-match") == 0 && value[0] == '"');
        blocksieve_request_free(request);
    }
    CHECK(update_round(session, &h, results) == 1);
    CHECK(results[0].kind == BLOCKSIEVE_UPDATE_UNCHANGED && results[0].has_previous &&
          results[0].previous == version && results[0].version == version);
    printf("session_test: second round: HTTP %ld, unchanged at version %llu\n", h.status,
           (unsigned long long)version);

    /* A benign URL: safe, no request. */
    blocksieve_session_stats before = stats_of(session);
    CHECK(blocksieve_session_check(session, benign, strlen(benign), now_ms(), fresh_seed(), &v, list_out,
                                   sizeof list_out, expression, sizeof expression, &query) == BLOCKSIEVE_OK);
    CHECK(query == NULL && v.kind == BLOCKSIEVE_SAFE && !v.block && v.list_len == 0 && list_out[0] == '\0');

    /* A listed URL: one full-hash request carrying noise, then unsafe. */
    CHECK(blocksieve_session_check(session, listed, strlen(listed), now_ms(), fresh_seed(), &v, list_out,
                                   sizeof list_out, expression, sizeof expression, &query) == BLOCKSIEVE_OK);
    CHECK(query != NULL);
    if (query != NULL) {
        const blocksieve_request *search = NULL;
        CHECK(blocksieve_query_request(query, &search) == BLOCKSIEVE_OK && search != NULL);
        CHECK(blocksieve_request_method(search, &text) == BLOCKSIEVE_OK && strcmp(text, "POST") == 0);
        CHECK(blocksieve_request_url(search, &text) == BLOCKSIEVE_OK && ends_with(text, "/v1/hashes:search"));
        CHECK(blocksieve_request_body(search, &body, &len) == BLOCKSIEVE_OK && body != NULL && len > 0);
        int prefixes = prefix_count(body, len);
        CHECK(prefixes >= 1 + 4); /* the real request prefixes and 4 noise */
        printf("session_test: full-hash request with %d hash prefixes\n", prefixes);
        /* The lent request is the query's: not freed on its own. */
        CHECK(blocksieve_request_free((blocksieve_request *)search) == BLOCKSIEVE_INVALID_ARGUMENT);
        /* A query is not a request, nor a request a query. */
        CHECK(blocksieve_request_url((const blocksieve_request *)(const void *)query, &text) ==
              BLOCKSIEVE_INVALID_ARGUMENT);
        CHECK(blocksieve_query_free((blocksieve_query *)(void *)requests_out) == BLOCKSIEVE_INVALID_ARGUMENT);
        CHECK(send_request(&h, search) == 0 && h.status == 200);
        CHECK(blocksieve_session_complete_check(session, query, (uint16_t)h.status, h.headers, h.header_count,
                                                h.body, h.body_len, now_ms(), fresh_seed(), &v, list_out,
                                                sizeof list_out, expression,
                                                sizeof expression) == BLOCKSIEVE_OK);
        CHECK(v.kind == BLOCKSIEVE_UNSAFE && v.block && !v.stale);
        CHECK(strcmp(list_out, list) == 0 && v.list_len == strlen(list));
        CHECK(v.expression_len == strlen(expression) && v.expression_len > 0);
        uint8_t hashes[30 * BLOCKSIEVE_FULL_HASH_BYTES];
        size_t hashes_len = 0;
        CHECK(blocksieve_full_hashes(listed, strlen(listed), hashes, sizeof hashes, &hashes_len) == BLOCKSIEVE_OK);
        int found = 0;
        for (size_t i = 0; i < hashes_len; i += BLOCKSIEVE_FULL_HASH_BYTES) {
            found |= memcmp(hashes + i, v.full_hash, BLOCKSIEVE_FULL_HASH_BYTES) == 0;
        }
        CHECK(found);
        /* The query was consumed: a second use is refused, not read. */
        CHECK(blocksieve_session_complete_check(session, query, 200, NULL, 0, NULL, 0, now_ms(), fresh_seed(), &v,
                                                NULL, 0, NULL, 0) == BLOCKSIEVE_INVALID_ARGUMENT);
        CHECK(strstr(last_error(), "not a live handle") != NULL);
        CHECK(blocksieve_query_request(query, &search) == BLOCKSIEVE_INVALID_ARGUMENT);
        CHECK(blocksieve_query_free(query) == BLOCKSIEVE_INVALID_ARGUMENT);
    }

    /* Checked again: answered from the full-hash cache, no request. */
    CHECK(blocksieve_session_check(session, listed, strlen(listed), now_ms(), fresh_seed(), &v, NULL, 0, NULL, 0,
                                   &query) == BLOCKSIEVE_OK);
    CHECK(query == NULL && v.kind == BLOCKSIEVE_UNSAFE);
    blocksieve_session_stats after = stats_of(session);
    CHECK(after.full_hash_requests == before.full_hash_requests + 1);
    CHECK(after.cache_hits > before.cache_hits && after.confirmed_unsafe == before.confirmed_unsafe + 2);
    CHECK(after.lookups == before.lookups + 3 && after.full_hash_failures == 0);
    CHECK(after.snapshots_applied == 1 && after.updates_failed == 0);

    /* Texts that do not fit are cut; the verdict stands, with OK. */
    char small[3];
    CHECK(blocksieve_session_check(session, listed, strlen(listed), now_ms(), fresh_seed(), &v, small,
                                   sizeof small, NULL, 0, &query) == BLOCKSIEVE_OK);
    CHECK(query == NULL && v.kind == BLOCKSIEVE_UNSAFE && v.block && v.list_len == strlen(list));
    CHECK(strlen(small) == 2 && strncmp(small, list, 2) == 0);

    /* An invalid URL is neither safe nor unsafe. */
    const char *invalid = "mailto:someone@example.com";
    CHECK(blocksieve_session_check(session, invalid, strlen(invalid), now_ms(), fresh_seed(), &v, NULL, 0, NULL,
                                   0, &query) == BLOCKSIEVE_INVALID_URL);
    CHECK(strncmp(last_error(), "invalid url: ", 13) == 0 && query == NULL);

    /* NULL and out-of-range arguments. */
    CHECK(blocksieve_session_check(NULL, benign, strlen(benign), now_ms(), fresh_seed(), &v, NULL, 0, NULL, 0,
                                   &query) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_session_check(session, NULL, 3, now_ms(), fresh_seed(), &v, NULL, 0, NULL, 0, &query) ==
          BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_session_check(session, benign, strlen(benign), now_ms(), NULL, &v, NULL, 0, NULL, 0,
                                   &query) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(strcmp(last_error(), "seed is NULL") == 0);
    CHECK(blocksieve_session_check(session, benign, strlen(benign), now_ms(), fresh_seed(), NULL, NULL, 0, NULL,
                                   0, &query) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_session_check(session, benign, strlen(benign), now_ms(), fresh_seed(), &v, NULL, 0, NULL,
                                   0, NULL) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_session_update_requests(session, requests_out, 1, NULL) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_session_update_requests(NULL, requests_out, 1, &count) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_session_get_stats(session, NULL) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_session_list_version(session, NULL, &version) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_request_url(NULL, &text) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_request_free(NULL) == BLOCKSIEVE_OK && blocksieve_query_free(NULL) == BLOCKSIEVE_OK);
    CHECK(blocksieve_session_free(NULL) == BLOCKSIEVE_OK);

    /* Checks from several threads at once, each with its own connection. */
    pthread_t threads[4];
    struct checker checkers[4];
    for (int i = 0; i < 4; i++) {
        checkers[i].session = session;
        checkers[i].listed = listed;
        checkers[i].benign = benign;
        checkers[i].wrong = 0;
        CHECK(pthread_create(&threads[i], NULL, check_concurrently, &checkers[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        CHECK(pthread_join(threads[i], NULL) == 0);
        CHECK(checkers[i].wrong == 0);
    }

    /* What the host feeds in when the publisher misbehaves, on a second
     * session that fails closed. */
    config.failure_policy = BLOCKSIEVE_FAIL_CLOSED;
    blocksieve_session *closed = loaded(&config, &h);
    if (closed != NULL) {
        const uint8_t garbage[] = "<html>not a snapshot</html>";
        blocksieve_header retry[1];
        retry[0].name = "Retry-After";
        retry[0].value = "120";
        blocksieve_request *next = NULL;
        uint64_t held = 0;
        CHECK(blocksieve_session_list_version(closed, list, &held) == BLOCKSIEVE_OK);

        CHECK(blocksieve_session_update_requests(closed, requests_out, 1, &count) == BLOCKSIEVE_OK);
        blocksieve_request *deltas = requests_out[0];
        /* A 503: failed, the list kept. */
        CHECK(blocksieve_session_handle_update_response(closed, deltas, 503, retry, 1, NULL, 0, now_ms(),
                                                        &results[0], &next) == BLOCKSIEVE_TRANSPORT);
        CHECK(results[0].kind == BLOCKSIEVE_UPDATE_FAILED && results[0].version == held && next == NULL);
        CHECK(strstr(last_error(), "503") != NULL);
        /* Garbage for the deltas: take the whole snapshot instead ... */
        CHECK(blocksieve_session_handle_update_response(closed, deltas, 200, NULL, 0, garbage, sizeof garbage,
                                                        now_ms(), &results[0], &next) == BLOCKSIEVE_OK);
        CHECK(results[0].kind == BLOCKSIEVE_UPDATE_NEED_SNAPSHOT && next != NULL);
        if (next != NULL) {
            CHECK(blocksieve_request_url(next, &text) == BLOCKSIEVE_OK && ends_with(text, "/snapshot"));
            /* ... garbage again: refused as bad data, the list kept. */
            blocksieve_request *after_next = NULL;
            CHECK(blocksieve_session_handle_update_response(closed, next, 200, NULL, 0, garbage, sizeof garbage,
                                                            now_ms(), &results[0],
                                                            &after_next) == BLOCKSIEVE_BAD_DATA);
            CHECK(results[0].kind == BLOCKSIEVE_UPDATE_FAILED && after_next == NULL);
            /* A body NULL with a length is the caller's bug. */
            CHECK(blocksieve_session_handle_update_response(closed, next, 200, NULL, 0, NULL, 5, now_ms(),
                                                            &results[0], &after_next) ==
                  BLOCKSIEVE_INVALID_ARGUMENT);
            blocksieve_request_free(next);
        }
        /* A request the host could not send: counted, the list kept. */
        CHECK(blocksieve_session_handle_update_failure(closed, deltas, "connection refused", &results[0]) ==
              BLOCKSIEVE_TRANSPORT);
        CHECK(results[0].kind == BLOCKSIEVE_UPDATE_FAILED && results[0].version == held);
        CHECK(strstr(last_error(), "connection refused") != NULL);
        /* Another session's request is refused. */
        CHECK(blocksieve_session_handle_update_response(session, deltas, 304, NULL, 0, NULL, 0, now_ms(),
                                                        &results[0], &next) == BLOCKSIEVE_INVALID_ARGUMENT);
        CHECK(strstr(last_error(), "another session") != NULL);
        blocksieve_request_free(deltas);
        CHECK(blocksieve_session_list_version(closed, list, &version) == BLOCKSIEVE_OK && version == held);
        CHECK(stats_of(closed).updates_failed == 3 && stats_of(closed).delta_fallbacks == 1);

        /* A 503 to the full-hash request: unverified, blocked when failing
         * closed — a prefix hit alone is never unsafe. */
        CHECK(blocksieve_session_check(closed, listed, strlen(listed), now_ms(), fresh_seed(), &v, NULL, 0, NULL,
                                       0, &query) == BLOCKSIEVE_OK &&
              query != NULL);
        /* Completing on another session is refused (and consumes it). */
        CHECK(blocksieve_session_complete_check(session, query, 200, NULL, 0, NULL, 0, now_ms(), fresh_seed(),
                                                &v, NULL, 0, NULL, 0) == BLOCKSIEVE_INVALID_ARGUMENT);
        CHECK(blocksieve_session_check(closed, listed, strlen(listed), now_ms(), fresh_seed(), &v, NULL, 0, NULL,
                                       0, &query) == BLOCKSIEVE_OK &&
              query != NULL);
        CHECK(blocksieve_session_complete_check(closed, query, 503, retry, 1, NULL, 0, now_ms(), fresh_seed(), &v,
                                                list_out, sizeof list_out, expression,
                                                sizeof expression) == BLOCKSIEVE_OK);
        CHECK(v.kind == BLOCKSIEVE_UNVERIFIED && v.block && strcmp(list_out, list) == 0 && v.expression_len == 0);
        /* Then paused by the backoff: unverified at once, no request. */
        CHECK(blocksieve_session_check(closed, listed, strlen(listed), now_ms(), fresh_seed(), &v, NULL, 0, NULL,
                                       0, &query) == BLOCKSIEVE_OK);
        CHECK(query == NULL && v.kind == BLOCKSIEVE_UNVERIFIED && v.block);
        CHECK(blocksieve_session_check(closed, benign, strlen(benign), now_ms(), fresh_seed(), &v, NULL, 0, NULL,
                                       0, &query) == BLOCKSIEVE_OK);
        CHECK(query == NULL && v.kind == BLOCKSIEVE_SAFE && !v.block);
        CHECK(stats_of(closed).full_hash_failures == 1 && stats_of(closed).confirmed_unsafe == 0);
        CHECK(blocksieve_session_free(closed) == BLOCKSIEVE_OK);
        CHECK(blocksieve_session_free(closed) == BLOCKSIEVE_INVALID_ARGUMENT);
    }

    /* Garbage with a 200 to the full-hash request, and a request the host
     * could not send: unverified, not blocked when failing open. */
    config.failure_policy = BLOCKSIEVE_FAIL_OPEN;
    for (int transport = 0; transport < 2; transport++) {
        blocksieve_session *open = loaded(&config, &h);
        if (open == NULL) continue;
        CHECK(blocksieve_session_check(open, listed, strlen(listed), now_ms(), fresh_seed(), &v, NULL, 0, NULL, 0,
                                       &query) == BLOCKSIEVE_OK &&
              query != NULL);
        const uint8_t garbage[] = "{\"results\": 12}";
        blocksieve_header json[1];
        json[0].name = "content-type";
        json[0].value = "application/json";
        blocksieve_status s =
            transport ? blocksieve_session_fail_check(open, query, "timed out", now_ms(), fresh_seed(), &v, NULL, 0,
                                                      NULL, 0)
                      : blocksieve_session_complete_check(open, query, 200, json, 1, garbage, sizeof garbage - 1,
                                                          now_ms(), fresh_seed(), &v, NULL, 0, NULL, 0);
        CHECK(s == BLOCKSIEVE_OK && v.kind == BLOCKSIEVE_UNVERIFIED && !v.block);
        CHECK(stats_of(open).full_hash_failures == 1 && stats_of(open).unverified == 1);
        CHECK(blocksieve_session_free(open) == BLOCKSIEVE_OK);
    }

    /* A snapshot over the session's limit is refused with a true error. */
    config.max_snapshot_bytes = 64;
    blocksieve_session *tiny = NULL;
    CHECK(blocksieve_session_new(&config, &tiny) == BLOCKSIEVE_OK);
    if (tiny != NULL) {
        blocksieve_request *request = NULL;
        blocksieve_request *next = NULL;
        CHECK(blocksieve_session_update_requests(tiny, &request, 1, &count) == BLOCKSIEVE_OK);
        CHECK(send_request(&h, request) == 0 && h.status == 200 && h.body_len > 64);
        CHECK(blocksieve_session_handle_update_response(tiny, request, (uint16_t)h.status, h.headers,
                                                        h.header_count, h.body, h.body_len, now_ms(), &results[0],
                                                        &next) == BLOCKSIEVE_BAD_DATA);
        CHECK(strstr(last_error(), "larger than the limit of 64 bytes") != NULL);
        CHECK(results[0].kind == BLOCKSIEVE_UPDATE_FAILED && !results[0].has_version);
        blocksieve_request_free(request);
        blocksieve_session_free(tiny);
    }

    CHECK(blocksieve_session_free(session) == BLOCKSIEVE_OK);
    printf("session_test: %d HTTP requests sent by the host\n", h.sent);
    http_free(&h);
}

/* Persistence as a native host does it: the three byte strings of a saved
 * list written to files, read back by the next process. */


static int write_file(const char *dir, const char *list, const char *kind, const uint8_t *data, size_t len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s", dir, list, kind);
    FILE *f = fopen(path, "wb");
    if (f == NULL) return -1;
    size_t written = len == 0 ? 0 : fwrite(data, 1, len, f);
    return fclose(f) == 0 && written == len ? 0 : -1;
}

static unsigned char *load_file(const char *dir, const char *list, const char *kind, size_t *len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s", dir, list, kind);
    return read_file(path, len);
}

/* Saves `list` of `session` to DIR/LIST.{snapshot,chain,record}. */
static int save_to_files(const blocksieve_session *session, const char *list, const char *dir) {
    blocksieve_saved *saved = NULL;
    const uint8_t *bytes = NULL;
    size_t len = 0;
    int rc = -1;
    if (blocksieve_session_save(session, list, &saved) != BLOCKSIEVE_OK) return -1;
    if (blocksieve_saved_snapshot(saved, &bytes, &len) == BLOCKSIEVE_OK && len > 0 &&
        write_file(dir, list, "snapshot", bytes, len) == 0 &&
        blocksieve_saved_chain(saved, &bytes, &len) == BLOCKSIEVE_OK &&
        write_file(dir, list, "chain", bytes, len) == 0 &&
        blocksieve_saved_record(saved, &bytes, &len) == BLOCKSIEVE_OK &&
        write_file(dir, list, "record", bytes, len) == 0) {
        rc = 0;
    }
    CHECK(blocksieve_saved_free(saved) == BLOCKSIEVE_OK);
    return rc;
}

struct stored {
    unsigned char *snapshot, *chain, *record;
    size_t snapshot_len, chain_len, record_len;
};

/* Restores `list` from `s`; `*dropped` says whether its chain was dropped. */
static blocksieve_status restore_from(blocksieve_session *session, const char *list, const struct stored *s,
                                      uint64_t *version, bool *dropped) {
    return blocksieve_session_restore(session, list, s->snapshot, s->snapshot_len, s->chain, s->chain_len,
                                      s->record, s->record_len, now_ms(), version, dropped);
}

static void test_saved(const char *base_url, const char *key, const char *list, const char *listed,
                       const char *dir) {
    const char *lists[1] = {list};
    const char *keys[1] = {key};
    blocksieve_session_config config = config_for(base_url, lists, keys);
    blocksieve_update_result results[BLOCKSIEVE_MAX_LISTS];
    blocksieve_request *request = NULL;
    blocksieve_saved *saved = NULL;
    blocksieve_verdict v;
    blocksieve_query *query = NULL;
    const char *text = NULL, *name = NULL, *value = NULL;
    size_t count = 0;
    uint64_t version = 0, restored = 0;
    bool dropped = true;
    struct stored s;
    struct http h;
    http_init(&h);
    memset(&s, 0, sizeof s);

    /* Nothing to keep before the first snapshot. */
    blocksieve_session *empty = NULL;
    CHECK(blocksieve_session_new(&config, &empty) == BLOCKSIEVE_OK);
    CHECK(blocksieve_session_save(empty, list, &saved) == BLOCKSIEVE_NOT_READY && saved == NULL);

    /* After an update that changed the list, keep it in files. */
    blocksieve_session *first = loaded(&config, &h);
    if (first == NULL) {
        blocksieve_session_free(empty);
        http_free(&h);
        return;
    }
    CHECK(blocksieve_session_list_version(first, list, &version) == BLOCKSIEVE_OK);
    CHECK(save_to_files(first, list, dir) == 0);
    CHECK(blocksieve_session_save(first, "other", &saved) == BLOCKSIEVE_INVALID_ARGUMENT && saved == NULL);
    CHECK(strstr(last_error(), "not subscribed") != NULL);
    CHECK(blocksieve_session_save(NULL, list, &saved) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_session_save(first, NULL, &saved) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_session_save(first, list, NULL) == BLOCKSIEVE_INVALID_ARGUMENT);
    /* A saved list outlives its session; freed, it is refused. */
    CHECK(blocksieve_session_save(first, list, &saved) == BLOCKSIEVE_OK && saved != NULL);
    CHECK(blocksieve_session_free(first) == BLOCKSIEVE_OK);
    const uint8_t *bytes = NULL;
    size_t len = 0;
    CHECK(blocksieve_saved_snapshot(saved, &bytes, &len) == BLOCKSIEVE_OK && bytes != NULL && len > 0);
    CHECK(blocksieve_saved_chain(saved, &bytes, &len) == BLOCKSIEVE_OK && bytes == NULL && len == 0);
    CHECK(blocksieve_saved_record(saved, NULL, &len) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_saved_free(saved) == BLOCKSIEVE_OK);
    CHECK(blocksieve_saved_free(saved) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(blocksieve_saved_record(saved, &bytes, &len) == BLOCKSIEVE_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "not a live handle") != NULL);
    CHECK(blocksieve_saved_free(NULL) == BLOCKSIEVE_OK);

    /* The next process: a new session restored from the files. */
    s.snapshot = load_file(dir, list, "snapshot", &s.snapshot_len);
    s.chain = load_file(dir, list, "chain", &s.chain_len);
    s.record = load_file(dir, list, "record", &s.record_len);
    CHECK(s.snapshot != NULL && s.snapshot_len > 0 && s.chain_len == 0 && s.record != NULL && s.record_len > 0);
    int sent_before = h.sent, snapshots_before = h.snapshots;
    blocksieve_session *restarted = NULL;
    CHECK(blocksieve_session_new(&config, &restarted) == BLOCKSIEVE_OK);
    if (restarted != NULL && s.snapshot != NULL) {
        CHECK(restore_from(restarted, list, &s, &restored, &dropped) == BLOCKSIEVE_OK && restored == version &&
              !dropped);
        CHECK(blocksieve_session_list_version(restarted, list, &restored) == BLOCKSIEVE_OK && restored == version);
        blocksieve_session_stats stats = stats_of(restarted);
        CHECK(stats.restored == 1 && stats.restored_stale == 0 && stats.snapshots_applied == 0);
        printf("session_test: restored %s version %llu from %zu snapshot bytes and a %zu-byte record\n", list,
               (unsigned long long)restored, s.snapshot_len, s.record_len);

        /* Checks work before any update: a listed URL is a prefix hit, then
         * unsafe after one full-hash round trip. */
        int requests = 0;
        char list_out[BLOCKSIEVE_LIST_NAME_CAPACITY], expression[1024];
        CHECK(blocksieve_session_check(restarted, listed, strlen(listed), now_ms(), fresh_seed(), &v, NULL, 0, NULL,
                                       0, &query) == BLOCKSIEVE_OK &&
              query != NULL);
        blocksieve_query_free(query);
        CHECK(check(restarted, &h, listed, strlen(listed), &v, list_out, sizeof list_out, expression,
                    sizeof expression, &requests) == BLOCKSIEVE_OK);
        CHECK(requests == 1 && v.kind == BLOCKSIEVE_UNSAFE && v.block && !v.stale && strcmp(list_out, list) == 0);

        /* The next round asks for the deltas since the version restored
         * (If-None-Match), and hears nothing newer. */
        CHECK(blocksieve_session_update_requests(restarted, &request, 1, &count) == BLOCKSIEVE_OK && count == 1);
        if (count == 1) {
            CHECK(blocksieve_request_url(request, &text) == BLOCKSIEVE_OK && strstr(text, "/updates/") != NULL);
            CHECK(blocksieve_request_header_count(request, &count) == BLOCKSIEVE_OK && count == 1);
            CHECK(blocksieve_request_header(request, 0, &name, &value) == BLOCKSIEVE_OK &&
                  strcmp(name, "if-none-match") == 0);
            blocksieve_request_free(request);
        }
        CHECK(update_round(restarted, &h, results) == 1);
        CHECK(results[0].kind == BLOCKSIEVE_UPDATE_UNCHANGED && results[0].version == version);
        CHECK(h.snapshots == snapshots_before && h.sent == sent_before + 2);
        stats = stats_of(restarted);
        CHECK(stats.snapshots_applied == 0 && stats.updates_failed == 0);
        printf("session_test: after the restore, %d requests and no snapshot download\n", h.sent - sent_before);

        /* A list holding a state keeps it; the same files again change
         * nothing. */
        CHECK(restore_from(restarted, list, &s, &restored, NULL) == BLOCKSIEVE_OK && restored == version);
        CHECK(stats_of(restarted).restored == 1);
        /* A list not subscribed, NULLs. */
        CHECK(blocksieve_session_restore(restarted, "other", s.snapshot, s.snapshot_len, NULL, 0, NULL, 0,
                                         now_ms(), &restored, NULL) == BLOCKSIEVE_INVALID_ARGUMENT);
        CHECK(strstr(last_error(), "not subscribed") != NULL);
        CHECK(blocksieve_session_restore(NULL, list, s.snapshot, s.snapshot_len, NULL, 0, NULL, 0, now_ms(),
                                         &restored, NULL) == BLOCKSIEVE_INVALID_ARGUMENT);
        CHECK(blocksieve_session_restore(restarted, NULL, s.snapshot, s.snapshot_len, NULL, 0, NULL, 0, now_ms(),
                                         &restored, NULL) == BLOCKSIEVE_INVALID_ARGUMENT);
        CHECK(blocksieve_session_restore(restarted, list, NULL, s.snapshot_len, NULL, 0, NULL, 0, now_ms(),
                                         &restored, NULL) == BLOCKSIEVE_INVALID_ARGUMENT);
        CHECK(blocksieve_session_restore(restarted, list, s.snapshot, s.snapshot_len, NULL, 0, NULL, 7, now_ms(),
                                         &restored, NULL) == BLOCKSIEVE_INVALID_ARGUMENT);
        CHECK(blocksieve_session_restore(restarted, list, s.snapshot, s.snapshot_len, NULL, 0, NULL, 0, now_ms(),
                                         NULL, NULL) == BLOCKSIEVE_INVALID_ARGUMENT);
    }
    CHECK(blocksieve_session_free(restarted) == BLOCKSIEVE_OK);

    /* A chain file that does not verify: the base alone is restored, and
     * the host is told the chain was dropped (update before relying on
     * the list). */
    const uint8_t junk[] = "not a delta chain";
    CHECK(write_file(dir, list, "chain", junk, sizeof junk - 1) == 0);
    free(s.chain);
    s.chain = load_file(dir, list, "chain", &s.chain_len);
    blocksieve_session *dropping = NULL;
    CHECK(blocksieve_session_new(&config, &dropping) == BLOCKSIEVE_OK);
    CHECK(restore_from(dropping, list, &s, &restored, &dropped) == BLOCKSIEVE_OK && restored == version && dropped);
    CHECK(blocksieve_session_free(dropping) == BLOCKSIEVE_OK);

    /* A file changed on disk: refused as bad data, the list stays without
     * a snapshot, and a check says so. */
    if (s.snapshot != NULL && s.snapshot_len > 0) {
        s.snapshot[s.snapshot_len / 2] ^= 1;
        CHECK(write_file(dir, list, "snapshot", s.snapshot, s.snapshot_len) == 0);
        free(s.snapshot);
        s.snapshot = load_file(dir, list, "snapshot", &s.snapshot_len);
        restored = 12345;
        CHECK(restore_from(empty, list, &s, &restored, &dropped) == BLOCKSIEVE_BAD_DATA && restored == 12345);
        printf("session_test: tampered snapshot file refused: %s\n", last_error());
        CHECK(blocksieve_session_list_version(empty, list, &version) == BLOCKSIEVE_NOT_READY);
        CHECK(blocksieve_session_check(empty, listed, strlen(listed), now_ms(), fresh_seed(), &v, NULL, 0, NULL, 0,
                                       &query) == BLOCKSIEVE_NOT_READY &&
              query == NULL);
        CHECK(stats_of(empty).restored == 0);
        /* Cut short: refused too. */
        s.snapshot_len /= 3;
        CHECK(restore_from(empty, list, &s, &restored, NULL) == BLOCKSIEVE_BAD_DATA);
    }
    CHECK(blocksieve_session_free(empty) == BLOCKSIEVE_OK);
    free(s.snapshot);
    free(s.chain);
    free(s.record);
    http_free(&h);
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
    blocksieve_session_config config = config_for(base_url, lists, keys);
    struct http h;
    http_init(&h);
    blocksieve_session *session = loaded(&config, &h);
    if (session == NULL || failures != 0) {
        fprintf(stderr, "xlang: %s\n", last_error());
        blocksieve_session_free(session);
        http_free(&h);
        free(hex);
        return 1;
    }
    size_t input_cap = 256, canonical_cap = 256, expression_cap = 256;
    char *input = (char *)malloc(input_cap);
    char *canonical = (char *)malloc(canonical_cap);
    char *expression = (char *)malloc(expression_cap);
    char list[BLOCKSIEVE_MAX_LISTS * BLOCKSIEVE_LIST_NAME_CAPACITY];
    int lines = 0, rc = 0, requests = 0;
    size_t pos = 0;
    while (pos < hex_len && rc == 0) {
        size_t input_len = 0;
        rc = xlang_next_input(hex, hex_len, &pos, &input, &input_cap, &input_len, lines + 1);
        if (rc != 0) break;
        xlang_print_hashes(input, input_len, &canonical, &canonical_cap);

        blocksieve_verdict v;
        blocksieve_status status =
            check(session, &h, input, input_len, &v, list, sizeof list, expression, expression_cap, &requests);
        if (status == BLOCKSIEVE_OK && v.expression_len >= expression_cap) {
            /* Cut to the buffer. The answer is cached now: a second check
             * makes no request. */
            expression_cap = v.expression_len + 1;
            expression = (char *)realloc(expression, expression_cap);
            status = check(session, &h, input, input_len, &v, list, sizeof list, expression, expression_cap,
                           &requests);
        }
        rc = xlang_print_verdict(status, &v, list, expression, lines + 1);
        lines++;
    }
    blocksieve_session_stats stats = stats_of(session);
    fprintf(stderr, "xlang: %d lines, %d full-hash requests sent, %llu cache hits, %llu failures\n", lines,
            requests, (unsigned long long)stats.cache_hits, (unsigned long long)stats.full_hash_failures);
    free(input);
    free(canonical);
    free(expression);
    free(hex);
    if (blocksieve_session_free(session) != BLOCKSIEVE_OK) rc = 1;
    http_free(&h);
    return rc;
}

int main(int argc, char **argv) {
    int rc = 2;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 2;
    if (argc == 8 && strcmp(argv[1], "test") == 0) {
        test_config(argv[2], argv[3], argv[4]);
        test_session(argv[2], argv[3], argv[4], argv[5], argv[6]);
        test_saved(argv[2], argv[3], argv[4], argv[5], argv[7]);
        printf("%s: %d checks, %d failed\n", argv[0], checks, failures);
        rc = failures == 0 ? 0 : 1;
    } else if (argc == 5 && strcmp(argv[1], "xlang") == 0) {
        rc = xlang(argv[2], argv[3], argv[4]);
    } else {
        fprintf(stderr,
                "usage: %s test BASE_URL PUBLIC_KEY LIST LISTED_URL BENIGN_URL SAVE_DIR\n"
                "       %s xlang BASE_URL PUBLIC_KEY DIR\n",
                argv[0], argv[0]);
    }
    curl_global_cleanup();
    return rc;
}
