/* A test guest that makes one outgoing HTTP GET through wasi:http (imported by hand, world
 * milpa:test-guests/fetch): {"authority": "host:port", "path": "/x"}. Answers
 * {"status": N, "body": "..."} or failed with the wasi:http error code. */
#include "milpa_tool.h"

#define HTTP_TYPES "wasi:http/types@0.2.12"
#define HTTP_OUT "wasi:http/outgoing-handler@0.2.12"
#define IO_POLL "wasi:io/poll@0.2.12"
#define IO_STREAMS "wasi:io/streams@0.2.12"

__attribute__((import_module(HTTP_TYPES), import_name("[constructor]fields")))
extern int32_t fields_new(void);
__attribute__((import_module(HTTP_TYPES), import_name("[constructor]outgoing-request")))
extern int32_t request_new(int32_t headers);
/* option<scheme>: some?, scheme tag (0 HTTP, 1 HTTPS, 2 other), other's string. */
__attribute__((import_module(HTTP_TYPES), import_name("[method]outgoing-request.set-scheme")))
extern int32_t request_set_scheme(int32_t self, int32_t some, int32_t tag, const char *ptr, size_t len);
__attribute__((import_module(HTTP_TYPES), import_name("[method]outgoing-request.set-authority")))
extern int32_t request_set_authority(int32_t self, int32_t some, const char *ptr, size_t len);
__attribute__((import_module(HTTP_TYPES), import_name("[method]outgoing-request.set-path-with-query")))
extern int32_t request_set_path(int32_t self, int32_t some, const char *ptr, size_t len);
/* result<own<future-incoming-response>, error-code>: tag at 0, payload at 8. */
__attribute__((import_module(HTTP_OUT), import_name("handle")))
extern void handle(int32_t request, int32_t options_some, int32_t options, uint8_t *ret);
__attribute__((import_module(HTTP_TYPES), import_name("[method]future-incoming-response.subscribe")))
extern int32_t future_subscribe(int32_t self);
/* option<result<result<own<incoming-response>, error-code>>>: some at 0, outer result at 8,
 * inner result at 16, its payload at 24. */
__attribute__((import_module(HTTP_TYPES), import_name("[method]future-incoming-response.get")))
extern void future_get(int32_t self, uint8_t *ret);
__attribute__((import_module(IO_POLL), import_name("[method]pollable.block")))
extern void pollable_block(int32_t self);
__attribute__((import_module(HTTP_TYPES), import_name("[method]incoming-response.status")))
extern int32_t response_status(int32_t self);
/* result<own<incoming-body>>: tag at 0, handle at 4. */
__attribute__((import_module(HTTP_TYPES), import_name("[method]incoming-response.consume")))
extern void response_consume(int32_t self, uint32_t *ret);
__attribute__((import_module(HTTP_TYPES), import_name("[method]incoming-body.stream")))
extern void body_stream(int32_t self, uint32_t *ret);
/* result<list<u8>, stream-error>: tag at 0, list (pointer, length) or error tag at 4. */
__attribute__((import_module(IO_STREAMS), import_name("[method]input-stream.blocking-read")))
extern void stream_blocking_read(int32_t self, int64_t len, uint32_t *ret);

static int http_error(uint8_t code, char **out) {
  *out = milpa_format("http: error-code %u%s", code, code == 15 ? " (HTTP-request-denied)" : "");
  return TOOL_FAILED;
}

int tool_call(const char *args, const struct tool_context *ctx, char **out) {
  (void)ctx;
  char authority[256] = "";
  char path[256] = "/";
  milpa_arg_string(args, "authority", authority, sizeof authority);
  milpa_arg_string(args, "path", path, sizeof path);

  int32_t request = request_new(fields_new());
  request_set_scheme(request, 1, 0, NULL, 0);
  request_set_authority(request, 1, authority, strlen(authority));
  request_set_path(request, 1, path, strlen(path));

  static uint64_t sent[4];
  uint8_t *ret = (uint8_t *)sent;
  handle(request, 0, 0, ret);
  if (ret[0] != 0) return http_error(ret[8], out);
  int32_t future = *(int32_t *)(ret + 8);

  pollable_block(future_subscribe(future));
  static uint64_t got[5];
  uint8_t *answer = (uint8_t *)got;
  future_get(future, answer);
  if (answer[0] == 0 || answer[8] != 0) {
    *out = strdup("http: no response");
    return TOOL_FAILED;
  }
  if (answer[16] != 0) return http_error(answer[24], out);
  int32_t response = *(int32_t *)(answer + 24);
  int32_t status = response_status(response);

  uint32_t r[3];
  response_consume(response, r);
  if (r[0] & 0xff) {
    *out = strdup("http: no body");
    return TOOL_FAILED;
  }
  body_stream((int32_t)r[1], r);
  if (r[0] & 0xff) {
    *out = strdup("http: no body stream");
    return TOOL_FAILED;
  }
  int32_t stream = (int32_t)r[1];
  static char body[4096];
  size_t used = 0;
  for (;;) {
    stream_blocking_read(stream, (int64_t)(sizeof body - 1 - used), r);
    if (r[0] & 0xff) break; /* closed (or failed): the body is done */
    size_t n = r[2];
    memcpy(body + used, (void *)(uintptr_t)r[1], n);
    free((void *)(uintptr_t)r[1]);
    used += n;
    if (used >= sizeof body - 1) break;
  }
  body[used] = '\0';
  for (size_t i = 0; i < used; i++) {
    if (body[i] < 32 || body[i] > 126 || body[i] == '"' || body[i] == '\\') body[i] = '.';
  }
  *out = milpa_format("{\"status\":%d,\"body\":\"%s\"}", status, body);
  return TOOL_OK;
}
