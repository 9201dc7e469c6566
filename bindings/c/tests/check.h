/* What the C test programs share: the check counter and CHECK, the
 * library's last error, reading a file whole, and their cross-language
 * output (`xlang`): inputs read, canonical forms, full hashes, verdicts.
 * Included once per program (static definitions). */
#ifndef BLOCKSIEVE_TEST_CHECK_H
#define BLOCKSIEVE_TEST_CHECK_H

#include "blocksieve.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int checks = 0;
static int failures = 0;

static const char *last_error(void) {
    static char message[1024];
    size_t len = 0;
    if (blocksieve_last_error(message, sizeof message, &len) != BLOCKSIEVE_OK) {
        return "(last error did not fit)";
    }
    return message;
}

#define CHECK(cond)                                                                     \
    do {                                                                                \
        checks++;                                                                       \
        if (!(cond)) {                                                                  \
            failures++;                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__,     \
                    __LINE__, #cond, last_error());                                     \
        }                                                                               \
    } while (0)

/* The whole file at `path` (malloc'd, `*len` bytes), or NULL. */
static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    unsigned char *data = NULL;
    size_t cap = 0;
    *len = 0;
    if (f == NULL) return NULL;
    for (;;) {
        if (*len == cap) {
            cap = cap ? cap * 2 : 4096;
            unsigned char *grown = (unsigned char *)realloc(data, cap);
            if (grown == NULL) {
                free(data);
                fclose(f);
                return NULL;
            }
            data = grown;
        }
        size_t n = fread(data + *len, 1, cap - *len, f);
        if (n == 0) break;
        *len += n;
    }
    fclose(f);
    return data;
}

/* `len` bytes of `s` as a JSON string, on stdout. */
static void json_string(const char *s, size_t len) {
    putchar('"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            printf("\\%c", c);
        } else if (c < 0x20) {
            printf("\\u%04x", c);
        } else {
            putchar(c);
        }
    }
    putchar('"');
}

static int hex_digit(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Calls `f` with a buffer grown until the text fits; returns its status. */
static blocksieve_status grown(blocksieve_status (*f)(const char *, size_t, char *, size_t, size_t *),
                               const char *url, size_t url_len, char **buf, size_t *cap, size_t *len) {
    blocksieve_status status = f(url, url_len, *buf, *cap, len);
    if (status == BLOCKSIEVE_BUFFER_TOO_SMALL) {
        *cap = *len + 1;
        *buf = (char *)realloc(*buf, *cap);
        status = f(url, url_len, *buf, *cap, len);
    }
    return status;
}

/* The cross-language inputs (`xlang setup`'s inputs.txt: one input per
 * line, lowercase hex): decodes the line at `*pos` of `hex` into `*input`
 * (grown as needed, `*input_len` bytes) and moves `*pos` past it. Returns 0,
 * or 2 for a line that is not hex. */
static int xlang_next_input(const char *hex, size_t hex_len, size_t *pos, char **input, size_t *input_cap,
                            size_t *input_len, int line) {
    size_t end = *pos;
    while (end < hex_len && hex[end] != '\n') end++;
    *input_len = (end - *pos) / 2;
    if (*input_len + 1 > *input_cap) {
        *input_cap = *input_len + 1;
        *input = (char *)realloc(*input, *input_cap);
    }
    for (size_t i = 0; i < *input_len; i++) {
        int hi = hex_digit(hex[*pos + 2 * i]), lo = hex_digit(hex[*pos + 2 * i + 1]);
        if (hi < 0 || lo < 0) {
            fprintf(stderr, "xlang: bad hex on line %d\n", line);
            return 2;
        }
        (*input)[i] = (char)(hi * 16 + lo);
    }
    *pos = end + 1;
    return 0;
}

/* The start of an input's JSON line, as `xlang reference` writes it:
 * `{"canonical":...,"full_hashes":[...]` (the verdict follows). */
static void xlang_print_hashes(const char *input, size_t input_len, char **canonical, size_t *canonical_cap) {
    uint8_t hashes[30 * BLOCKSIEVE_FULL_HASH_BYTES];
    size_t len = 0;
    blocksieve_status status = grown(blocksieve_canonicalize, input, input_len, canonical, canonical_cap, &len);
    printf("{\"canonical\":");
    if (status == BLOCKSIEVE_OK) {
        json_string(*canonical, len);
    } else {
        printf("null");
    }
    printf(",\"full_hashes\":[");
    status = blocksieve_full_hashes(input, input_len, hashes, sizeof hashes, &len);
    for (size_t i = 0; status == BLOCKSIEVE_OK && i < len; i++) {
        printf("%s%02x", i == 0 ? "\"" : (i % 32 == 0 ? "\",\"" : ""), hashes[i]);
    }
    printf("%s]", status == BLOCKSIEVE_OK && len > 0 ? "\"" : "");
}

/* The end of an input's JSON line: the verdict of a check that returned
 * `status`. Returns 0, or 1 for a status the inputs never cause. */
static int xlang_print_verdict(blocksieve_status status, const blocksieve_verdict *v, const char *list,
                               const char *expression, int line) {
    if (status == BLOCKSIEVE_INVALID_URL) {
        printf(",\"verdict\":\"invalid\"}\n");
    } else if (status != BLOCKSIEVE_OK) {
        fprintf(stderr, "xlang: line %d: status %d: %s\n", line, (int)status, last_error());
        return 1;
    } else if (v->kind == BLOCKSIEVE_UNSAFE) {
        printf(",\"verdict\":\"unsafe\",\"list\":");
        json_string(list, v->list_len);
        printf(",\"expression\":");
        json_string(expression, v->expression_len);
        printf("}\n");
    } else {
        printf(",\"verdict\":\"%s\"}\n", v->kind == BLOCKSIEVE_SAFE ? "safe" : "unverified");
    }
    return 0;
}

#endif
