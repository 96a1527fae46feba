/* em_first_same.c: grouping equal 128-bit keys (em_core.h). */
#include "em_core.h"

static uint64_t mix(uint64_t a, uint64_t b) {
    uint64_t h = (a ^ (b * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 31);
}

int em_first_same(const uint64_t *a, const uint64_t *b, int32_t n, int32_t *first) {
    int32_t cap = 16, stack[1024]; /* up to 512 keys without an allocation */
    while (cap < 2 * n) cap *= 2;
    int32_t *table = cap <= 1024 ? stack : malloc(sizeof(int32_t) * (size_t)cap); /* entries: index + 1 */
    if (!table) return -1;
    memset(table, 0, sizeof(int32_t) * (size_t)cap);
    int any = 0;
    for (int32_t i = 0; i < n; i++) {
        first[i] = i;
        if (!a[i] && !b[i]) continue;
        for (uint64_t h = mix(a[i], b[i]);; h++) {
            int32_t *e = &table[h & (uint64_t)(cap - 1)];
            if (!*e) {
                *e = i + 1;
                break;
            }
            if (a[*e - 1] == a[i] && b[*e - 1] == b[i]) {
                first[i] = *e - 1;
                any = 1;
                break;
            }
        }
    }
    if (table != stack) free(table);
    return any;
}
