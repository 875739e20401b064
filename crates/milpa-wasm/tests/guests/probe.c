/* A test guest that does what its arguments say: {"do": "echo"}, or one of the escapes a
 * sandbox must stop (read a file, write one, list a folder, eat memory, loop, recurse,
 * print without end), or one of the ways a tool answers badly. */
#include <dirent.h>
#include <errno.h>

#include "milpa_tool.h"

/* Counts the calls this instance has answered: every call gets a fresh instance, so the
 * count a call sees is always 1. */
static int calls;

static int failed(char **out, const char *what) {
  *out = milpa_format("%s: %s", what, strerror(errno));
  return TOOL_FAILED;
}

static int read_file(const char *path, char **out) {
  FILE *file = fopen(path, "r");
  if (!file) return failed(out, path);
  static char content[4096];
  size_t n = fread(content, 1, sizeof content - 1, file);
  fclose(file);
  content[n] = '\0';
  /* Only printable ASCII, no quotes: the tests' files are plain words. */
  for (size_t i = 0; i < n; i++) {
    if (content[i] < 32 || content[i] > 126 || content[i] == '"' || content[i] == '\\') content[i] = '.';
  }
  *out = milpa_format("{\"content\":\"%s\"}", content);
  return TOOL_OK;
}

static int write_file(const char *path, char **out) {
  FILE *file = fopen(path, "w");
  if (!file) return failed(out, path);
  fputs("written by the guest\n", file);
  if (fclose(file) != 0) return failed(out, path);
  *out = milpa_format("{\"written\":\"%s\"}", path);
  return TOOL_OK;
}

static int list_folder(const char *path, char **out) {
  DIR *dir = opendir(path);
  if (!dir) return failed(out, path);
  int entries = 0;
  while (readdir(dir)) entries++;
  closedir(dir);
  *out = milpa_format("{\"entries\":%d}", entries);
  return TOOL_OK;
}

/* Where eaten blocks go, so the optimizer cannot drop the allocations. */
static char *volatile last_block;

static int eat_memory(char **out) {
  size_t total = 0;
  for (;;) {
    char *block = malloc(1 << 20);
    if (!block) break;
    memset(block, 1, 1 << 20);
    last_block = block;
    total += 1 << 20;
  }
  *out = milpa_format("{\"allocated_mib\":%zu}", total >> 20);
  return TOOL_OK;
}

static int spin(char **out) {
  volatile unsigned long counter = 0;
  for (;;) counter++;
  *out = milpa_format("{\"counter\":%lu}", counter);
  return TOOL_OK;
}

/* Recursion the optimizer cannot turn into a loop: each level calls through a pointer. */
static int deeper(int depth);
static int (*volatile next_level)(int) = deeper;
static int deeper(int depth) {
  if (depth == 0) return 0;
  return next_level(depth - 1) + 1;
}

static int print_forever(long megabytes, char **out) {
  static char chunk[1 << 16];
  memset(chunk, 'x', sizeof chunk);
  long written = 0;
  for (long i = 0; i < megabytes * 16; i++) {
    written += (long)fwrite(chunk, 1, sizeof chunk, stdout);
  }
  fflush(stdout);
  *out = milpa_format("{\"written\":%ld}", written);
  return TOOL_OK;
}

static int big_result(long bytes, char **out) {
  char *text = malloc((size_t)bytes + 3);
  if (!text) abort();
  text[0] = '"';
  memset(text + 1, 'x', (size_t)bytes);
  text[bytes + 1] = '"';
  text[bytes + 2] = '\0';
  *out = text;
  return TOOL_OK;
}

int tool_call(const char *args, const struct tool_context *ctx, char **out) {
  calls++;
  char what[32] = "echo";
  char path[1024] = "";
  milpa_arg_string(args, "do", what, sizeof what);
  milpa_arg_string(args, "path", path, sizeof path);
  if (!strcmp(what, "echo")) {
    const char *greeting = getenv("GREETING");
    const char *home = getenv("HOME");
    *out = milpa_format(
        "{\"args\":%s,\"principal\":\"%s\",\"channel\":\"%s\",\"request_id\":\"%s\","
        "\"calls\":%d,\"greeting\":\"%s\",\"home\":\"%s\"}",
        args, ctx->principal, ctx->channel, ctx->request_id, calls,
        greeting ? greeting : "", home ? home : "");
    return TOOL_OK;
  }
  if (!strcmp(what, "read")) return read_file(path, out);
  if (!strcmp(what, "write")) return write_file(path, out);
  if (!strcmp(what, "list")) return list_folder(path, out);
  if (!strcmp(what, "memory")) return eat_memory(out);
  if (!strcmp(what, "loop")) return spin(out);
  if (!strcmp(what, "stack")) {
    *out = milpa_format("{\"depth\":%d}", next_level(100000000));
    return TOOL_OK;
  }
  if (!strcmp(what, "print")) return print_forever(milpa_arg_long(args, "mb", 100), out);
  if (!strcmp(what, "stderr")) {
    fprintf(stderr, "about to fail\n");
    *out = strdup("the guest gave up");
    return TOOL_FAILED;
  }
  if (!strcmp(what, "big")) return big_result(milpa_arg_long(args, "bytes", 10), out);
  if (!strcmp(what, "not_json")) {
    *out = strdup("this is not JSON");
    return TOOL_OK;
  }
  if (!strcmp(what, "invalid")) {
    *out = strdup("text: must not be empty");
    return TOOL_INVALID_ARGS;
  }
  if (!strcmp(what, "trap")) __builtin_trap();
  *out = milpa_format("unknown action: %s", what);
  return TOOL_INVALID_ARGS;
}
