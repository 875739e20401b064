/* The canonical-ABI glue of the milpa:tool@0.1.0 world, by hand, for a C tool built with
 * clang and wasi-libc:
 *
 *   export call: func(args: string, ctx: call-context) -> result<string, tool-error>;
 *
 * The host passes the five strings as (pointer, length) pairs it wrote with cabi_realloc;
 * the result goes back through a 16-byte return area:
 *
 *   offset 0   u8   0 = ok, 1 = err
 *   ok:  4 u32 pointer, 8 u32 length of the result string
 *   err: 4 u8  0 = invalid-args, 1 = failed; 8 u32 pointer, 12 u32 length of the message
 *
 * A tool includes this file once and defines
 *
 *   int tool_call(const char *args, const struct tool_context *ctx, char **out);
 *
 * returning TOOL_OK (out: the JSON result), TOOL_INVALID_ARGS or TOOL_FAILED (out: the
 * message); out must be malloc'd and NUL-terminated. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOOL_OK 0
#define TOOL_INVALID_ARGS 1
#define TOOL_FAILED 2

struct tool_context {
  const char *principal;
  const char *channel;
  const char *request_id;
};

int tool_call(const char *args, const struct tool_context *ctx, char **out);

__attribute__((export_name("cabi_realloc")))
void *cabi_realloc(void *old, size_t old_size, size_t align, size_t new_size) {
  (void)old_size;
  if (new_size == 0) return (void *)align;
  void *p = realloc(old, new_size);
  if (!p) abort();
  return p;
}

/* A NUL-terminated copy of a string the host passed, which it no longer needs. */
static char *milpa_take(char *ptr, size_t len) {
  char *text = malloc(len + 1);
  if (!text) abort();
  memcpy(text, ptr, len);
  text[len] = '\0';
  if (len) free(ptr);
  return text;
}

static uint32_t milpa_return_area[4];

__attribute__((export_name("call")))
uint8_t *milpa_export_call(char *args, size_t args_len, char *principal, size_t principal_len,
                           char *channel, size_t channel_len, char *request_id,
                           size_t request_id_len) {
  struct tool_context ctx = {
      milpa_take(principal, principal_len),
      milpa_take(channel, channel_len),
      milpa_take(request_id, request_id_len),
  };
  char *text = milpa_take(args, args_len);
  char *out = NULL;
  int status = tool_call(text, &ctx, &out);
  if (!out) out = strdup("");
  uint8_t *area = (uint8_t *)milpa_return_area;
  memset(area, 0, sizeof milpa_return_area);
  if (status == TOOL_OK) {
    area[0] = 0;
    milpa_return_area[1] = (uint32_t)(uintptr_t)out;
    milpa_return_area[2] = (uint32_t)strlen(out);
  } else {
    area[0] = 1;
    area[4] = status == TOOL_INVALID_ARGS ? 0 : 1;
    milpa_return_area[2] = (uint32_t)(uintptr_t)out;
    milpa_return_area[3] = (uint32_t)strlen(out);
  }
  return area;
}

/* The string value of "key" in compact JSON (as the host sends it), copied into buf;
 * escapes are not decoded. Returns 0 when the key is absent. */
__attribute__((unused)) static int milpa_arg_string(const char *args, const char *key, char *buf, size_t size) {
  char pattern[64];
  snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
  const char *start = strstr(args, pattern);
  if (!start || size == 0) return 0;
  start += strlen(pattern);
  size_t n = 0;
  while (start[n] && start[n] != '"' && n + 1 < size) {
    buf[n] = start[n];
    n++;
  }
  buf[n] = '\0';
  return 1;
}

/* The integer value of "key" in compact JSON, or fallback. */
__attribute__((unused)) static long milpa_arg_long(const char *args, const char *key, long fallback) {
  char pattern[64];
  snprintf(pattern, sizeof pattern, "\"%s\":", key);
  const char *start = strstr(args, pattern);
  if (!start) return fallback;
  return strtol(start + strlen(pattern), NULL, 10);
}

/* A malloc'd printf. */
__attribute__((format(printf, 1, 2), unused))
static char *milpa_format(const char *format, ...) {
  va_list args;
  va_start(args, format);
  int n = vsnprintf(NULL, 0, format, args);
  va_end(args);
  char *text = malloc((size_t)n + 1);
  if (!text) abort();
  va_start(args, format);
  vsnprintf(text, (size_t)n + 1, format, args);
  va_end(args);
  return text;
}
