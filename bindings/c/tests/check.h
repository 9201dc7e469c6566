/* What the C test programs share: the check counter and CHECK, the
 * library's last error, reading a file whole, and the JSON and hex helpers
 * of their cross-language output. Included once per program (static
 * definitions). */
#ifndef BLOCKSIEVE_TEST_CHECK_H
#define BLOCKSIEVE_TEST_CHECK_H

#include "blocksieve.h"

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

#endif
