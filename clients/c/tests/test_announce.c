/*
 * test_announce.c: the announcement validator against the protocol's shared test vectors
 * (protocol/vectors/announcements.json, or $FRAMESRV_VECTORS): every valid vector passes,
 * every invalid one fails with its error name in the message (version: FRAMESRV_E_VERSION,
 * naming both versions).
 */
#include "check.h"
#include "validate.h"

/* The value of "key": "..." inside [object, end), copied into out; false if absent. */
static bool string_field(const char *object, const char *end, const char *key, char *out, size_t size)
{
    char pattern[40];
    snprintf(pattern, sizeof pattern, "\"%s\": \"", key);
    const char *p = strstr(object, pattern);
    if (!p || p >= end) return false;
    p += strlen(pattern);
    const char *q = strchr(p, '"');
    if (!q || q >= end || (size_t)(q - p) >= size) return false;
    memcpy(out, p, (size_t)(q - p));
    out[q - p] = '\0';
    return true;
}

static size_t from_hex(const char *hex, uint8_t *out, size_t size)
{
    size_t n = 0;
    for (; hex[0] && hex[1] && n < size; hex += 2) {
        unsigned v;
        if (sscanf(hex, "%2x", &v) != 1) break;
        out[n++] = (uint8_t)v;
    }
    return n;
}

static int check_vector(const char *object, const char *end)
{
    char name[64], hex[512], error[32];
    uint8_t bytes[256];
    if (!string_field(object, end, "name", name, sizeof name) || !string_field(object, end, "hex", hex, sizeof hex)) return 0;
    size_t n = from_hex(hex, bytes, sizeof bytes);
    int status = fsi_validate_announce(bytes, n);
    if (string_field(object, end, "error", error, sizeof error)) {
        char expected[48];
        snprintf(expected, sizeof expected, "(%s)", error);
        /* A version mismatch is the one fatal error, with its own status (PROTOCOL.md 5). */
        int wanted = strcmp(error, "version") == 0 ? FRAMESRV_E_VERSION : FRAMESRV_E_BAD_DATA;
        CHECK(status == wanted && strstr(framesrv_last_error(), expected), "%s: %s, %s", name, framesrv_status_name(status),
              framesrv_last_error());
    } else {
        CHECK_STATUS(status, FRAMESRV_OK);
    }
    return 1;
}

/* name_len outside 1..48 is `name-len`, even when the length agrees (PROTOCOL.md 5). */
static void name_len_bounds(void)
{
    uint8_t m[sizeof(fs_announce) + 49];
    const uint16_t lens[] = { 0, 49 };
    for (int i = 0; i < 2; i++) {
        fs_announce a = { .magic = FS_MAGIC_ANNOUNCE, .version = FS_PROTOCOL_VERSION, .kind = FS_ANNOUNCE_FRAME, .seq = 1,
                          .name_len = lens[i] };
        memcpy(m, &a, sizeof a);
        memset(m + sizeof a, 'n', 49);
        int status = fsi_validate_announce(m, sizeof a + lens[i]);
        CHECK(status == FRAMESRV_E_BAD_DATA && strstr(framesrv_last_error(), "(name-len)"), "name_len %u: %s", lens[i],
              framesrv_last_error());
    }
}

int main(void)
{
    name_len_bounds();
    const char *path = getenv("FRAMESRV_VECTORS") ? getenv("FRAMESRV_VECTORS") : "../../protocol/vectors/announcements.json";
    FILE *f = fopen(path, "r");
    static char text[1 << 20];
    size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    CHECK(len > 0, "cannot read %s", path);
    text[len] = '\0';
    int vectors = 0;
    for (const char *o = strchr(text, '{'); o; o = strchr(o + 1, '{')) {
        const char *end = strchr(o, '}');
        vectors += check_vector(o, end ? end : text + len);
    }
    CHECK(vectors >= 15, "only %d vectors in %s", vectors, path);
    return check_exit("test_announce");
}
